typedef int vs_placeholder_interpose;

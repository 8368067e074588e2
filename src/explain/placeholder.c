/* placeholder: replaced when this concern lands */ typedef int vs_placeholder_explain;

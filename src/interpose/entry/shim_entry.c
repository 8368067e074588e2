/* The shared library's own translation unit; everything lives in the static libraries. */
typedef int vs_shim_entry_unused;

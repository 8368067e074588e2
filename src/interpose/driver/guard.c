/* The thread-local "inside the shim" guard (guard.h). */
#include "guard.h"

__thread int vs_guard_depth __attribute__((tls_model("initial-exec")));

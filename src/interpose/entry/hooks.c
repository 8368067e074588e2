/* The exported entry points, one per row of hook_list.h. Each is declared
 * by cuda.h, so a row whose parameters differ from the real prototype does
 * not compile. Each jumps to its hidden body vs_hook_<name>: the tables
 * (hook_table.c) point at these exported symbols, so a program sees one
 * address per hook whichever path it took. */
#include "hooks.h"
#include "init.h"

#include "export.h"

#define X(name, params, args) \
  VS_EXPORT CUresult name params {           \
    vs_start();                               \
    return vs_hook_##name args;               \
  }
VS_HOOKS(X)
#undef X

/* The hook table generated from hook_list.h: ids, hook prototypes, and the
 * two lookups every path needs (by exported name for dlsym, by the driver's
 * real pointer for cuGetProcAddress). */
#ifndef VS_HOOKS_H
#define VS_HOOKS_H

#include "cuda_api.h"
#include "hook_list.h"
#include "vramshim.h"

#include <stdint.h>

typedef enum vs_hook_id {
#define X(name, params, args) VS_HOOK_##name,
  VS_HOOKS(X)
#undef X
  VS_HOOK_COUNT
} vs_hook_id;

/* The body of each hook (one per row, hidden). The exported entry point
 * `name` (hooks.c) jumps straight to it. */
#define X(name, params, args) CUresult vs_hook_##name params;
VS_HOOKS(X)
#undef X

/* Exact exported name -> id, or -1. Cheap for non-"cu" names. */
int vs_hook_by_name(const char *name);
/* The driver's own pointer of a hooked variant -> id, or -1. Needs the
 * driver table loaded (vs_driver()). */
int vs_hook_by_real(const void *real_fn);
/* What every path hands out for a hook: the exported entry point. */
void *vs_hook_addr(vs_hook_id id);
/* One of the shim's own entry points -> id, or -1 (a driver whose lookup
 * table took &cuMemAlloc_v2 through its GOT hands out the shim's symbol). */
int vs_hook_by_addr(const void *fn);
const char *vs_hook_name(vs_hook_id id);

/* Counters behind vramshim_hook_count(). */
void vs_hook_count(vs_hook_id id, vramshim_path path);
void vs_hook_counts_reset(void);   /* fork child */

#endif

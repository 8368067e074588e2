/* The entry points' tables, generated from hook_list.h (the ids and the
 * hook bodies' prototypes are driver/hook_ids.h): the lookups every path
 * needs (by exported name for dlsym, by the driver's
 * real pointer for cuGetProcAddress). */
#ifndef VS_HOOKS_H
#define VS_HOOKS_H

#include "hook_ids.h"

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

#endif

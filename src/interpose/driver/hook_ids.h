/* The hooked ABI variants by number: one id per row of hook_list.h, each
 * hook body's prototype, and the per-path call counters behind
 * vramshim_hook_count(). Every folder that holds a hook body includes this;
 * the tables that hand hooks out (by name, by the driver's pointer) are the
 * entry points' (entry/hooks.h). */
#ifndef VS_HOOK_IDS_H
#define VS_HOOK_IDS_H

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
 * `name` (entry/hooks.c) jumps straight to it. */
#define X(name, params, args) CUresult vs_hook_##name params;
VS_HOOKS(X)
#undef X

/* Each hook's exported name, by id. */
extern const char *const vs_hook_names[VS_HOOK_COUNT];
static inline const char *vs_hook_name(vs_hook_id id) { return vs_hook_names[id]; }

/* Counters behind vramshim_hook_count(). */
void vs_hook_count(vs_hook_id id, vramshim_path path);
void vs_hook_counts_reset(void);   /* fork child */

#endif

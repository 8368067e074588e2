/* The hooks' names and per-path call counters (hook_ids.h), and the public
 * vramshim_hook_count() over them. */
#include "hook_ids.h"

#include "export.h"

#include <stdatomic.h>
#include <string.h>

const char *const vs_hook_names[VS_HOOK_COUNT] = {
#define X(name, params, args) #name,
    VS_HOOKS(X)
#undef X
};

/* Per hook, per path. Relaxed: they are statistics, read after the fact. */
static _Atomic uint64_t g_count[VS_HOOK_COUNT][VRAMSHIM_PATHS];

void vs_hook_count(vs_hook_id id, vramshim_path path) {
  atomic_fetch_add_explicit(&g_count[id][path], 1, memory_order_relaxed);
}

void vs_hook_counts_reset(void) {
  for (int i = 0; i < VS_HOOK_COUNT; i++)
    for (int p = 0; p < VRAMSHIM_PATHS; p++) atomic_store_explicit(&g_count[i][p], 0, memory_order_relaxed);
}

VS_EXPORT uint64_t vramshim_hook_count(const char *fn, vramshim_path path) {
  if ((int)path < 0 || path >= VRAMSHIM_PATHS) return 0;
  uint64_t sum = 0;
  for (int i = 0; i < VS_HOOK_COUNT; i++)
    if (!fn || strcmp(fn, vs_hook_names[i]) == 0) sum += atomic_load_explicit(&g_count[i][path], memory_order_relaxed);
  return sum;
}

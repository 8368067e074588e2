/* The tables generated from hook_list.h, and the lookups by name and by
 * the driver's pointer that dlsym and cuGetProcAddress answer with. */
#include "hooks.h"

#include "driver_table.h"
#include "export.h"

#include <stdatomic.h>
#include <string.h>

/* Exported entry points, so every path hands out the very symbol a program
 * linked with -lcuda binds to. */
static void *const g_addr[VS_HOOK_COUNT] = {
#define X(name, params, args) (void *)&name,
    VS_HOOKS(X)
#undef X
};

static const char *const g_name[VS_HOOK_COUNT] = {
#define X(name, params, args) #name,
    VS_HOOKS(X)
#undef X
};

/* Per hook, per path. Relaxed: they are statistics, read after the fact. */
static _Atomic uint64_t g_count[VS_HOOK_COUNT][VRAMSHIM_PATHS];

int vs_hook_by_name(const char *name) {
  if (!name || name[0] != 'c' || name[1] != 'u') return -1;
  for (int i = 0; i < VS_HOOK_COUNT; i++)
    if (strcmp(name + 2, g_name[i] + 2) == 0) return i;
  return -1;
}

int vs_hook_by_real(const void *real_fn) {
  void *const *reals = vs_driver_reals();
  if (!real_fn || !reals) return -1;
  for (int i = 0; i < VS_HOOK_COUNT; i++)
    if (reals[i] == real_fn) return i;
  return -1;
}

void *vs_hook_addr(vs_hook_id id) { return g_addr[id]; }

int vs_hook_by_addr(const void *fn) {
  for (int i = 0; i < VS_HOOK_COUNT; i++)
    if (g_addr[i] == fn) return i;
  return -1;
}
const char *vs_hook_name(vs_hook_id id) { return g_name[id]; }

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
    if (!fn || strcmp(fn, g_name[i]) == 0) sum += atomic_load_explicit(&g_count[i][path], memory_order_relaxed);
  return sum;
}

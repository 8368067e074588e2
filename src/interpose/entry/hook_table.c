/* The tables generated from hook_list.h, and the lookups by name and by
 * the driver's pointer that dlsym and cuGetProcAddress answer with. */
#include "hooks.h"

#include "driver_table.h"

#include <string.h>

/* Exported entry points, so every path hands out the very symbol a program
 * linked with -lcuda binds to. */
static void *const g_addr[VS_HOOK_COUNT] = {
#define X(name, params, args) (void *)&name,
    VS_HOOKS(X)
#undef X
};

int vs_hook_by_name(const char *name) {
  if (!name || name[0] != 'c' || name[1] != 'u') return -1;
  for (int i = 0; i < VS_HOOK_COUNT; i++)
    if (strcmp(name + 2, vs_hook_names[i] + 2) == 0) return i;
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

/* The hooks' names and per-path call counters (hook_ids.h), and the public
 * vramshim_hook_count() over them. */
#include "hook_ids.h"

#include "export.h"
#include "tally.h"

#include <stdatomic.h>
#include <string.h>

const char *const vs_hook_names[VS_HOOK_COUNT] = {
#define X(name, params, args) #name,
    VS_HOOKS(X)
#undef X
};

/* Per path, per hook (path-major, so one path's counts are one run and a
 * query sums them in one pass), in per-thread tallies (common/tally.h):
 * every hook call counts, so no locked instruction here. */
#define N_COUNTS (VRAMSHIM_PATHS * VS_HOOK_COUNT)
static _Atomic uint64_t g_retired[N_COUNTS];
static vs_tally g_count = VS_TALLY_INIT(N_COUNTS, g_retired);

void vs_hook_count(vs_hook_id id, vramshim_path path) {
  vs_tally_add(&g_count, (uint32_t)path * VS_HOOK_COUNT + (uint32_t)id, 1);
}

void vs_hook_counts_reset(void) { vs_tally_reset(&g_count); }

VS_EXPORT uint64_t vramshim_hook_count(const char *fn, vramshim_path path) {
  if ((int)path < 0 || path >= VRAMSHIM_PATHS) return 0;
  uint64_t n[VS_HOOK_COUNT], sum = 0;
  vs_tally_sums(&g_count, (uint32_t)path * VS_HOOK_COUNT, VS_HOOK_COUNT, n);
  for (int i = 0; i < VS_HOOK_COUNT; i++)
    if (!fn || strcmp(fn, vs_hook_names[i]) == 0) sum += n[i];
  return sum;
}

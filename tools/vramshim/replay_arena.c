/* The arena replay policies (`chunks`, `vmm`): placeholder until the arena
 * (src/arena) is implemented. They report that the arena is unavailable. */
#include <stdio.h>

#include "replay.h"

static void *na_create(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err, size_t errlen) {
  (void)capacity, (void)nallocs, (void)o;
  snprintf(err, errlen, "the arena is not available in this build (src/arena is not implemented yet)");
  return NULL;
}
static int na_alloc(void *p, uint32_t id, uint64_t size, uint64_t stream) {
  (void)p, (void)id, (void)size, (void)stream;
  return -1;
}
static void na_free(void *p, uint32_t id, uint64_t size) { (void)p, (void)id, (void)size; }
static void na_stats(void *p, vs_policy_stats *s) { (void)p, (void)s; }
static void na_destroy(void *p) { (void)p; }

const vs_policy vs_policy_chunks = {"chunks", "the arena with dedicated chunks for large requests (arena = chunks)",
                                    na_create, na_alloc, na_free, na_stats, na_destroy};
const vs_policy vs_policy_vmm = {"vmm", "the arena with VMM stitching for large requests (arena = vmm)",
                                 na_create, na_alloc, na_free, na_stats, na_destroy};

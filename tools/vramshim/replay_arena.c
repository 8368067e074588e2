/* The arena replay policies, `chunks` and `vmm`: the real arena
 * (src/arena/arena.h) over the simulated address space
 * (src/arena/space_backend.h), with VMM on (2 MiB granules) or off. Peak
 * reserved and driver calls are read from the backend, the same counters
 * the `off` policy reports; after each run the arena's invariant checker
 * walks the whole arena and the backend must have seen no misuse. */
#include <stdio.h>
#include <stdlib.h>

#include "arena.h"
#include "replay.h"
#include "space_backend.h"

typedef struct ar_state {
  vs_space_backend *sb;
  vs_arena *a;
  uint64_t *addr; /* per allocation id */
  vs_arena_mode mode;
  uint64_t bad_frees; /* frees the arena refused: an arena bug */
} ar_state;

static void ar_destroy(void *p) {
  ar_state *s = p;
  if (!s) return;
  if (s->a) vs_arena_destroy(s->a);
  if (s->sb) vs_space_backend_destroy(s->sb);
  free(s->addr);
  free(s);
}

static void *ar_create(vs_arena_mode mode, uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err,
                       size_t errlen) {
  ar_state *s = calloc(1, sizeof *s);
  if (s) {
    s->addr = calloc(nallocs ? nallocs : 1, sizeof *s->addr);
    s->sb = vs_space_backend_create(capacity, 0);
  }
  if (!s || !s->addr || !s->sb) {
    ar_destroy(s);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  s->mode = mode;
  vs_arena_backend be = vs_space_backend_get_mode(s->sb, mode == VS_ARENA_VMM);
  vs_arena_config cfg = {.mode = mode, .release_threshold = o->release_threshold};
  if (!(s->a = vs_arena_create(&cfg, &be))) {
    ar_destroy(s);
    snprintf(err, errlen, "the arena is unavailable: vs_arena_create (mode %s) failed",
             mode == VS_ARENA_VMM ? "vmm" : "chunks");
    return NULL;
  }
  return s;
}

static void *chunks_create(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err, size_t errlen) {
  return ar_create(VS_ARENA_CHUNKS, capacity, nallocs, o, err, errlen);
}
static void *vmm_create(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err, size_t errlen) {
  return ar_create(VS_ARENA_VMM, capacity, nallocs, o, err, errlen);
}

static int ar_alloc(void *p, uint32_t id, uint64_t size, uint64_t stream) {
  (void)stream; /* the arena is stream-ordered by sync, not per stream */
  ar_state *s = p;
  int rc = vs_arena_alloc(s->a, size, &s->addr[id]);
  return rc == VS_BACKEND_OK ? 0 : rc == VS_BACKEND_OOM ? 1 : -1;
}

static void ar_free(void *p, uint32_t id, uint64_t size) {
  (void)size;
  ar_state *s = p;
  if (vs_arena_free(s->a, s->addr[id])) s->bad_frees++;
}

static void ar_stats(void *p, vs_policy_stats *out) {
  ar_state *s = p;
  vs_space_counters c;
  vs_space_backend_counters(s->sb, &c);
  vs_arena_stats st;
  vs_arena_get_stats(s->a, &st);
  out->peak_reserved = c.peak_held;
  out->driver_calls = vs_space_backend_calls(&c);
  out->served_from_cache = st.served_from_cache;
  char why[160];
  if (s->bad_frees)
    snprintf(out->problem, sizeof out->problem, "the arena refused %llu frees of its own allocations",
             (unsigned long long)s->bad_frees);
  else if (vs_arena_check(s->a, why, sizeof why))
    snprintf(out->problem, sizeof out->problem, "arena invariant broken: %s", why);
  else if (c.errors)
    snprintf(out->problem, sizeof out->problem, "the arena misused the backend %llu times",
             (unsigned long long)c.errors);
}

const vs_policy vs_policy_chunks = {
    .name = "chunks",
    .summary = "the arena, large requests in dedicated chunks (arena = chunks)",
    .create = chunks_create,
    .alloc = ar_alloc,
    .free = ar_free,
    .stats = ar_stats,
    .destroy = ar_destroy,
};
const vs_policy vs_policy_vmm = {
    .name = "vmm",
    .summary = "the arena, large requests on VMM-stitched granules (arena = vmm)",
    .create = vmm_create,
    .alloc = ar_alloc,
    .free = ar_free,
    .stats = ar_stats,
    .destroy = ar_destroy,
};

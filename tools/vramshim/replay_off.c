/* The `off` replay policy: no caching. Every allocation is one driver
 * allocation of exactly the requested size, every free one driver free:
 * what a program gets with `arena = off`. Runs over the simulated address
 * space (space_backend.h), so its capacity and call counts are the same
 * model the arena policies run over. */
#include <stdio.h>
#include <stdlib.h>

#include "replay.h"
#include "space_backend.h"

typedef struct off_state {
  vs_space_backend *sb;
  vs_arena_backend be;
  uint64_t *addr; /* per allocation id */
  const vs_cost_table *costs;
  vs_call_tally tally;
} off_state;

static void off_destroy(void *p) {
  off_state *s = p;
  if (!s) return;
  if (s->sb) vs_space_backend_destroy(s->sb);
  free(s->addr);
  free(s);
}

static void *off_create(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err, size_t errlen) {
  off_state *s = calloc(1, sizeof *s);
  if (s) s->costs = o->costs;
  if (s) {
    s->addr = calloc(nallocs ? nallocs : 1, sizeof *s->addr);
    s->sb = vs_space_backend_create(capacity, 0);
  }
  if (!s || !s->addr || !s->sb) {
    off_destroy(s);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  s->be = vs_space_backend_get_mode(s->sb, 0);
  return s;
}

static int off_alloc(void *p, uint32_t id, uint64_t size, uint64_t stream) {
  (void)stream;
  off_state *s = p;
  vs_tally(&s->tally, s->costs, VS_CALL_MEM_ALLOC, size);
  int rc = s->be.chunk_alloc(s->be.ctx, size, &s->addr[id]);
  return rc == VS_BACKEND_OK ? VS_POLICY_DRIVER : rc == VS_BACKEND_OOM ? VS_POLICY_REFUSED : -1;
}

static void off_free(void *p, uint32_t id, uint64_t size) {
  off_state *s = p;
  vs_tally(&s->tally, s->costs, VS_CALL_MEM_FREE, size);
  /* Cannot fail: the id holds a live chunk of exactly this size; a misuse
   * would show in the backend's error counter. */
  (void)s->be.chunk_free(s->be.ctx, s->addr[id], size);
}

static void off_stats(void *p, vs_policy_stats *out) {
  off_state *s = p;
  vs_space_counters c;
  vs_space_backend_counters(s->sb, &c);
  out->peak_reserved = c.peak_held;
  out->driver_calls = vs_space_backend_calls(&c);
  out->tally = s->tally;
}

static void off_probe(void *p, uint64_t *reserved, uint64_t *calls) {
  off_state *s = p;
  vs_space_counters c;
  vs_space_backend_counters(s->sb, &c);
  *reserved = c.held;
  *calls = vs_space_backend_calls(&c);
}

const vs_policy vs_policy_off = {
    .name = "off",
    .summary = "no cache: one driver allocation per request, one driver free per free",
    .create = off_create,
    .alloc = off_alloc,
    .free = off_free,
    .stats = off_stats,
    .destroy = off_destroy,
    .probe = off_probe,
};

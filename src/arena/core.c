/* The arena's core services, below slab.c and heap.c (which both use them
 * and neither of which is used here): backend call counting, the sync
 * generations of stream-safe reuse (see arena.c), live bytes and their
 * peak, and the decay clock. */
#include "core.h"

#include <time.h>

_Thread_local uint64_t vs_tl_calls __attribute__((tls_model("initial-exec")));

int vs_arena_call_done(vs_arena *a) {
  atomic_fetch_add_explicit(&a->backend_calls, 1, memory_order_relaxed);
  vs_tl_calls++;
  return 0;
}

uint64_t vs_arena_now(vs_arena *a) {
  if (a->clock) return a->clock(a->clock_ctx);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A free's stamp. `stamped` keeps the newest one handed out (written only
 * when the generation moved on, so the hot path mostly reads a line no one
 * writes): a sync can then tell that every pending block is already ready. */
uint64_t vs_arena_stamp(vs_arena *a) {
  uint64_t s = atomic_load(&a->sync_started);
  vs_atomic_raise(&a->stamped, s);
  return s;
}
int vs_arena_ready(vs_arena *a, uint64_t stamp) { return stamp < atomic_load(&a->sync_done); }

void vs_arena_sync(vs_arena *a) {
  /* Every pending block is ready already (the program's own syncs made it
   * so): a sync would make nothing reusable, so none is made. */
  if (atomic_load(&a->stamped) < atomic_load(&a->sync_done)) return;
  uint64_t gen = atomic_fetch_add(&a->sync_started, 1) + 1;
  vs_arena_call_done(a);
  atomic_fetch_add_explicit(&a->syncs, 1, memory_order_relaxed);
  if (a->be.sync(a->be.ctx) != VS_BACKEND_OK) return;   /* nothing becomes reusable */
  vs_atomic_raise(&a->sync_done, gen);
}

void vs_arena_live_add(vs_arena *a, uint64_t req) {
  uint64_t live = atomic_fetch_add_explicit(&a->live_bytes, req, memory_order_relaxed) + req;
  vs_atomic_raise(&a->peak_live, live);
}


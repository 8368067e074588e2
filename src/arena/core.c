/* The arena's core services, below slab.c and heap.c (which both use them
 * and neither of which is used here): backend call counting, the sync
 * generations of stream-safe reuse (see arena.c), live bytes and their
 * peak, and the decay clock. */
#include "core.h"

#include <sched.h>
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

uint64_t vs_arena_hold_stamp(vs_arena *a) { return vs_arena_stamp(a); }

int vs_arena_hold_settled(vs_arena *a, uint64_t stamp) {
  if (vs_arena_ready(a, stamp)) return 1;
  vs_arena_sync(a);
  return vs_arena_ready(a, stamp);
}

int vs_arena_sync(vs_arena *a) {
  /* Every pending block is ready already (the program's own syncs made it
   * so): a sync would make nothing reusable, so none is made. */
  if (atomic_load(&a->stamped) < atomic_load(&a->sync_done)) return 0;
  /* Held: as a sync that failed (the caller grows instead), but no call. */
  if (!vs_arena_unsafe_enter(a)) return 1;
  uint64_t gen = atomic_fetch_add(&a->sync_started, 1) + 1;
  vs_arena_call_done(a);
  atomic_fetch_add_explicit(&a->syncs, 1, memory_order_relaxed);
  int ok = a->be.sync(a->be.ctx) == VS_BACKEND_OK;
  vs_arena_unsafe_leave(a);
  if (ok) vs_atomic_raise(&a->sync_done, gen);   /* failed: nothing becomes reusable */
  return 1;
}

/* Spins, not the heap's lock: a thread allocating in a loop holds that
 * lock across its driver calls. Each unsafe window is one driver call
 * (trim_locked releases call by call), so the wait is at most one. */
void vs_arena_fence(vs_arena *a) {
  if (!a) return;
  while (atomic_load(&a->unsafe_calls)) sched_yield();
}

/* Ski rental. Where pending frees could serve a request that would
 * otherwise grow the heap (heap.c before a growth, slab.c's bins), a sync
 * is the cheap way once, and the dear one when it comes back every few
 * requests: a server whose step frees and allocates its activations again
 * before its own sync (docs/arena.md, "The program's own
 * synchronisations") meets the same shortfall every step, and a sync
 * stalls the host until the whole device is idle. So once such syncs
 * without a growth between them have cost what the growth would (priced
 * in syncs: VS_SYNC_RENT, and one more per VS_RENT_BYTES it would map),
 * the next such need grows instead; the growth (a driver call, and
 * memory the steps then reuse) resets the count. Never once the backend
 * has refused (pressure: a full card or a tenant at its limit), where a
 * sync is the only way; a growth refused is followed by the sync it
 * replaced (heap.c, slab.c). */
int vs_arena_sync_or_grow(vs_arena *a, uint64_t grow) {
  /* Rent counts within one decay window: what a growth buys is kept about
   * that long unused, so syncs spread wider than that -- one per swing of
   * a slow workload -- buy nothing. Without decay (memory beyond
   * release_threshold goes back at once) nothing is bought: the operator
   * chose memory over calls. */
  uint64_t window = atomic_load_explicit(&a->decay_ns, memory_order_relaxed);
  if (!window || atomic_load(&a->heap.pressure)) {
    vs_arena_sync(a);
    return 1;
  }
  uint64_t now = vs_arena_now(a);
  if (!atomic_load_explicit(&a->rent, memory_order_relaxed) ||
      now - atomic_load_explicit(&a->rent_since, memory_order_relaxed) > window) {   /* a first sync, or a stale count */
    atomic_store_explicit(&a->rent, 0, memory_order_relaxed);
    atomic_store_explicit(&a->rent_since, now, memory_order_relaxed);
  }
  if (atomic_load_explicit(&a->rent, memory_order_relaxed) >= VS_SYNC_RENT + grow / VS_RENT_BYTES) return 0;
  if (vs_arena_sync(a)) atomic_fetch_add_explicit(&a->rent, 1, memory_order_relaxed);
  return 1;
}

void vs_arena_slab_live_add(vs_arena *a, int64_t folded) {
  uint64_t slab = atomic_fetch_add_explicit(&a->slab_live, (uint64_t)folded, memory_order_relaxed) + (uint64_t)folded;
  if (folded > 0) vs_atomic_raise(&a->peak_live, slab + atomic_load_explicit(&a->heap_live, memory_order_relaxed));
}

void vs_arena_heap_live_set(vs_arena *a, uint64_t live) {
  uint64_t was = atomic_load_explicit(&a->heap_live, memory_order_relaxed);
  atomic_store_explicit(&a->heap_live, live, memory_order_relaxed);
  if (live > was) vs_atomic_raise(&a->peak_live, live + atomic_load_explicit(&a->slab_live, memory_order_relaxed));
}

uint64_t vs_arena_live(vs_arena *a) {
  return atomic_load_explicit(&a->heap_live, memory_order_relaxed) +
         atomic_load_explicit(&a->slab_live, memory_order_relaxed);
}


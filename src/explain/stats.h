/* Stats the shim keeps per card, cheap enough to stay on in production.
 *
 * The hot path (every allocation and free) only does relaxed atomic adds
 * and, when a peak moves, one compare-and-swap: no locks, no syscalls. The
 * timeline is a ring of samples written by the shim's background thread
 * every timeline_interval and read by dumps; the ring has its own mutex,
 * which the hot path never takes.
 *
 * With an arena the arena keeps live/reserved itself (vs_arena_get_stats);
 * these counters then still count driver calls and refusals. With arena =
 * off they are the only source of live/reserved. */
#ifndef VS_STATS_H
#define VS_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dump_model.h"

/* Driver calls counted per card. One list: the enum and the names. */
#define VS_STATS_CALLS(X) \
  X(MEM_ALLOC, "cuMemAlloc") X(MEM_FREE, "cuMemFree") X(MEM_ALLOC_ASYNC, "cuMemAllocAsync") \
  X(MEM_FREE_ASYNC, "cuMemFreeAsync") X(MEM_ALLOC_PITCH, "cuMemAllocPitch") \
  X(MEM_ADDRESS_RESERVE, "cuMemAddressReserve") X(MEM_ADDRESS_FREE, "cuMemAddressFree") \
  X(MEM_CREATE, "cuMemCreate") X(MEM_RELEASE, "cuMemRelease") X(MEM_MAP, "cuMemMap") \
  X(MEM_UNMAP, "cuMemUnmap") X(MEM_SET_ACCESS, "cuMemSetAccess") X(CTX_SYNCHRONIZE, "cuCtxSynchronize") \
  X(MEM_GET_INFO, "cuMemGetInfo")

typedef enum {
#define VS_X(id, name) VS_CALL_##id,
  VS_STATS_CALLS(VS_X)
#undef VS_X
  VS_CALL_COUNT
} vs_stats_call;

#define VS_TIMELINE_DEFAULT_CAP 1440   /* a day at 1 min, 4 h at 10 s */

typedef struct vs_card_stats {
  _Atomic uint64_t live_bytes, live_count, peak_live_bytes;
  _Atomic uint64_t reserved_bytes, peak_reserved_bytes;
  _Atomic uint64_t requests, refused;
  _Atomic uint64_t spilled_bytes, peak_spilled_bytes, spilled_count;   /* on_limit = spill: host memory */
  _Atomic uint64_t calls[VS_CALL_COUNT];
  /* Timeline ring: written by the sampler, read by dumps; under ring_lock. */
  pthread_mutex_t ring_lock;
  vs_dump_sample *ring;
  size_t ring_cap, ring_head, ring_len;   /* head: next slot to write */
} vs_card_stats;

/* 0, or -1 when the ring cannot be allocated (ring_cap 0: default). */
int vs_card_stats_init(vs_card_stats *s, size_t ring_cap);
void vs_card_stats_destroy(vs_card_stats *s);
/* Zeroes counters and empties the ring (a forked child starts clean). Not
 * thread-safe against concurrent updates: call it in the atfork child. */
void vs_card_stats_reset(vs_card_stats *s);

/* ---- Hot path (lock-free) ------------------------------------------------ */
/* A request the shim let through: `size` requested bytes now live. */
void vs_stats_on_alloc(vs_card_stats *s, uint64_t size);
void vs_stats_on_free(vs_card_stats *s, uint64_t size);
/* A request served from host memory (on_limit = spill), or such a block freed. */
void vs_stats_on_spill(vs_card_stats *s, uint64_t size);
void vs_stats_on_unspill(vs_card_stats *s, uint64_t size);
/* A request refused (driver OOM or quota). */
void vs_stats_on_refused(vs_card_stats *s);
/* Device memory held from the driver grew or shrank (arena = off: the
 * same as the allocation; with an arena: chunks and mapped granules). */
void vs_stats_on_reserve(vs_card_stats *s, uint64_t size);
void vs_stats_on_release(vs_card_stats *s, uint64_t size);
static inline void vs_stats_on_call(vs_card_stats *s, vs_stats_call c) {
  atomic_fetch_add_explicit(&s->calls[c], 1, memory_order_relaxed);
}

/* ---- Timeline ------------------------------------------------------------ */
/* The sampler: the shim's background thread calls it every
 * timeline_interval. live/reserved/largest_free come from the arena's stats
 * when there is one, else from these counters (vs_stats_sample_off). */
void vs_timeline_sample(vs_card_stats *s, uint64_t t_ms, uint64_t live, uint64_t reserved, uint64_t largest_free);
/* The sampler for arena = off: live and reserved from these counters,
 * largest free 0 (each allocation is its own driver allocation). With an
 * arena: vs_stats_sample_arena() (dump_build.h). */
void vs_stats_sample_off(vs_card_stats *s);
/* Copies the ring, oldest first, into out (max entries); returns the count. */
size_t vs_timeline_copy(vs_card_stats *s, vs_dump_sample *out, size_t max);

/* Wall-clock milliseconds since the epoch (what samples and dumps record). */
uint64_t vs_now_unix_ms(void);

/* Puts the counters (driver calls, request counts and, for arena = off,
 * live/reserved and peaks) and the timeline into a dump card. 0 or -1. */
int vs_stats_fill_card(vs_card_stats *s, vs_dump_card *c, int arena_off);

#endif

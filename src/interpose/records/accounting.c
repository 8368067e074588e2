/* Per-card counters (see accounting.h) and the public vramshim_stats(). */
#include "accounting.h"

#include "export.h"
#include "log.h"
#include "tally.h"

#include <stdatomic.h>
#include <string.h>

/* The bytes (and the peaks that read them) are one atomic per card: a
 * peak needs the card's sum at the moment of each change. */
typedef struct card_counters {
  _Atomic uint64_t live, peak_live;
  _Atomic uint64_t reserved, peak_reserved;
  _Atomic int64_t va, ipc, ipc_count;
  _Atomic uint64_t pool_live, pool_used_high, pool_reserved_high;
} __attribute__((aligned(64))) card_counters;

static card_counters g_cards[VRAMSHIM_MAX_CARDS];

/* The counts every request moves, in per-thread tallies (common/tally.h):
 * no locked instruction on the hot path. Per card, K counters. */
enum { T_ALLOC_REQ, T_FREE_REQ, T_FAILED, T_LIVE_COUNT, T_CALLS, K = T_CALLS + VRAMSHIM_CALL_KINDS };
static _Atomic uint64_t g_counts_retired[VRAMSHIM_MAX_CARDS * K];
static vs_tally g_counts = VS_TALLY_INIT(VRAMSHIM_MAX_CARDS * K, g_counts_retired);

static void count(int card, int field, uint64_t d) { vs_tally_add(&g_counts, (uint32_t)(card * K + field), d); }
static _Atomic int g_card_count;
static _Atomic int g_said_out_of_range;

static __attribute__((noinline, cold)) card_counters *out_of_range(int card) {
  if (card >= VRAMSHIM_MAX_CARDS && !atomic_exchange(&g_said_out_of_range, 1))
    VS_WARN("card %d is beyond the %d cards the shim accounts; its memory is not counted", card,
            VRAMSHIM_MAX_CARDS);
  return NULL;
}

static inline card_counters *card_of(int card) {
  if (__builtin_expect(card < 0 || card >= VRAMSHIM_MAX_CARDS, 0)) return out_of_range(card);
  int seen = atomic_load_explicit(&g_card_count, memory_order_relaxed);
  while (seen < card + 1 &&
         !atomic_compare_exchange_weak_explicit(&g_card_count, &seen, card + 1, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  return &g_cards[card];
}

static void raise_peak(_Atomic uint64_t *peak, uint64_t now) {
  uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);
  while (now > p && !atomic_compare_exchange_weak_explicit(peak, &p, now, memory_order_relaxed,
                                                           memory_order_relaxed)) {
  }
}

void vs_acct_live_add(int card, uint64_t bytes) {
  card_counters *c = card_of(card);
  if (!c) return;
  uint64_t now = atomic_fetch_add_explicit(&c->live, bytes, memory_order_relaxed) + bytes;
  count(card, T_LIVE_COUNT, 1);
  raise_peak(&c->peak_live, now);
}

void vs_acct_live_sub(int card, uint64_t bytes) {
  card_counters *c = card_of(card);
  if (!c) return;
  atomic_fetch_sub_explicit(&c->live, bytes, memory_order_relaxed);
  count(card, T_LIVE_COUNT, (uint64_t)-1);
}

void vs_acct_reserved_add(int card, uint64_t bytes) {
  card_counters *c = card_of(card);
  if (!c) return;
  uint64_t now = atomic_fetch_add_explicit(&c->reserved, bytes, memory_order_relaxed) + bytes;
  raise_peak(&c->peak_reserved, now);
}

void vs_acct_reserved_sub(int card, uint64_t bytes) {
  card_counters *c = card_of(card);
  if (c) atomic_fetch_sub_explicit(&c->reserved, bytes, memory_order_relaxed);
}

void vs_acct_va_add(int card, int64_t bytes) {
  card_counters *c = card_of(card);
  if (c) atomic_fetch_add_explicit(&c->va, bytes, memory_order_relaxed);
}

void vs_acct_ipc_add(int card, int64_t bytes) {
  card_counters *c = card_of(card);
  if (!c) return;
  atomic_fetch_add_explicit(&c->ipc, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->ipc_count, bytes >= 0 ? 1 : -1, memory_order_relaxed);
}

uint64_t vs_acct_live_bytes(int card) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return 0;
  return atomic_load_explicit(&g_cards[card].live, memory_order_relaxed);
}

void vs_acct_pool_add(int card, int64_t bytes) {
  card_counters *c = card_of(card);
  if (!c) return;
  uint64_t now = atomic_fetch_add_explicit(&c->pool_live, (uint64_t)bytes, memory_order_relaxed) + (uint64_t)bytes;
  if (bytes > 0) {
    raise_peak(&c->pool_used_high, now);
    raise_peak(&c->pool_reserved_high, now);
  }
}

void vs_acct_pool_bytes(int card, uint64_t *live, uint64_t *used_high, uint64_t *reserved_high) {
  int in = card >= 0 && card < VRAMSHIM_MAX_CARDS;
  *live = in ? atomic_load_explicit(&g_cards[card].pool_live, memory_order_relaxed) : 0;
  if (used_high) *used_high = in ? atomic_load_explicit(&g_cards[card].pool_used_high, memory_order_relaxed) : 0;
  if (reserved_high)
    *reserved_high = in ? atomic_load_explicit(&g_cards[card].pool_reserved_high, memory_order_relaxed) : 0;
}

/* The high becomes the bytes live now; a block served meanwhile raises it
 * again by itself (raise_peak), so no lock is needed. */
void vs_acct_pool_reset_high(int card, int reserved) {
  card_counters *c = card_of(card);
  if (c) atomic_store_explicit(reserved ? &c->pool_reserved_high : &c->pool_used_high,
                               atomic_load_explicit(&c->pool_live, memory_order_relaxed), memory_order_relaxed);
}

void vs_acct_request(int card, int is_alloc) {
  if (card_of(card)) count(card, is_alloc ? T_ALLOC_REQ : T_FREE_REQ, 1);
}

void vs_acct_failed(int card) {
  if (card_of(card)) count(card, T_FAILED, 1);
}

void vs_acct_call(int card, vramshim_driver_call call) {
  if (card_of(card) && (int)call >= 0 && call < VRAMSHIM_CALL_KINDS) count(card, T_CALLS + (int)call, 1);
}

uint64_t vs_acct_memory_calls(int card) {
  if (!card_of(card)) return 0;
  static const vramshim_driver_call kinds[] = {
      VRAMSHIM_CALL_MEM_ALLOC,   VRAMSHIM_CALL_MEM_ALLOC_MANAGED, VRAMSHIM_CALL_MEM_FREE,
      VRAMSHIM_CALL_MEM_ALLOC_ASYNC, VRAMSHIM_CALL_MEM_FREE_ASYNC, VRAMSHIM_CALL_MEM_CREATE,
      VRAMSHIM_CALL_MEM_RELEASE, VRAMSHIM_CALL_MEM_MAP,        VRAMSHIM_CALL_MEM_UNMAP,
      VRAMSHIM_CALL_IPC_OPEN,    VRAMSHIM_CALL_IPC_CLOSE};
  uint64_t n[VRAMSHIM_CALL_KINDS], sum = 0;
  vs_tally_sums(&g_counts, (uint32_t)(card * K + T_CALLS), VRAMSHIM_CALL_KINDS, n);
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) sum += n[kinds[i]];
  return sum;
}

void vs_acct_reset(void) {
  /* Only the forking thread exists in the child: plain stores are enough. */
  memset(g_cards, 0, sizeof g_cards);
  vs_tally_reset(&g_counts);
  atomic_store(&g_card_count, 0);
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

VS_EXPORT int vramshim_stats(int card, vramshim_card_stats *out) {
  if (!out || card < 0 || card >= VRAMSHIM_MAX_CARDS) return -1;
  const card_counters *c = &g_cards[card];
  memset(out, 0, sizeof *out);
  out->card = card;
  uint64_t n[K];
  vs_tally_sums(&g_counts, (uint32_t)(card * K), K, n);
  out->live_bytes = LOAD(c->live);
  out->live_count = n[T_LIVE_COUNT];
  out->peak_live_bytes = LOAD(c->peak_live);
  out->reserved_bytes = LOAD(c->reserved);
  out->peak_reserved_bytes = LOAD(c->peak_reserved);
  out->alloc_requests = n[T_ALLOC_REQ];
  out->free_requests = n[T_FREE_REQ];
  out->failed_requests = n[T_FAILED];
  for (int k = 0; k < VRAMSHIM_CALL_KINDS; k++) out->driver_calls[k] = n[T_CALLS + k];
  out->va_reserved_bytes = (uint64_t)LOAD(c->va);
  out->ipc_open_bytes = (uint64_t)LOAD(c->ipc);
  out->ipc_open_count = (uint64_t)LOAD(c->ipc_count);
  return 0;
}

VS_EXPORT int vramshim_card_count(void) { return atomic_load_explicit(&g_card_count, memory_order_relaxed); }

#ifndef VRAMSHIM_VERSION_STRING
#define VRAMSHIM_VERSION_STRING "0.1.0"
#endif
VS_EXPORT const char *vramshim_version(void) { return VRAMSHIM_VERSION_STRING; }

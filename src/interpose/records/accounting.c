/* Per-card counters (see accounting.h) and the public vramshim_stats(). */
#include "accounting.h"

#include "export.h"
#include "log.h"

#include <stdatomic.h>
#include <string.h>

typedef struct card_counters {
  _Atomic uint64_t live, live_count, peak_live;
  _Atomic uint64_t reserved, peak_reserved;
  _Atomic uint64_t alloc_requests, free_requests, failed_requests;
  _Atomic uint64_t calls[VRAMSHIM_CALL_KINDS];
  _Atomic int64_t va, ipc, ipc_count;
  _Atomic uint64_t pool_live, pool_high;
} __attribute__((aligned(64))) card_counters;

static card_counters g_cards[VRAMSHIM_MAX_CARDS];
static _Atomic int g_card_count;
static _Atomic int g_said_out_of_range;

static card_counters *card_of(int card) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) {
    if (card >= VRAMSHIM_MAX_CARDS && !atomic_exchange(&g_said_out_of_range, 1))
      VS_WARN("card %d is beyond the %d cards the shim accounts; its memory is not counted", card,
              VRAMSHIM_MAX_CARDS);
    return NULL;
  }
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
  atomic_fetch_add_explicit(&c->live_count, 1, memory_order_relaxed);
  raise_peak(&c->peak_live, now);
}

void vs_acct_live_sub(int card, uint64_t bytes) {
  card_counters *c = card_of(card);
  if (!c) return;
  atomic_fetch_sub_explicit(&c->live, bytes, memory_order_relaxed);
  atomic_fetch_sub_explicit(&c->live_count, 1, memory_order_relaxed);
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
  if (bytes > 0) raise_peak(&c->pool_high, now);
}

void vs_acct_pool_bytes(int card, uint64_t *live, uint64_t *high) {
  int in = card >= 0 && card < VRAMSHIM_MAX_CARDS;
  *live = in ? atomic_load_explicit(&g_cards[card].pool_live, memory_order_relaxed) : 0;
  *high = in ? atomic_load_explicit(&g_cards[card].pool_high, memory_order_relaxed) : 0;
}

/* The high becomes the bytes live now; a block served meanwhile raises it
 * again by itself (raise_peak), so no lock is needed. */
void vs_acct_pool_reset_high(int card) {
  card_counters *c = card_of(card);
  if (c) atomic_store_explicit(&c->pool_high, atomic_load_explicit(&c->pool_live, memory_order_relaxed),
                               memory_order_relaxed);
}

void vs_acct_request(int card, int is_alloc) {
  card_counters *c = card_of(card);
  if (c) atomic_fetch_add_explicit(is_alloc ? &c->alloc_requests : &c->free_requests, 1, memory_order_relaxed);
}

void vs_acct_failed(int card) {
  card_counters *c = card_of(card);
  if (c) atomic_fetch_add_explicit(&c->failed_requests, 1, memory_order_relaxed);
}

void vs_acct_call(int card, vramshim_driver_call call) {
  card_counters *c = card_of(card);
  if (c && (int)call >= 0 && call < VRAMSHIM_CALL_KINDS)
    atomic_fetch_add_explicit(&c->calls[call], 1, memory_order_relaxed);
}

void vs_acct_reset(void) {
  /* Only the forking thread exists in the child: plain stores are enough. */
  memset(g_cards, 0, sizeof g_cards);
  atomic_store(&g_card_count, 0);
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

VS_EXPORT int vramshim_stats(int card, vramshim_card_stats *out) {
  if (!out || card < 0 || card >= VRAMSHIM_MAX_CARDS) return -1;
  const card_counters *c = &g_cards[card];
  memset(out, 0, sizeof *out);
  out->card = card;
  out->live_bytes = LOAD(c->live);
  out->live_count = LOAD(c->live_count);
  out->peak_live_bytes = LOAD(c->peak_live);
  out->reserved_bytes = LOAD(c->reserved);
  out->peak_reserved_bytes = LOAD(c->peak_reserved);
  out->alloc_requests = LOAD(c->alloc_requests);
  out->free_requests = LOAD(c->free_requests);
  out->failed_requests = LOAD(c->failed_requests);
  for (int k = 0; k < VRAMSHIM_CALL_KINDS; k++) out->driver_calls[k] = LOAD(c->calls[k]);
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

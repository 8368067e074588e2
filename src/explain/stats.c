/* Per-card counters (lock-free) and the timeline ring. */
#include "stats.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const call_names[] = {
#define VS_X(id, name) name,
    VS_STATS_CALLS(VS_X)
#undef VS_X
};

static void zero_counters(vs_card_stats *s) {
  atomic_store(&s->live_bytes, 0);
  atomic_store(&s->live_count, 0);
  atomic_store(&s->peak_live_bytes, 0);
  atomic_store(&s->reserved_bytes, 0);
  atomic_store(&s->peak_reserved_bytes, 0);
  atomic_store(&s->requests, 0);
  atomic_store(&s->refused, 0);
  atomic_store(&s->spilled_bytes, 0);
  atomic_store(&s->peak_spilled_bytes, 0);
  atomic_store(&s->spilled_count, 0);
  for (int i = 0; i < VS_CALL_COUNT; i++) atomic_store(&s->calls[i], 0);
}

int vs_card_stats_init(vs_card_stats *s, size_t ring_cap) {
  memset(s, 0, sizeof *s);
  zero_counters(s);
  s->ring_cap = ring_cap ? ring_cap : VS_TIMELINE_DEFAULT_CAP;
  s->ring = calloc(s->ring_cap, sizeof *s->ring);
  if (!s->ring) return -1;
  pthread_mutex_init(&s->ring_lock, NULL);
  return 0;
}

void vs_card_stats_destroy(vs_card_stats *s) {
  pthread_mutex_destroy(&s->ring_lock);
  free(s->ring);
  s->ring = NULL;
}

void vs_card_stats_reset(vs_card_stats *s) {
  zero_counters(s);
  /* The parent's sampler may have held the lock at fork: a fresh mutex. */
  pthread_mutex_init(&s->ring_lock, NULL);
  s->ring_head = s->ring_len = 0;
}

/* Raises *peak to at least v; relaxed: a peak read a moment late is fine. */
static void raise_peak(_Atomic uint64_t *peak, uint64_t v) {
  uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);
  while (v > p && !atomic_compare_exchange_weak_explicit(peak, &p, v, memory_order_relaxed, memory_order_relaxed)) {
  }
}

void vs_stats_on_alloc(vs_card_stats *s, uint64_t size) {
  uint64_t live = atomic_fetch_add_explicit(&s->live_bytes, size, memory_order_relaxed) + size;
  atomic_fetch_add_explicit(&s->live_count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->requests, 1, memory_order_relaxed);
  raise_peak(&s->peak_live_bytes, live);
}

void vs_stats_on_free(vs_card_stats *s, uint64_t size) {
  atomic_fetch_sub_explicit(&s->live_bytes, size, memory_order_relaxed);
  atomic_fetch_sub_explicit(&s->live_count, 1, memory_order_relaxed);
}

void vs_stats_on_spill(vs_card_stats *s, uint64_t size) {
  uint64_t v = atomic_fetch_add_explicit(&s->spilled_bytes, size, memory_order_relaxed) + size;
  atomic_fetch_add_explicit(&s->spilled_count, 1, memory_order_relaxed);
  raise_peak(&s->peak_spilled_bytes, v);
}

void vs_stats_on_unspill(vs_card_stats *s, uint64_t size) {
  atomic_fetch_sub_explicit(&s->spilled_bytes, size, memory_order_relaxed);
  atomic_fetch_sub_explicit(&s->spilled_count, 1, memory_order_relaxed);
}

void vs_stats_on_refused(vs_card_stats *s) {
  atomic_fetch_add_explicit(&s->requests, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->refused, 1, memory_order_relaxed);
}

void vs_stats_on_reserve(vs_card_stats *s, uint64_t size) {
  uint64_t r = atomic_fetch_add_explicit(&s->reserved_bytes, size, memory_order_relaxed) + size;
  raise_peak(&s->peak_reserved_bytes, r);
}

void vs_stats_on_release(vs_card_stats *s, uint64_t size) {
  atomic_fetch_sub_explicit(&s->reserved_bytes, size, memory_order_relaxed);
}

void vs_timeline_sample(vs_card_stats *s, uint64_t t_ms, uint64_t live, uint64_t reserved, uint64_t largest_free) {
  pthread_mutex_lock(&s->ring_lock);
  s->ring[s->ring_head] = (vs_dump_sample){t_ms, live, reserved, largest_free,
                                            atomic_load_explicit(&s->spilled_bytes, memory_order_relaxed)};
  s->ring_head = (s->ring_head + 1) % s->ring_cap;
  if (s->ring_len < s->ring_cap) s->ring_len++;
  pthread_mutex_unlock(&s->ring_lock);
}

void vs_stats_sample_off(vs_card_stats *s) {
  vs_timeline_sample(s, vs_now_unix_ms(), atomic_load_explicit(&s->live_bytes, memory_order_relaxed),
                     atomic_load_explicit(&s->reserved_bytes, memory_order_relaxed), 0);
}

size_t vs_timeline_copy(vs_card_stats *s, vs_dump_sample *out, size_t max) {
  pthread_mutex_lock(&s->ring_lock);
  size_t n = s->ring_len < max ? s->ring_len : max;
  /* The newest n samples, oldest first. */
  size_t start = (s->ring_head + s->ring_cap - n) % s->ring_cap;
  for (size_t i = 0; i < n; i++) out[i] = s->ring[(start + i) % s->ring_cap];
  pthread_mutex_unlock(&s->ring_lock);
  return n;
}

uint64_t vs_now_unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int vs_stats_fill_card(vs_card_stats *s, vs_dump_card *c, int arena_off) {
  for (int i = 0; i < VS_CALL_COUNT; i++) {
    uint64_t n = atomic_load_explicit(&s->calls[i], memory_order_relaxed);
    if (n && vs_dump_card_add_call(c, call_names[i], n)) return -1;
  }
  c->spilled_bytes = atomic_load_explicit(&s->spilled_bytes, memory_order_relaxed);
  c->peak_spilled_bytes = atomic_load_explicit(&s->peak_spilled_bytes, memory_order_relaxed);
  c->spilled_count = atomic_load_explicit(&s->spilled_count, memory_order_relaxed);
  if (arena_off) {
    c->live_bytes = atomic_load_explicit(&s->live_bytes, memory_order_relaxed);
    c->live_count = atomic_load_explicit(&s->live_count, memory_order_relaxed);
    c->peak_live_bytes = atomic_load_explicit(&s->peak_live_bytes, memory_order_relaxed);
    c->reserved_bytes = atomic_load_explicit(&s->reserved_bytes, memory_order_relaxed);
    c->peak_reserved_bytes = atomic_load_explicit(&s->peak_reserved_bytes, memory_order_relaxed);
    c->requests = atomic_load_explicit(&s->requests, memory_order_relaxed);
  }
  vs_dump_sample *tmp = malloc(s->ring_cap * sizeof *tmp);
  if (!tmp) return -1;
  size_t n = vs_timeline_copy(s, tmp, s->ring_cap);
  int rc = vs_dump_card_set_samples(c, tmp, n);
  free(tmp);
  return rc;
}

/* Per-card stats: lock-free counters from many threads, peaks, the
 * timeline ring (wrap-around, oldest first), and filling a dump card. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <string.h>

#include "stats.h"

#define THREADS 4
#define ROUNDS 50000

static void *worker(void *arg) {
  vs_card_stats *s = arg;
  for (int i = 0; i < ROUNDS; i++) {
    vs_stats_on_call(s, VS_CALL_MEM_ALLOC);
    vs_stats_on_reserve(s, 4096);
    vs_stats_on_alloc(s, 4096);
    vs_stats_on_free(s, 4096);
    vs_stats_on_release(s, 4096);
    vs_stats_on_call(s, VS_CALL_MEM_FREE);
  }
  return NULL;
}

static void *sampler(void *arg) {
  vs_card_stats *s = arg;
  vs_dump_sample out[16];
  for (uint64_t i = 0; i < 2000; i++) {
    vs_timeline_sample(s, i, i, i, i);
    size_t n = vs_timeline_copy(s, out, 16);
    for (size_t k = 1; k < n; k++) assert_true(out[k].t_ms == out[k - 1].t_ms + 1);
  }
  return NULL;
}

static void test_counters_concurrent(void **state) {
  (void)state;
  vs_card_stats s;
  assert_int_equal(vs_card_stats_init(&s, 64), 0);
  pthread_t th[THREADS + 1];
  for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, &s);
  pthread_create(&th[THREADS], NULL, sampler, &s);
  for (int i = 0; i <= THREADS; i++) pthread_join(th[i], NULL);
  assert_int_equal(s.live_bytes, 0);
  assert_int_equal(s.live_count, 0);
  assert_int_equal(s.reserved_bytes, 0);
  assert_int_equal(s.requests, THREADS * ROUNDS);
  assert_int_equal(s.calls[VS_CALL_MEM_ALLOC], THREADS * ROUNDS);
  assert_true(s.peak_live_bytes >= 4096 && s.peak_live_bytes <= THREADS * 4096);
  vs_card_stats_destroy(&s);
}

static void test_peaks_and_fill(void **state) {
  (void)state;
  vs_card_stats s;
  assert_int_equal(vs_card_stats_init(&s, 4), 0);
  vs_stats_on_reserve(&s, 300);
  vs_stats_on_alloc(&s, 100);
  vs_stats_on_alloc(&s, 200);
  vs_stats_on_free(&s, 100);
  vs_stats_on_refused(&s);
  vs_stats_on_call(&s, VS_CALL_MEM_ALLOC);
  vs_stats_on_call(&s, VS_CALL_MEM_ALLOC);
  vs_stats_on_call(&s, VS_CALL_CTX_SYNCHRONIZE);
  /* 6 samples into a ring of 4: the newest 4 remain, oldest first. */
  for (uint64_t i = 1; i <= 6; i++) vs_timeline_sample(&s, i * 1000, i, 2 * i, 3 * i);
  vs_dump d;
  vs_dump_init(&d, 1, "x", "t", NULL, 0);
  vs_dump_card *c = vs_dump_add_card(&d, 0);
  assert_int_equal(vs_stats_fill_card(&s, c, 1), 0);
  assert_int_equal(c->live_bytes, 200);
  assert_int_equal(c->peak_live_bytes, 300);
  assert_int_equal(c->live_count, 1);
  assert_int_equal(c->reserved_bytes, 300);
  assert_int_equal(c->requests, 3);
  assert_int_equal(c->ncalls, 2);
  assert_string_equal(c->calls[0].name, "cuMemAlloc");
  assert_int_equal(c->calls[0].count, 2);
  assert_string_equal(c->calls[1].name, "cuCtxSynchronize");
  assert_int_equal(c->nsamples, 4);
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(c->samples[i].t_ms, (i + 3) * 1000);
    assert_int_equal(c->samples[i].reserved, 2 * (i + 3));
  }
  vs_card_stats_reset(&s);
  vs_dump_sample out[4];
  assert_int_equal(vs_timeline_copy(&s, out, 4), 0);
  assert_int_equal(s.live_bytes, 0);
  vs_dump_free(&d);
  vs_card_stats_destroy(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counters_concurrent),
      cmocka_unit_test(test_peaks_and_fill),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

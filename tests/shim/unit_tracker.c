/* Unit tests of the pointer tracker and the per-card counters, linked with
 * the static interposer library (no driver involved). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accounting.h"
#include "tracker.h"
#include "vramshim.h"

static void insert_find_remove(void **state) {
  (void)state;
  vs_alloc_info a = {0x7f0000001000ULL, 4096, 0, 0, 0, 0, 0, 0, 0}, out;
  assert_int_equal(vs_tracker_insert(VS_SPACE_DEVPTR, &a, NULL), 0);
  assert_int_equal(vs_tracker_find(VS_SPACE_DEVPTR, a.key, &out), 0);
  assert_int_equal(out.size, 4096);
  assert_int_equal(vs_tracker_find(VS_SPACE_HANDLE, a.key, &out), -1);   /* spaces are separate */
  vs_alloc_info h = {a.key, 77, 0, 5, 0, 0, 0, 0, 0};
  assert_int_equal(vs_tracker_insert(VS_SPACE_HANDLE, &h, NULL), 0);     /* same number, other space */
  assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, a.key, 1u << 1, &out), -1); /* wrong kind stays */
  assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, a.key, 1u << 0, &out), 0);
  assert_int_equal(out.size, 4096);
  assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, a.key, ~0u, &out), -1);       /* second remove */
  assert_int_equal(vs_tracker_count(VS_SPACE_DEVPTR), 0);
  assert_int_equal(vs_tracker_remove(VS_SPACE_HANDLE, a.key, ~0u, &out), 0);
  assert_int_equal(out.size, 77);
}

static void stale_record_is_returned(void **state) {
  (void)state;
  vs_alloc_info a = {0x1000, 100, 1, 0, 0, 0, 0, 0, 0}, b = {0x1000, 200, 1, 0, 0, 0, 0, 0, 0}, stale;
  assert_int_equal(vs_tracker_insert(VS_SPACE_DEVPTR, &a, NULL), 0);
  assert_int_equal(vs_tracker_insert(VS_SPACE_DEVPTR, &b, &stale), 1);
  assert_int_equal(stale.size, 100);
  assert_int_equal(vs_tracker_count(VS_SPACE_DEVPTR), 1);
  assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, 0x1000, ~0u, &stale), 0);
  assert_int_equal(stale.size, 200);
}

static void fork_child_drops_everything(void **state) {
  (void)state;
  for (uint64_t i = 1; i <= 100; i++) {
    vs_alloc_info a = {i * 512, i, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(vs_tracker_insert(VS_SPACE_VA, &a, NULL), 0);
  }
  assert_int_equal(vs_tracker_count(VS_SPACE_VA), 100);
  /* What the fork handlers do around a real fork. */
  vs_tracker_atfork_prepare();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    vs_tracker_atfork_child();
    vs_alloc_info a = {512, 1, 0, 0, 0, 0, 0, 0, 0};
    int ok = vs_tracker_count(VS_SPACE_VA) == 0 && vs_tracker_insert(VS_SPACE_VA, &a, NULL) == 0 &&
             vs_tracker_remove(VS_SPACE_VA, 512, ~0u, NULL) == 0;
    _exit(ok ? 0 : 1);
  }
  vs_tracker_atfork_parent();
  int status = 0;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(vs_tracker_count(VS_SPACE_VA), 100);   /* the parent keeps its own */
  for (uint64_t i = 1; i <= 100; i++) assert_int_equal(vs_tracker_remove(VS_SPACE_VA, i * 512, ~0u, NULL), 0);
}

static void counters_and_peak(void **state) {
  (void)state;
  vs_acct_reset();
  vs_acct_live_add(2, 100);
  vs_acct_live_add(2, 50);
  vs_acct_live_sub(2, 100);
  vs_acct_call(2, VRAMSHIM_CALL_MEM_ALLOC);
  vs_acct_live_add(99, 1);   /* out of range: counted nowhere, no crash */
  vramshim_card_stats st;
  assert_int_equal(vramshim_stats(2, &st), 0);
  assert_int_equal(st.live_bytes, 50);
  assert_int_equal(st.live_count, 1);
  assert_int_equal(st.peak_live_bytes, 150);
  assert_int_equal(st.driver_calls[VRAMSHIM_CALL_MEM_ALLOC], 1);
  assert_int_equal(vramshim_card_count(), 3);
  assert_int_equal(vramshim_stats(VRAMSHIM_MAX_CARDS, &st), -1);
  assert_int_equal(vramshim_stats(0, NULL), -1);
  vs_acct_reset();
  assert_int_equal(vramshim_stats(2, &st), 0);
  assert_int_equal(st.peak_live_bytes, 0);
}

#define THREADS 4
#define PER_THREAD 5000

static void *churn(void *arg) {
  uint64_t base = (uint64_t)(uintptr_t)arg << 40;
  for (uint64_t i = 0; i < PER_THREAD; i++) {
    vs_alloc_info a = {base + i * 512, 512, 0, 0, 0, 0, 0, 0, 0};
    if (vs_tracker_insert(VS_SPACE_DEVPTR, &a, NULL) != 0) return (void *)1;
    vs_acct_live_add(0, 512);
    if (i >= 8) {
      vs_alloc_info out;
      if (vs_tracker_remove(VS_SPACE_DEVPTR, base + (i - 8) * 512, ~0u, &out) != 0) return (void *)2;
      vs_acct_live_sub(0, out.size);
    }
  }
  for (uint64_t i = PER_THREAD - 8; i < PER_THREAD; i++) {
    if (vs_tracker_remove(VS_SPACE_DEVPTR, base + i * 512, ~0u, NULL) != 0) return (void *)3;
    vs_acct_live_sub(0, 512);
  }
  return NULL;
}

static void threads_keep_exact_counts(void **state) {
  (void)state;
  vs_acct_reset();
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)(i + 1)), 0);
  for (int i = 0; i < THREADS; i++) {
    void *ret;
    pthread_join(t[i], &ret);
    assert_null(ret);
  }
  assert_int_equal(vs_tracker_count(VS_SPACE_DEVPTR), 0);
  vramshim_card_stats st;
  vramshim_stats(0, &st);
  assert_int_equal(st.live_bytes, 0);
  assert_int_equal(st.live_count, 0);
  assert_true(st.peak_live_bytes >= 9 * 512);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(insert_find_remove),
      cmocka_unit_test(stale_record_is_returned),
      cmocka_unit_test(fork_child_drops_everything),
      cmocka_unit_test(counters_and_peak),
      cmocka_unit_test(threads_keep_exact_counts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

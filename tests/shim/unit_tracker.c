/* Unit tests of the pointer tracker and the per-card counters, linked with
 * the static interposer library (no driver involved). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accounting.h"
#include "tracker.h"
#include "vramshim.h"

static void insert_find_remove(void **state) {
  (void)state;
  vs_alloc_info a = {.key = 0x7f0000001000ULL, .size = 4096}, out;
  assert_int_equal(vs_tracker_insert(VS_SPACE_DEVPTR, &a, NULL), 0);
  assert_int_equal(vs_tracker_find(VS_SPACE_DEVPTR, a.key, &out), 0);
  assert_int_equal(out.size, 4096);
  assert_int_equal(vs_tracker_find(VS_SPACE_HANDLE, a.key, &out), -1);   /* spaces are separate */
  vs_alloc_info h = {.key = a.key, .size = 77, .kind = 5};
  assert_int_equal(vs_tracker_insert(VS_SPACE_HANDLE, &h, NULL), 0);     /* same number, other space */
  assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, a.key, 1u << 1, &out), -1); /* wrong kind stays */
  assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, a.key, 1u << 0, &out), 0);
  assert_int_equal(out.size, 4096);
  assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, a.key, ~0u, &out), -1);       /* second remove */
  assert_int_equal(vs_tracker_count(VS_SPACE_DEVPTR), 0);
  assert_int_equal(vs_tracker_remove(VS_SPACE_HANDLE, a.key, ~0u, &out), 0);
  assert_int_equal(out.size, 77);
}

/* A record's sync_memops is set and cleared in place, for a live key only;
 * the key's next record (a dead one revived, the same address allocated
 * again) starts from the inserted value. */
static void sync_memops_set_in_place(void **state) {
  (void)state;
  vs_alloc_info a = {.key = 0x7f0000002000ULL, .size = 512}, out;
  assert_int_equal(vs_tracker_insert(VS_SPACE_DEVPTR, &a, NULL), 0);
  assert_int_equal(vs_tracker_set_sync_memops(VS_SPACE_DEVPTR, a.key, 2), 0);
  assert_int_equal(vs_tracker_find(VS_SPACE_DEVPTR, a.key, &out), 0);
  assert_int_equal(out.sync_memops, 1);
  assert_int_equal(out.size, 512);
  assert_int_equal(vs_tracker_set_sync_memops(VS_SPACE_HANDLE, a.key, 1), -1);   /* other space */
  assert_int_equal(vs_tracker_set_sync_memops(VS_SPACE_DEVPTR, a.key, 0), 0);
  assert_int_equal(vs_tracker_find(VS_SPACE_DEVPTR, a.key, &out), 0);
  assert_int_equal(out.sync_memops, 0);
  assert_int_equal(vs_tracker_set_sync_memops(VS_SPACE_DEVPTR, a.key, 1), 0);
  assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, a.key, ~0u, &out), 0);
  assert_int_equal(out.sync_memops, 1);
  assert_int_equal(vs_tracker_set_sync_memops(VS_SPACE_DEVPTR, a.key, 1), -1);   /* removed: dead */
  assert_int_equal(vs_tracker_insert(VS_SPACE_DEVPTR, &a, NULL), 0);             /* revived */
  assert_int_equal(vs_tracker_find(VS_SPACE_DEVPTR, a.key, &out), 0);
  assert_int_equal(out.sync_memops, 0);
  assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, a.key, ~0u, &out), 0);
}

static void stale_record_is_returned(void **state) {
  (void)state;
  vs_alloc_info a = {.key = 0x1000, .size = 100, .card = 1}, b = {.key = 0x1000, .size = 200, .card = 1}, stale;
  assert_int_equal(vs_tracker_insert(VS_SPACE_DEVPTR, &a, NULL), 0);
  assert_int_equal(vs_tracker_insert(VS_SPACE_DEVPTR, &b, &stale), 1);
  assert_int_equal(stale.size, 100);
  assert_int_equal(vs_tracker_count(VS_SPACE_DEVPTR), 1);
  assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, 0x1000, ~0u, &stale), 0);
  assert_int_equal(stale.size, 200);
}

/* A removed record stays linked, dead, until its key comes back or another
 * removal in its stripe takes its place (tracker.c): against a model of
 * what is live, over random steps on few keys (so keys come back, and dead
 * records meet their stripe's next removal), no lookup, removal, count or
 * context sweep may see a removed key, and a key inserted again is fresh,
 * never stale. */
#define MODEL_KEYS 96
static void removed_records_stay_removed(void **state) {
  (void)state;
  struct {
    int live;
    vs_alloc_info info;
  } m[MODEL_KEYS] = {{0}};
  uint64_t rng = 0x9e3779b97f4a7c15ULL, live = 0;
  for (int step = 0; step < 40000; step++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    int k = (int)(rng % MODEL_KEYS), op = (int)((rng >> 32) % 8);
    uint64_t key = 0x7f0000000000ULL + (uint64_t)k * 4096;
    vs_alloc_info out;
    if (op < 4) {   /* insert: fresh (0) unless the model holds it (stale, 1) */
      vs_alloc_info a = {.key = key, .size = (uint64_t)step + 1, .ctx_id = (uint64_t)(k % 3) + 1};
      int r = vs_tracker_insert(VS_SPACE_DEVPTR, &a, &out);
      assert_int_equal(r, m[k].live ? 1 : 0);
      if (r == 1) assert_int_equal(out.size, m[k].info.size);
      else live++;
      m[k].live = 1;
      m[k].info = a;
    } else if (op < 7) {
      int r = vs_tracker_remove(VS_SPACE_DEVPTR, key, ~0u, &out);
      assert_int_equal(r, m[k].live ? 0 : -1);
      if (r == 0) {
        assert_int_equal(out.size, m[k].info.size);
        m[k].live = 0;
        live--;
      }
    } else {
      int r = vs_tracker_find(VS_SPACE_DEVPTR, key, &out);
      assert_int_equal(r, m[k].live ? 0 : -1);
      if (r == 0) assert_int_equal(out.size, m[k].info.size);
    }
    assert_int_equal(vs_tracker_count(VS_SPACE_DEVPTR), live);
    if (step % 5000 == 4999) {   /* a context's sweep takes its live records only */
      uint64_t ctx = (uint64_t)(step / 5000 % 3) + 1;
      vs_alloc_info *v = NULL;
      size_t n = vs_tracker_take_ctx(VS_SPACE_DEVPTR, ctx, ~0u, &v), want = 0;
      for (int i = 0; i < MODEL_KEYS; i++) {
        if (!m[i].live || m[i].info.ctx_id != ctx) continue;
        want++;
        int found = 0;
        for (size_t j = 0; j < n; j++) found += v[j].key == m[i].info.key && v[j].size == m[i].info.size;
        assert_int_equal(found, 1);
        m[i].live = 0;
        live--;
      }
      assert_int_equal(n, want);
      free(v);
    }
  }
  for (int i = 0; i < MODEL_KEYS; i++)
    if (m[i].live)
      assert_int_equal(vs_tracker_remove(VS_SPACE_DEVPTR, m[i].info.key, ~0u, NULL), 0);
  assert_int_equal(vs_tracker_count(VS_SPACE_DEVPTR), 0);
}

static void fork_child_drops_everything(void **state) {
  (void)state;
  for (uint64_t i = 1; i <= 100; i++) {
    vs_alloc_info a = {.key = i * 512, .size = i};
    assert_int_equal(vs_tracker_insert(VS_SPACE_VA, &a, NULL), 0);
  }
  assert_int_equal(vs_tracker_count(VS_SPACE_VA), 100);
  /* What the fork handlers do around a real fork. */
  vs_tracker_atfork_prepare();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    vs_tracker_atfork_child();
    vs_alloc_info a = {.key = 512, .size = 1};
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
    vs_alloc_info a = {.key = base + i * 512, .size = 512};
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
  /* One address allocated and freed again and again (a slab slot): its
   * record revived in place, while other threads do the same in the same
   * stripes. */
  for (uint64_t i = 0; i < PER_THREAD; i++) {
    vs_alloc_info a = {.key = base + (i % 3) * 512, .size = 512}, out;
    if (vs_tracker_insert(VS_SPACE_DEVPTR, &a, NULL) != 0) return (void *)4;
    if (vs_tracker_remove(VS_SPACE_DEVPTR, a.key, ~0u, &out) != 0 || out.key != a.key) return (void *)5;
    if (vs_tracker_find(VS_SPACE_DEVPTR, a.key, NULL) != -1) return (void *)6;
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
      cmocka_unit_test(sync_memops_set_in_place),
      cmocka_unit_test(stale_record_is_returned),
      cmocka_unit_test(removed_records_stay_removed),
      cmocka_unit_test(fork_child_drops_everything),
      cmocka_unit_test(counters_and_peak),
      cmocka_unit_test(threads_keep_exact_counts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

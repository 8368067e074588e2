/* The process-private lock (src/platform/lock.h): mutual exclusion among
 * threads that take it on the fast path and contended; waiters that sleep
 * in the kernel while a holder holds it for long are woken, one per give
 * back, and every one of them gets it; a try fails while it is held. Runs
 * under TSan too (label concurrent): a lock that did not order its holders
 * would show as a race on the counter it guards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "lock.h"

static vs_lock g_lock = VS_LOCK_INIT;
static uint64_t g_guarded;   /* only under g_lock: plain, so TSan checks the ordering */

#define THREADS 4
#define TAKES 100000

static void *taker(void *arg) {
  (void)arg;
  for (int i = 0; i < TAKES; i++) {
    vs_lock_take(&g_lock);
    uint64_t v = g_guarded;
    if ((i & 1023) == 0) sched_yield();   /* a holder preempted now and then: others spin, then sleep */
    g_guarded = v + 1;
    vs_lock_give(&g_lock);
  }
  return NULL;
}

static void lock_excludes(void **s) {
  (void)s;
  pthread_t t[THREADS];
  g_guarded = 0;
  for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, taker, NULL), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  assert_int_equal(g_guarded, (uint64_t)THREADS * TAKES);
  assert_int_equal(atomic_load(&g_lock.word), 0);
}

static _Atomic int g_got;

static void *waiter(void *arg) {
  (void)arg;
  vs_lock_take(&g_lock);
  g_guarded++;
  atomic_fetch_add(&g_got, 1);
  vs_lock_give(&g_lock);
  return NULL;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A holder that keeps the lock for long (a driver call under the heap's
 * lock): its waiters stop spinning and mark the word (2), so the give back
 * wakes them; each then gets the lock in turn. */
static void lock_wakes_sleepers(void **s) {
  (void)s;
  pthread_t t[THREADS];
  g_guarded = 0;
  atomic_store(&g_got, 0);
  vs_lock_take(&g_lock);
  for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, waiter, NULL), 0);
  for (int ms = 0; ms < 5000 && atomic_load(&g_lock.word) != 2; ms++) sleep_ms(1);
  assert_int_equal(atomic_load(&g_lock.word), 2);
  sleep_ms(50);
  assert_int_equal(atomic_load(&g_got), 0);
  assert_false(vs_lock_try(&g_lock));
  vs_lock_give(&g_lock);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  assert_int_equal(atomic_load(&g_got), THREADS);
  assert_int_equal(g_guarded, THREADS);
  assert_int_equal(atomic_load(&g_lock.word), 0);
  assert_true(vs_lock_try(&g_lock));
  assert_int_equal(atomic_load(&g_lock.word), 1);
  vs_lock_give(&g_lock);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lock_excludes),
      cmocka_unit_test(lock_wakes_sleepers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

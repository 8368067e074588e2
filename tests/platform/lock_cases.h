/* The cases of the process-private lock (src/platform/lock.h), shared by
 * the Linux unit test (tests/platform/test_lock.c, CMocka, also under TSan)
 * and the Windows one (tests/windows/platform/win_lock.c, under Wine): the
 * same cases on futex and on WaitOnAddress. Each returns NULL when it
 * holds, else what failed. */
#ifndef VS_TEST_LOCK_CASES_H
#define VS_TEST_LOCK_CASES_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "lock.h"

static vs_lock g_case_lock = VS_LOCK_INIT;
static uint64_t g_case_guarded;   /* only under g_case_lock: plain, so TSan checks the ordering */
static _Atomic int g_case_got;

#define LOCK_CASE_THREADS 4
#define LOCK_CASE_TAKES 100000

static void *lock_case_taker(void *arg) {
  (void)arg;
  for (int i = 0; i < LOCK_CASE_TAKES; i++) {
    vs_lock_take(&g_case_lock);
    uint64_t v = g_case_guarded;
    if ((i & 1023) == 0) sched_yield();   /* a holder preempted now and then: others spin, then sleep */
    g_case_guarded = v + 1;
    vs_lock_give(&g_case_lock);
  }
  return NULL;
}

/* Mutual exclusion among threads taking it on the fast path and
 * contended: no increment of the guarded counter is lost. */
static const char *lock_case_excludes(void) {
  pthread_t t[LOCK_CASE_THREADS];
  g_case_guarded = 0;
  for (int i = 0; i < LOCK_CASE_THREADS; i++)
    if (pthread_create(&t[i], NULL, lock_case_taker, NULL) != 0) return "pthread_create failed";
  for (int i = 0; i < LOCK_CASE_THREADS; i++) pthread_join(t[i], NULL);
  if (g_case_guarded != (uint64_t)LOCK_CASE_THREADS * LOCK_CASE_TAKES) return "an increment under the lock was lost";
  if (atomic_load(&g_case_lock.word) != 0) return "the lock is not free after every thread gave it back";
  return NULL;
}

static void *lock_case_waiter(void *arg) {
  (void)arg;
  vs_lock_take(&g_case_lock);
  g_case_guarded++;
  atomic_fetch_add(&g_case_got, 1);
  vs_lock_give(&g_case_lock);
  return NULL;
}

static void lock_case_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A holder that keeps the lock for long (a driver call under the heap's
 * lock): its waiters stop spinning and mark the word (2), sleep, and are
 * woken by the give back, one after another; a try fails meanwhile. */
static const char *lock_case_wakes_sleepers(void) {
  pthread_t t[LOCK_CASE_THREADS];
  g_case_guarded = 0;
  atomic_store(&g_case_got, 0);
  vs_lock_take(&g_case_lock);
  for (int i = 0; i < LOCK_CASE_THREADS; i++)
    if (pthread_create(&t[i], NULL, lock_case_waiter, NULL) != 0) return "pthread_create failed";
  for (int ms = 0; ms < 5000 && atomic_load(&g_case_lock.word) != 2; ms++) lock_case_sleep_ms(1);
  if (atomic_load(&g_case_lock.word) != 2) return "no waiter marked the word within 5 s";
  lock_case_sleep_ms(50);
  if (atomic_load(&g_case_got) != 0) return "a waiter got the lock while it was held";
  if (vs_lock_try(&g_case_lock)) return "a try took a held lock";
  vs_lock_give(&g_case_lock);
  for (int i = 0; i < LOCK_CASE_THREADS; i++) pthread_join(t[i], NULL);
  if (atomic_load(&g_case_got) != LOCK_CASE_THREADS || g_case_guarded != LOCK_CASE_THREADS)
    return "not every waiter got the lock";
  if (atomic_load(&g_case_lock.word) != 0) return "the lock is not free after the waiters";
  if (!vs_lock_try(&g_case_lock)) return "a try failed on a free lock";
  if (atomic_load(&g_case_lock.word) != 1) return "a try left the word other than 1 (held, no waiter)";
  vs_lock_give(&g_case_lock);
  return NULL;
}

#endif

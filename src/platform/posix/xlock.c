#include "xlock.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

void vs_plat_xlock_init(vs_plat_xlock *l) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&l->m, &a);
  pthread_mutexattr_destroy(&a);
}

/* Never an unbounded wait: glibc's unlock wakes one waiter, and if that
 * waiter is killed before it takes the lock while a third process takes it
 * on the fast path (no waiters bit), the other sleepers are never woken.
 * Sleeping in slices of LOCK_SLICE_NS bounds that lost wake-up; the
 * uncontended path is one trylock. */
#define LOCK_SLICE_NS 20000000l
#if defined(__SANITIZE_THREAD__)
#define VS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VS_TSAN 1
#endif
#endif
int vs_plat_xlock_acquire(vs_plat_xlock *l) {
  int r = pthread_mutex_trylock(&l->m);
#ifdef VS_TSAN
  /* ThreadSanitizer's timedlock does not record a lock taken with
   * EOWNERDEAD (its trylock does): a TSan build polls instead. */
  while (r == EBUSY) {
    struct timespec nap = {0, 50000};
    nanosleep(&nap, NULL);
    r = pthread_mutex_trylock(&l->m);
  }
#else
  while (r == EBUSY || r == ETIMEDOUT) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += LOCK_SLICE_NS;
    if (ts.tv_nsec >= 1000000000l) ts.tv_sec++, ts.tv_nsec -= 1000000000l;
    r = pthread_mutex_timedlock(&l->m, &ts);
  }
#endif
  if (r == EOWNERDEAD) return VS_PLAT_OWNER_DIED;
  return r ? -r : 0;
}

void vs_plat_xlock_consistent(vs_plat_xlock *l) { pthread_mutex_consistent(&l->m); }

void vs_plat_xlock_release(vs_plat_xlock *l) { pthread_mutex_unlock(&l->m); }

void vs_plat_xlock_key(const vs_plat_xlock *l, char *out, size_t len) {
  (void)l;
  if (len) out[0] = 0;
}

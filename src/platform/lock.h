/* A mutex private to the process, for the arena's heap and bins: the lock
 * an alloc + free pair takes twice. Taking it when free is one compare-and-
 * swap and giving it back with no waiter one exchange, inline, where a
 * pthread mutex (a call, its type, owner and user-count fields) cost ~56
 * instructions per take and give back (docs/benchmarks-shim.md, issue 27).
 *
 * The word: 0 free, 1 held, 2 held and a waiter may sleep. A taker that
 * finds it held spins a little, then sets 2 and sleeps until the word
 * changes; whoever gives back a 2 wakes one sleeper, who takes it as 2
 * again (it cannot know whether others sleep). A holder may block for long
 * (a driver call under the heap's lock): waiters sleep in the kernel, not
 * spin. Not shared across processes and not inherited usefully by a fork
 * child whose parent had it held (as a pthread mutex: the child must not
 * touch what it guards). POSIX: futex(2), private; Windows:
 * WaitOnAddress. */
#ifndef VS_PLAT_LOCK_H
#define VS_PLAT_LOCK_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct vs_lock {
  _Atomic uint32_t word;
} vs_lock;

#define VS_LOCK_INIT {0}

/* Sleeps while *word == value (spurious returns allowed). */
void vs_plat_lock_sleep(_Atomic uint32_t *word, uint32_t value);
/* Wakes one sleeper of the word, after it was changed. */
void vs_plat_lock_wake(_Atomic uint32_t *word);

/* A waiter's hint to the CPU between two looks at a lock word (x86's
 * `pause`; nothing elsewhere). Also the tracker's spin lock's
 * (src/common/spinlock.h). */
static inline void vs_cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static inline void vs_lock_init(vs_lock *l) { atomic_init(&l->word, 0); }

/* 1 when taken. */
static inline int vs_lock_try(vs_lock *l) {
  uint32_t free_word = 0;
  return atomic_compare_exchange_strong_explicit(&l->word, &free_word, 1, memory_order_acquire,
                                                 memory_order_relaxed);
}

/* Out of line: the call sites (some sixty in the arena) keep only the
 * fast path's compare-and-swap. */
__attribute__((noinline, unused)) static void vs_lock_take_contended(vs_lock *l) {
  for (int spins = 0; spins < 100; spins++) {
    if (atomic_load_explicit(&l->word, memory_order_relaxed) == 0 && vs_lock_try(l)) return;
    vs_cpu_pause();
  }
  /* From here the word says 2 whenever this thread may sleep on it, so the
   * holder's give back sees a sleeper to wake. */
  while (atomic_exchange_explicit(&l->word, 2, memory_order_acquire) != 0) vs_plat_lock_sleep(&l->word, 2);
}

static inline void vs_lock_take(vs_lock *l) {
  if (!vs_lock_try(l)) vs_lock_take_contended(l);
}

static inline void vs_lock_give(vs_lock *l) {
  if (atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2) vs_plat_lock_wake(&l->word);
}

#endif

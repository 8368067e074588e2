/* A lock for short critical sections on the hot path. Taking it is one
 * locked instruction (an exchange); giving it back is a plain release
 * store. A pthread mutex gives back with a second locked instruction,
 * because it must look for sleepers to wake; an alloc + free pair through
 * the shim takes the tracker's lock twice, so that is two of the pair's
 * locked instructions (docs/benchmarks-shim.md, issue 27).
 *
 * Waiters spin a little and then yield the CPU, so a holder preempted on a
 * busy machine is waited for without burning whole time slices. Use it
 * only where the holder makes no call that may block for long (no driver
 * call, no I/O, no waiting on another lock of the shim). */
#ifndef VS_SPINLOCK_H
#define VS_SPINLOCK_H

#include <sched.h>
#include <stdatomic.h>

#include "lock.h"   /* vs_cpu_pause */

typedef struct vs_spinlock {
  _Atomic int held;
} vs_spinlock;

#define VS_SPINLOCK_INIT {0}

/* 1 when taken. The plain load first keeps waiters from bouncing the
 * line between cores with exchanges while it is held. */
static inline int vs_spin_trylock(vs_spinlock *l) {
  return !atomic_load_explicit(&l->held, memory_order_relaxed) &&
         !atomic_exchange_explicit(&l->held, 1, memory_order_acquire);
}

static inline void vs_spin_lock(vs_spinlock *l) {
  for (unsigned tries = 0; !vs_spin_trylock(l); tries++) {
    if (tries >= 64) sched_yield();
    else vs_cpu_pause();
  }
}

static inline void vs_spin_unlock(vs_spinlock *l) { atomic_store_explicit(&l->held, 0, memory_order_release); }

#endif

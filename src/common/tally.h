/* Counters that many threads add to on the hot path without a locked
 * instruction. Each thread adds into a block of its own (one writer: a
 * relaxed load and store, exact); a reader sums the blocks of every thread
 * that has counted, under the set's lock. A thread's block is folded into
 * the set's "retired" block when the thread exits, and reused by the next
 * new thread, so the sums stay exact across thread exits.
 *
 * Why: an atomic read-modify-write (lock add) costs 20-40 cycles even
 * uncontended, and several times that on a virtual CPU whose sibling is
 * busy; a cuMemAlloc + cuMemFree pair through the shim made about twenty
 * of them, most for statistics (docs/benchmarks-shim.md, issue 27).
 *
 * A set is declared statically (VS_TALLY_INIT) and is usable before any
 * constructor. The sum read while other threads count is a moment's
 * value per thread; once they stop, it is exact. Counters wrap modulo
 * 2^64, so a counter one thread raises and another lowers (live blocks)
 * sums right. */
#ifndef VS_TALLY_H
#define VS_TALLY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* The most sets in one process (each has a slot in every thread's table). */
#define VS_TALLY_SETS 8

typedef struct vs_tally_block {
  struct vs_tally_block *next;
  _Atomic uint64_t v[];
} vs_tally_block;

typedef struct vs_tally {
  uint32_t n;               /* counters in the set */
  _Atomic unsigned slot;    /* its index in every thread's table; VS_TALLY_SETS (an entry
                               always NULL) until first use */
  pthread_mutex_t mu;       /* the block list, the retired block */
  vs_tally_block *blocks;   /* every thread's that has counted */
  vs_tally_block *spare;    /* exited threads' blocks, zeroed */
  _Atomic uint64_t *retired; /* n counters: exited threads' counts, and counts no block could take */
} vs_tally;

/* RETIRED: a static array of N _Atomic uint64_t, the set's own. */
#define VS_TALLY_INIT(N, RETIRED) {(N), VS_TALLY_SETS, PTHREAD_MUTEX_INITIALIZER, NULL, NULL, (RETIRED)}

/* The calling thread's block of each set, by slot; the last entry stays NULL. */
extern __thread vs_tally_block *vs_tally_mine_[VS_TALLY_SETS + 1] __attribute__((tls_model("initial-exec")));

/* A thread's first count in the set: its block made (or, without host
 * memory, the count added to the retired block atomically). */
void vs_tally_add_first(vs_tally *t, uint32_t i, uint64_t d);

/* The owner's add to its own block: one writer, so a plain load and store. */
static inline void vs_tally_bump(vs_tally_block *b, uint32_t i, uint64_t d) {
  atomic_store_explicit(&b->v[i], atomic_load_explicit(&b->v[i], memory_order_relaxed) + d, memory_order_relaxed);
}

/* Adds d (modulo 2^64: a "subtract" is adding the negation) to counter i. */
static inline void vs_tally_add(vs_tally *t, uint32_t i, uint64_t d) {
  vs_tally_block *b = vs_tally_mine_[atomic_load_explicit(&t->slot, memory_order_relaxed)];
  if (__builtin_expect(!b, 0)) vs_tally_add_first(t, i, d);
  else vs_tally_bump(b, i, d);
}

/* Counter i summed over every thread. */
uint64_t vs_tally_sum(vs_tally *t, uint32_t i);
/* Counters first .. first+n-1 summed over every thread, into out[0..n-1]
 * (one pass under the lock). */
void vs_tally_sums(vs_tally *t, uint32_t first, uint32_t n, uint64_t *out);
/* Every counter of the set back to zero. Called where no other thread
 * counts (a fork child) or where a moment's count may be lost. */
void vs_tally_reset(vs_tally *t);

/* fork: the prepare side takes every set's lock so that no block list is
 * half linked in the child; the child's side gives the locks back anew and
 * folds the blocks of the threads that did not come along into each set's
 * retired block (their counts stay; vs_tally_reset clears them where the
 * owner wants that). */
void vs_tally_atfork_prepare(void);
void vs_tally_atfork_parent(void);
void vs_tally_atfork_child(void);

#endif

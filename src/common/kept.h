/* The write section of an answer kept beside the key it was read from
 * (the ledger's books, the arena's one piece, the shim's view of a card),
 * read back without a lock. ver is a seqlock that one thread at a time
 * writes: odd while it writes, 0 before the first answer. A writer that
 * finds another inside answers without keeping; a reader that finds ver
 * odd, 0 or moved computes afresh.
 *
 *   writer: odd = vs_kept_begin(&ver); if (odd) { relaxed stores of the
 *           fields; vs_kept_end(&ver, odd); }
 *   reader: v = vs_kept_read(&ver); if (v) { relaxed loads of the fields;
 *           the answer stands if vs_kept_still(&ver, v) }
 *
 * The writer's release fence (in vs_kept_begin) sits between its odd ver
 * and the fields, the reader's acquire fence (in vs_kept_still) between
 * the fields and its second look: a reader that saw one field new sees ver
 * moved. */
#ifndef VS_KEPT_H
#define VS_KEPT_H

#include <stdatomic.h>
#include <stdint.h>

#include "fence.h"

/* The odd ver this writer ends with, or 0 where another writes now. */
static inline uint32_t vs_kept_begin(_Atomic uint32_t *ver) {
  uint32_t v = atomic_load_explicit(ver, memory_order_relaxed);
  if ((v & 1) || !atomic_compare_exchange_strong_explicit(ver, &v, v + 1, memory_order_acq_rel, memory_order_relaxed))
    return 0;
  VS_FENCE(__ATOMIC_RELEASE);   /* the odd ver before any field */
  return v + 1;
}

static inline void vs_kept_end(_Atomic uint32_t *ver, uint32_t odd) {
  atomic_store_explicit(ver, odd + 1, memory_order_release);
}

/* ver to check again after the fields are read; 0: no answer to read. */
static inline uint32_t vs_kept_read(_Atomic uint32_t *ver) {
  uint32_t v = atomic_load_explicit(ver, memory_order_acquire);
  return v & 1 ? 0 : v;
}

/* Whether the fields read since vs_kept_read gave v are one answer. */
static inline int vs_kept_still(_Atomic uint32_t *ver, uint32_t v) {
  VS_FENCE(__ATOMIC_ACQUIRE);
  return atomic_load_explicit(ver, memory_order_relaxed) == v;
}

#endif

/* Two-level segregated fit over address ranges, with every descriptor in
 * host memory (device bytes are never touched).
 *
 * Invariants (checked by vs_tlsf_check):
 * - The blocks of a region tile it exactly, in address order, linked by
 *   prev/next; sizes are multiples of VS_TLSF_ALIGN.
 * - Two physically adjacent blocks are never both FREE (coalescing is
 *   immediate); PENDING blocks do not coalesce until they become FREE.
 * - A FREE block is in exactly the list of its (fl, sl) class, and the bit
 *   of a list is set iff the list is non-empty, at both levels.
 * - A region's `used` is the sum of its LIVE and PENDING blocks.
 *
 * Tunables that may change: VS_TLSF_SL_LOG2, VS_TLSF_SCAN. Do not change:
 * VS_TLSF_ALIGN (the 512-byte pointer alignment contract). */
#ifndef VS_TLSF_H
#define VS_TLSF_H

#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#define VS_TLSF_ALIGN 512ull
#define VS_TLSF_SL_LOG2 4
#define VS_TLSF_SL (1u << VS_TLSF_SL_LOG2)
#define VS_TLSF_FL 64
#define VS_TLSF_SCAN 32    /* free-list entries examined for best fit / fullest / lowest address */

enum { VS_TB_FREE = 0, VS_TB_LIVE = 1, VS_TB_PENDING = 2 };

struct vs_tregion;
typedef struct vs_tblock {
  uint64_t addr, size;
  struct vs_tblock *prev, *next;    /* physical neighbours in the region */
  struct vs_tblock *fprev, *fnext;  /* free list of its class (FREE only) */
  struct vs_tregion *region;
  uint64_t stamp;                   /* PENDING: sync generation at free */
  uint64_t req;                     /* LIVE: requested bytes (0 = internal use) */
  int state;
  UT_hash_handle hh;                /* by addr, in the tlsf's used table */
} vs_tblock;

typedef struct vs_tregion {
  uint64_t base, size;
  uint64_t used;                     /* bytes of its LIVE and PENDING blocks */
  uint64_t ord;                      /* creation order in its tlsf (vs_tregion_before) */
  vs_tblock *first;
  struct vs_tregion *rnext, *rprev;  /* all regions of the tlsf, by creation */
} vs_tregion;

typedef struct vs_tlsf {
  uint64_t fl_bitmap;
  uint32_t sl_bitmap[VS_TLSF_FL];
  vs_tblock *lists[VS_TLSF_FL][VS_TLSF_SL];
  vs_tregion *regions;
  vs_tblock *used;          /* LIVE and PENDING blocks, by addr, and the anchor */
  /* Always in the used table (key UINT64_MAX, never a block's address):
   * uthash frees its bucket array when the last entry leaves and callocs
   * it again on the next add, so a heap holding one block at a time (a
   * program that allocates and frees one large buffer in a loop) paid a
   * calloc, a memset and a free per pair. The table must not move once
   * initialised (it points at the anchor). */
  vs_tblock anchor;
  vs_tblock *spare;         /* descriptor freelist */
  uint64_t next_ord;        /* the next region's ord */
  uint64_t free_bytes, used_bytes;
  /* Moves with every change a find can see: the free lists, a region's
   * used bytes, the regions (so an answer found at one value holds while
   * it stays; heap.c's parked block keeps one). */
  uint64_t gen;
  /* Optional: >0 when FREE block a lies in fuller memory than b (the
   * owner's notion: a VMM heap ranks the physical handle under a hole).
   * NULL: the fuller region. */
  int (*fuller)(void *ctx, const vs_tblock *a, const vs_tblock *b);
  void *fuller_ctx;
} vs_tlsf;

/* The heap's order of places, where a tie between equally good holes is
 * broken: the older region first, then the lower address. Never the raw
 * address across regions: the driver decides where a chunk lands (the
 * sim's memory from the host's mmap, a real driver's VA allocator), and a
 * driver that hands out addresses downwards would reverse placement
 * (arena_chunks_independent_of_driver_addresses). Within a region
 * addresses are the program's own history. */
static inline int vs_tregion_before(const vs_tregion *a, uint64_t aaddr, const vs_tregion *b, uint64_t baddr) {
  return a == b ? aaddr < baddr : a->ord < b->ord;
}

/* Index of the highest set bit of v (v != 0). */
static inline int vs_msb64(uint64_t v) { return 63 - __builtin_clzll(v); }

/* Compares the fractions a_part/a_whole and b_part/b_whole without
 * division (128-bit products: no overflow for 64-bit byte counts):
 * >0 when a's is larger, 0 when equal. */
static inline int vs_tlsf_cmp_share(uint64_t a_part, uint64_t a_whole, uint64_t b_part, uint64_t b_whole) {
  unsigned __int128 x = (unsigned __int128)a_part * b_whole, y = (unsigned __int128)b_part * a_whole;
  return x > y ? 1 : x < y ? -1 : 0;
}

void vs_tlsf_init(vs_tlsf *t);
void vs_tlsf_fini(vs_tlsf *t);        /* frees descriptors (not the memory they describe) */
/* A new region, one FREE block; 0 or -1 (host out of memory). */
int vs_tlsf_add_region(vs_tlsf *t, vs_tregion *r);
/* Removes a region that is one FREE block. */
void vs_tlsf_remove_region(vs_tlsf *t, vs_tregion *r);
/* A FREE block of size >= size (size a multiple of VS_TLSF_ALIGN): good
 * fit (the first class that can hold it); among the candidates examined
 * there the smallest, among equal sizes the one in the fullest region (see
 * `fuller`), then the lowest address. Not removed. */
vs_tblock *vs_tlsf_find(vs_tlsf *t, uint64_t size);
/* The same among the FREE blocks `accept` takes: from size's own class
 * upward, the first class holding one (the same ranking within it). Costs
 * a walk over the non-empty classes that hold none. */
vs_tblock *vs_tlsf_find_if(vs_tlsf *t, uint64_t size, int (*accept)(const vs_tblock *));
/* 1 when, were a block outside the lists released and merged with FREE
 * block `gone` (NULL: alone) into one FREE block of hsize >= size bytes,
 * vs_tlsf_find(t, size) would return that block; 0 when it might not.
 * Exact where it answers 1; costs one find. */
int vs_tlsf_find_would_take(vs_tlsf *t, uint64_t size, uint64_t hsize, const vs_tblock *gone);
/* The size of the largest FREE block, 0 without one: a walk of the highest
 * non-empty list alone (a larger class never holds a smaller block). */
uint64_t vs_tlsf_largest_free(const vs_tlsf *t);
/* Carves [addr, addr+size) out of the FREE block b that contains it. */
vs_tblock *vs_tlsf_take_at(vs_tlsf *t, vs_tblock *b, uint64_t addr, uint64_t size);
/* LIVE/PENDING block by start address. */
vs_tblock *vs_tlsf_used(vs_tlsf *t, uint64_t addr);
/* LIVE -> PENDING (stamp), PENDING -> FREE with coalescing; returns the FREE block. */
void vs_tlsf_pend(vs_tlsf *t, vs_tblock *b, uint64_t stamp);
vs_tblock *vs_tlsf_release(vs_tlsf *t, vs_tblock *b);
int vs_tlsf_check(vs_tlsf *t, char *err, size_t len);

#endif

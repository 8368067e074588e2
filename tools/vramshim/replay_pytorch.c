/* The `pytorch` replay policy: PyTorch's CUDA caching allocator with its
 * default settings, as listed in ../shared/traces/README.md:
 *
 *  - every request is rounded up to a multiple of 512 B;
 *  - requests of at most 1 MiB are served from the small pool, whose
 *    segments are 2 MiB; larger requests from the large pool, whose segments
 *    are 20 MiB for requests under 10 MiB, and otherwise the request rounded
 *    up to 2 MiB;
 *  - a free block is chosen best fit: the smallest that fits, lowest address
 *    on ties (pools are ordered by stream, size, address; a block serves only
 *    its own stream);
 *  - the chosen block is split when the rest would be at least 512 B (small
 *    pool) or more than 1 MiB (large pool); the request takes the front;
 *  - a freed block merges at once with free neighbours of its segment;
 *  - when the driver refuses a segment, every fully free segment is released
 *    and the segment is asked for once more; refused again, the request fails.
 *
 * Segments are never returned otherwise (no empty_cache). The driver grants
 * a segment when the bytes held plus its size fit in the card's capacity.
 * Segment addresses grow monotonically; they only order ties.
 *
 * `pytorch-down` is the same allocator on a driver that hands out segment
 * addresses downwards: where the driver puts a segment is the driver's
 * choice, and PyTorch breaks ties between free blocks of one size by
 * address, so the two differ only in which of equal blocks a request takes.
 * Its distance from `pytorch` on a trace is how much of PyTorch's smallest
 * card is that tie-break (docs/replay.md, "The baseline's own spread"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define MIN_BLOCK 512ULL        /* rounding and smallest split remainder, small pool */
#define SMALL_SIZE (1 * MIB)    /* largest request of the small pool */
#define SMALL_SEGMENT (2 * MIB) /* small pool segment */
#define LARGE_SEGMENT (20 * MIB)
#define MIN_LARGE_ALLOC (10 * MIB) /* from here on, a request gets its own segment */
#define ROUND_LARGE (2 * MIB)

typedef struct pt_block {
  uint64_t addr, size, stream;
  struct pt_block *prev, *next; /* neighbours within the segment, address order */
  int allocated;
  int small; /* from the small pool's segments */
} pt_block;

/* Free blocks ordered by (stream, size, addr): a lower bound on
 * (stream, size, 0) is the best fit. Kept as a sorted array: free lists are
 * short (hundreds of blocks), so a memmove beats a tree's pointer chasing. */
typedef struct pt_pool {
  pt_block **b;
  size_t n, cap;
} pt_pool;

typedef struct pt_state {
  uint64_t capacity, reserved, peak_reserved, next_addr;
  int down; /* pytorch-down: segment addresses fall */
  uint64_t driver_calls;
  const vs_cost_table *costs;
  vs_call_tally tally;
  pt_pool small, large;
  pt_block **by_id;
  uint32_t nallocs;
  pt_block *spare; /* recycled block structs, linked through next */
} pt_state;

static int key_less(const pt_block *a, uint64_t stream, uint64_t size, uint64_t addr) {
  if (a->stream != stream) return a->stream < stream;
  if (a->size != size) return a->size < size;
  return a->addr < addr;
}

/* First index whose block is not less than the key. */
static size_t lower_bound(const pt_pool *p, uint64_t stream, uint64_t size, uint64_t addr) {
  size_t lo = 0, hi = p->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (key_less(p->b[mid], stream, size, addr)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int pool_insert(pt_pool *p, pt_block *b) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 256;
    pt_block **nb = realloc(p->b, cap * sizeof *nb);
    if (!nb) return -1;
    p->b = nb;
    p->cap = cap;
  }
  size_t i = lower_bound(p, b->stream, b->size, b->addr);
  memmove(p->b + i + 1, p->b + i, (p->n - i) * sizeof *p->b);
  p->b[i] = b;
  p->n++;
  return 0;
}

static void pool_erase(pt_pool *p, const pt_block *b) {
  size_t i = lower_bound(p, b->stream, b->size, b->addr);
  /* The block is in the pool by construction: (stream, size, addr) is unique. */
  memmove(p->b + i, p->b + i + 1, (p->n - i - 1) * sizeof *p->b);
  p->n--;
}

static pt_pool *pool_of(pt_state *s, uint64_t size) {
  return size <= SMALL_SIZE ? &s->small : &s->large;
}

static pt_block *new_block(pt_state *s) {
  pt_block *b = s->spare;
  if (b) s->spare = b->next;
  else b = malloc(sizeof *b);
  if (b) memset(b, 0, sizeof *b);
  return b;
}

static void drop_block(pt_state *s, pt_block *b) {
  b->next = s->spare;
  s->spare = b;
}

static int driver_malloc(pt_state *s, uint64_t size, uint64_t *addr) {
  s->driver_calls++;
  vs_tally(&s->tally, s->costs, VS_CALL_MEM_ALLOC, size);
  if (size > s->capacity - s->reserved) return 1;
  s->reserved += size;
  if (s->reserved > s->peak_reserved) s->peak_reserved = s->reserved;
  uint64_t span = (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
  if (s->down) s->next_addr -= span;
  *addr = s->next_addr;
  if (!s->down) s->next_addr += span;
  return 0;
}

/* Releases every fully free segment of a pool (a free block with no
 * neighbours is a whole segment). */
static void release_free_segments(pt_state *s, pt_pool *p) {
  size_t keep = 0;
  for (size_t i = 0; i < p->n; i++) {
    pt_block *b = p->b[i];
    if (!b->prev && !b->next) {
      s->driver_calls++;
      vs_tally(&s->tally, s->costs, VS_CALL_MEM_FREE, b->size);
      s->reserved -= b->size;
      drop_block(s, b);
    } else {
      p->b[keep++] = b;
    }
  }
  p->n = keep;
}

static void *pt_create(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err, size_t errlen) {
  pt_state *s = calloc(1, sizeof *s);
  if (s) s->by_id = calloc(nallocs ? nallocs : 1, sizeof *s->by_id);
  if (!s || !s->by_id) {
    free(s);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  s->capacity = capacity;
  s->costs = o->costs;
  s->nallocs = nallocs;
  s->next_addr = 0x7f0000000000ULL;
  return s;
}

static void *pt_down_create(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err, size_t errlen) {
  pt_state *s = pt_create(capacity, nallocs, o, err, errlen);
  if (s) s->down = 1;
  return s;
}

static int pt_alloc(void *p, uint32_t id, uint64_t req, uint64_t stream) {
  pt_state *s = p;
  uint64_t size = req < MIN_BLOCK ? MIN_BLOCK : (req + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
  pt_pool *pool = pool_of(s, size);
  int small = pool == &s->small;
  pt_block *b = NULL;
  int served = VS_POLICY_CACHED;
  size_t i = lower_bound(pool, stream, size, 0);
  if (i < pool->n && pool->b[i]->stream == stream) {
    b = pool->b[i];
    memmove(pool->b + i, pool->b + i + 1, (pool->n - i - 1) * sizeof *pool->b);
    pool->n--;
  } else {
    uint64_t seg = small ? SMALL_SEGMENT
                   : size < MIN_LARGE_ALLOC ? LARGE_SEGMENT
                                            : (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
    uint64_t addr;
    if (driver_malloc(s, seg, &addr)) {
      release_free_segments(s, &s->small);
      release_free_segments(s, &s->large);
      if (driver_malloc(s, seg, &addr)) return VS_POLICY_REFUSED;
    }
    served = VS_POLICY_DRIVER;
    if (!(b = new_block(s))) return -1;
    b->addr = addr;
    b->size = seg;
    b->stream = stream;
    b->small = small;
  }
  uint64_t rest = b->size - size;
  if (small ? rest >= MIN_BLOCK : rest > SMALL_SIZE) {
    pt_block *r = new_block(s);
    if (!r) return -1;
    r->addr = b->addr + size;
    r->size = rest;
    r->stream = stream;
    r->small = small;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    if (pool_insert(pool, r)) return -1;
  }
  b->allocated = 1;
  s->by_id[id] = b;
  return served;
}

static void pt_free(void *p, uint32_t id, uint64_t size) {
  (void)size;
  pt_state *s = p;
  pt_block *b = s->by_id[id];
  s->by_id[id] = NULL;
  /* Neighbours share the segment, hence the pool. */
  pt_pool *pool = b->small ? &s->small : &s->large;
  b->allocated = 0;
  pt_block *q = b->prev;
  if (q && !q->allocated) {
    pool_erase(pool, q);
    b->addr = q->addr;
    b->size += q->size;
    b->prev = q->prev;
    if (q->prev) q->prev->next = b;
    drop_block(s, q);
  }
  q = b->next;
  if (q && !q->allocated) {
    pool_erase(pool, q);
    b->size += q->size;
    b->next = q->next;
    if (q->next) q->next->prev = b;
    drop_block(s, q);
  }
  /* Cannot fail: the pool held at least this block's pieces before. */
  (void)pool_insert(pool, b);
}

static void pt_stats(void *p, vs_policy_stats *out) {
  pt_state *s = p;
  out->peak_reserved = s->peak_reserved;
  out->driver_calls = s->driver_calls;
  out->tally = s->tally;
}

static void pt_probe(void *p, uint64_t *reserved, uint64_t *calls) {
  pt_state *s = p;
  *reserved = s->reserved;
  *calls = s->driver_calls;
}

static void free_pool(pt_state *s, pt_pool *p) {
  for (size_t i = 0; i < p->n; i++) drop_block(s, p->b[i]);
  free(p->b);
}

static void pt_destroy(void *p) {
  pt_state *s = p;
  for (uint32_t i = 0; i < s->nallocs; i++)
    if (s->by_id[i]) drop_block(s, s->by_id[i]);
  free_pool(s, &s->small);
  free_pool(s, &s->large);
  while (s->spare) {
    pt_block *b = s->spare;
    s->spare = b->next;
    free(b);
  }
  free(s->by_id);
  free(s);
}

/* The two differ in the driver's address order only. */
#define PT_POLICY(id, nm, text, make)                                                                     \
  const vs_policy id = {.name = nm, .summary = text, .create = make, .alloc = pt_alloc, .free = pt_free, \
                        .stats = pt_stats, .destroy = pt_destroy, .probe = pt_probe}
PT_POLICY(vs_policy_pytorch, "pytorch", "PyTorch's caching allocator, default settings (the baseline)", pt_create);
PT_POLICY(vs_policy_pytorch_down, "pytorch-down",
          "pytorch on a driver that hands out segment addresses downwards (ties go the other way)", pt_down_create);

/* Introspection: stats, the memory-map walk and the invariant checker. */
#include "arena.h"
#include "core.h"
#include "kept.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A free extent of n bytes: the largest so far, and st's histogram when
 * st is given. */
static void extent_add(vs_arena_stats *st, uint64_t *largest, uint64_t n) {
  if (!n) return;
  if (n > *largest) *largest = n;
  if (!st) return;
  int k = vs_msb64(n);
  if (k >= VS_ARENA_HIST_BUCKETS) k = VS_ARENA_HIST_BUCKETS - 1;
  st->hist_count[k]++;
  st->hist_bytes[k] += n;
}

/* Caller holds heap.mu. Free extents: FREE heap blocks of the first nt
 * tlsfs, in VMM mode only where physical memory is mapped under them;
 * pooled handles count as extents of their own size (they can be mapped
 * anywhere). Added to st's histogram when st is given; returns the
 * largest. */
static uint64_t heap_extents(vs_heap *h, int nt, vs_arena_stats *st) {
  uint64_t largest = 0;
  if (!st && !h->vmm) {
    /* Chunks: every FREE block is an extent and lies in its TLSF's lists
     * (vs_tlsf_check): no walk over the blocks. */
    for (int k = 0; k < nt; k++) {
      uint64_t n = vs_tlsf_largest_free(&h->t[k]);
      if (n > largest) largest = n;
    }
    return largest;
  }
  for (int k = 0; k < nt; k++)
  for (vs_tregion *tr = h->t[k].regions; tr; tr = tr->rnext) {
    vs_hregion *r = hr(tr);
    for (vs_tblock *b = tr->first; b; b = b->next) {
      if (b->state != VS_TB_FREE) continue;
      if (!h->vmm) { extent_add(st, &largest, b->size); continue; }
      uint64_t end = b->addr + b->size, top = tr->base + r->hiwater * h->G, run = 0;
      for (uint64_t at = b->addr; at < end && at < top;) {
        uint64_t g = gran(h, tr, at), gend = tr->base + (g + 1) * h->G;
        uint64_t piece = (gend < end ? gend : end) - at;
        if (r->gmap[g]) run += piece;
        else { extent_add(st, &largest, run); run = 0; }
        at += piece;
      }
      extent_add(st, &largest, run);
    }
  }
  for (uint32_t p = h->pool; p; p = h->h[p - 1].pnext) extent_add(st, &largest, h->h[p - 1].size);
  return largest;
}

void vs_arena_get_stats(vs_arena *a, vs_arena_stats *st) {
  memset(st, 0, sizeof *st);
  if (!a) return;
  uint64_t slab_live_bytes = 0, slab_pend = 0, waste = 0, live_req = 0, requests = 0;
  st->class_count = a->nclasses;
  for (uint32_t c = 0; c < a->nclasses; c++) {
    st->class_size[c] = a->classes[c].size;
    for (int k = 0; k < VS_NBINS_ALL; k++) {
      vs_bin *bin = &a->classes[c].bins[k];
      vs_lock_take(bin->mu);
      uint64_t run = 0;
      for (vs_slab *s = bin->slabs; s; s = s->next) {
        st->class_slots[c] += s->nslots;
        st->class_live[c] += s->nlive;
        slab_live_bytes += (uint64_t)s->nlive * a->classes[c].size;
        /* free slots as extents: runs of consecutive FREE slots */
        for (uint32_t i = 0; i < s->nslots; i++) {
          if (s->free_bm[i / 64] & (1ull << (i % 64))) run += a->classes[c].size;
          else { extent_add(st, &st->largest_free, run); run = 0; }
        }
        extent_add(st, &st->largest_free, run);
        run = 0;
      }
      slab_pend += bin->pend_bytes;
      waste += bin->waste;
      live_req += bin->live_req;
      requests += bin->requests;
      vs_lock_give(bin->mu);
    }
  }
  vs_heap *h = &a->heap;
  vs_heap_lock(a);
  uint64_t heap_largest = heap_extents(h, VS_HEAP_NT, st);
  if (heap_largest > st->largest_free) st->largest_free = heap_largest;
  st->reserved_bytes = vs_heap_reserved(h);
  /* Bytes of the heap's live user blocks: their requests plus their rounding
   * (vs_heap_check verifies both counters against the blocks). */
  uint64_t heap_live_blocks = h->live_req + h->waste;
  st->pending_bytes = atomic_load(&a->pend_total) + slab_pend;
  st->live_count = h->live_count;
  live_req += h->live_req;
  requests += h->requests;
  waste += h->waste;
  vs_lock_give(&h->mu);
  st->live_bytes = live_req;
  /* Small-object bytes reach the peak in steps of at most VS_LIVE_FOLD per bin. */
  st->peak_live_bytes = atomic_load(&a->peak_live);
  if (st->peak_live_bytes < live_req) st->peak_live_bytes = live_req;
  st->peak_reserved_bytes = atomic_load(&a->peak_reserved);
  uint64_t used = heap_live_blocks + slab_live_bytes;
  st->free_bytes = st->reserved_bytes > used ? st->reserved_bytes - used : 0;
  st->internal_waste = waste;
  /* Requests: served ones counted where served; refused ones are in unserved. */
  uint64_t unserved = atomic_load(&a->unserved);
  st->requests = requests + atomic_load(&a->refused);
  st->served_from_cache = st->requests > unserved ? st->requests - unserved : 0;
  st->backend_calls = atomic_load(&a->backend_calls);
  st->syncs = atomic_load(&a->syncs);
  for (uint32_t c = 0; c < a->nclasses; c++) st->live_count += st->class_live[c];
}

/* ---- One piece ------------------------------------------------------------- */

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* Caller holds heap.mu. Whether block b is free once the OOM ladder has run:
 * free, pending (its sync comes first), or an empty slab (given back). */
static int free_after_ladder(const vs_tblock *b, const uint64_t *empty, size_t nempty) {
  if (b->state != VS_TB_LIVE) return 1;
  return !b->req && nempty && bsearch(&b->addr, empty, nempty, sizeof *empty, cmp_u64);
}

/* Caller holds heap.mu. The first run of blocks free after the ladder
 * from *b on, as [*lo, *hi); *b moves past it. 0 when there is none. */
static int free_run(vs_tblock **b, const uint64_t *empty, size_t nempty, uint64_t *lo, uint64_t *hi) {
  vs_tblock *x = *b;
  while (x && !free_after_ladder(x, empty, nempty)) x = x->next;
  if (!x) return 0;
  *lo = x->addr;
  *hi = x->addr + x->size;
  for (x = x->next; x && free_after_ladder(x, empty, nempty); x = x->next) *hi = x->addr + x->size;
  *b = x;
  return 1;
}

/* Caller holds heap.mu. Bytes the OOM ladder would give back: chunks wholly
 * free after it, or (VMM) pooled handles and mapped handles lying wholly
 * in a run of such blocks (trim_locked releases exactly these). */
static uint64_t ladder_bytes(vs_heap *h, const uint64_t *empty, size_t nempty) {
  uint64_t n = 0;
  if (h->vmm)
    for (uint32_t p = h->pool; p; p = h->h[p - 1].pnext) n += h->h[p - 1].size;
  VS_HEAP_REGIONS(h, tr) {
    vs_hregion *r = hr(tr);
    if (!h->vmm) {
      int whole = 1;
      for (vs_tblock *b = tr->first; b && whole; b = b->next) whole = free_after_ladder(b, empty, nempty);
      if (whole) n += tr->size;
      continue;
    }
    uint64_t top = tr->base + r->hiwater * h->G, lo, hi;
    for (vs_tblock *b = tr->first; free_run(&b, empty, nempty, &lo, &hi) && lo < top;) {
      for (uint64_t va = up(lo, h->G); va + h->G <= hi && va < top;) {
        uint32_t i = r->gmap[gran(h, tr, va)];
        if (!i) { va += h->G; continue; }
        const vs_handle *x = &h->h[i - 1];
        if (x->va >= lo && x->va + x->size <= hi) n += x->size;
        va = x->va + x->size;   /* a handle's granules are contiguous */
      }
    }
  }
  return n;
}

/* Caller holds heap.mu; VMM. The largest request placed at the start of
 * the free run [lo, hi) of region tr once the ladder has run, with budget
 * bytes (whole granules) of physical memory to map: granules of a handle
 * a live block pins stay mapped and cost nothing, every other granule the
 * request touches costs one. */
static uint64_t run_piece(vs_heap *h, vs_tregion *tr, uint64_t lo, uint64_t hi, uint64_t budget) {
  vs_hregion *r = hr(tr);
  uint64_t top = tr->base + r->hiwater * h->G, at = lo;
  while (at < hi && at < top) {
    uint64_t g = gran(h, tr, at), gend = tr->base + (g + 1) * h->G, piece = (gend < hi ? gend : hi) - at;
    uint32_t i = r->gmap[g];
    const vs_handle *x = i ? &h->h[i - 1] : NULL;
    int pinned = x && (x->va < lo || x->va + x->size > hi);
    if (!pinned) {
      if (budget < h->G) return at - lo;
      budget -= h->G;
    }
    at += piece;
  }
  if (at < hi) at += hi - at < budget ? hi - at : budget;   /* never mapped: granule-aligned from top on */
  return at - lo;
}

/* Caller holds heap.mu; VMM. The largest request a free run of the main
 * regions could take with budget bytes to map (run_piece), if more than
 * best. */
static uint64_t runs_piece(vs_heap *h, uint64_t budget, uint64_t best, const uint64_t *empty, size_t nempty) {
  uint64_t lo, hi;
  for (vs_tregion *tr = h->t[0].regions; tr; tr = tr->rnext)
    for (vs_tblock *b = tr->first; free_run(&b, empty, nempty, &lo, &hi);) {
      if (hi - lo <= best) continue;   /* a piece never passes its run */
      uint64_t n = run_piece(h, tr, lo, hi, budget);
      if (n > best) best = n;
    }
  return best;
}

/* Caller holds heap.mu; VMM. Whether granule g (below the high-water
 * mark) of the free run [lo, hi) costs a granule of new memory after the
 * ladder: unmapped, or mapped by a handle lying wholly in the run (the
 * ladder releases it). A handle a live block pins stays and costs nothing. */
static int costly(const vs_heap *h, const vs_hregion *r, uint64_t g, uint64_t lo, uint64_t hi) {
  uint32_t i = r->gmap[g];
  if (!i) return 1;
  const vs_handle *x = &h->h[i - 1];
  return x->va >= lo && x->va + x->size <= hi;
}

/* Caller holds heap.mu; VMM. The longest stretch of the free run [lo, hi)
 * of region tr whose costly granules (above) number at most budget / G:
 * every placement in the run, not only at its start as run_piece (a stretch
 * ending on the free granules of a pinned handle at the run's end counts
 * too). Two pointers over the mapped granules; the never-mapped tail from
 * the high-water mark on costs every granule, so the stretches reaching
 * into it are counted per start without walking it. */
static uint64_t run_window(const vs_heap *h, vs_tregion *tr, uint64_t lo, uint64_t hi, uint64_t budget) {
  const vs_hregion *r = hr(tr);
  const uint64_t G = h->G, k = budget / G, g0 = gran(h, tr, lo), gend = gran(h, tr, hi - 1) + 1;
  const uint64_t tail = g0 > r->hiwater ? g0 : r->hiwater, mend = gend < tail ? gend : tail;
  uint64_t best = 0, used = 0;
  for (uint64_t i = g0, j = g0; j < mend; j++) {
    used += costly(h, r, j, lo, hi);
    while (used > k) used -= costly(h, r, i++, lo, hi);
    uint64_t s = tr->base + i * G, e = tr->base + (j + 1) * G;
    if (s < lo) s = lo;
    if (e > hi) e = hi;
    if (i <= j && e - s > best) best = e - s;
  }
  if (gend <= tail) return best;
  uint64_t c = 0;   /* costly granules in [i, tail) */
  for (uint64_t i = tail + 1; i-- > g0;) {
    if (i < tail) c += costly(h, r, i, lo, hi);
    if (c > k) break;
    uint64_t t = k - c < gend - tail ? k - c : gend - tail;
    uint64_t s = tr->base + i * G, e = tr->base + (tail + t) * G;
    if (s < lo) s = lo;
    if (e > hi) e = hi;
    if (e > s && e - s > best) best = e - s;
  }
  return best;
}

uint64_t vs_heap_ladder_piece(vs_heap *h, uint64_t room) {
  if (!h->vmm) return UINT64_MAX;
  uint64_t back = ladder_bytes(h, NULL, 0), budget = room + back < room ? UINT64_MAX : room + back, best = 0, lo, hi;
  for (vs_tregion *tr = h->t[0].regions; tr; tr = tr->rnext)
    for (vs_tblock *b = tr->first; free_run(&b, NULL, 0, &lo, &hi);) {
      if (hi - lo <= best) continue;
      uint64_t n = run_window(h, tr, lo, hi, budget);
      if (n > best) best = n;
    }
  return best;
}

/* Caller holds bin->mu. The bases of bin's slabs without a live slot,
 * appended to empty[0..n); the new count, at most VS_EMPTY_SLABS_MAX. */
static inline size_t bin_empty_slabs(const vs_bin *bin, uint64_t *empty, size_t n) {
  for (const vs_slab *s = bin->slabs; s && n < VS_EMPTY_SLABS_MAX; s = s->next)
    if (!s->nlive) empty[n++] = s->base;
  return n;
}

/* Bases of the slabs without a live slot (their pending slots are free
 * after the ladder's sync), sorted; at most VS_EMPTY_SLABS_MAX. Only the bins
 * with a slab (bins_in_use). Bins before the heap (the lock order): a slab
 * emptied or filled in between moves an answer by a slab, as any later
 * call would. */
static size_t empty_slabs(vs_arena *a, uint64_t *empty) {
  size_t n = 0;
  vs_bin *bin;
  for (uint32_t i = 0; (bin = vs_slab_next_bin_in_use(a, &i)); i++) {
    vs_lock_take(bin->mu);   /* a reading */
    bin->viewed = 1;         /* its next change ends the kept answers (core.h) */
    n = bin_empty_slabs(bin, empty, n);
    vs_lock_give(bin->mu);
  }
  if (n > 1) qsort(empty, n, sizeof *empty, cmp_u64);
  return n;
}

/* Caller holds heap.mu. Whether k is the answer for room and empty with
 * the heap as it is now (vs_view_kept). */
static int kept_holds(const vs_heap *h, const vs_view_kept *k, uint64_t room, const uint64_t *empty, size_t nempty) {
  if (!k->valid || k->room != room || k->mgen != h->map_gen || k->pgen != h->pend_gen ||
      k->pool_bytes != h->pool_bytes || k->nempty != nempty)
    return 0;
  for (int i = 0; i < VS_HEAP_NT; i++)
    if (k->tgen[i] != h->t[i].gen) return 0;
  return !nempty || !memcmp(k->empty, empty, nempty * sizeof *empty);
}

/* Caller holds heap.mu. Keeps answer with what it was read from; and for
 * the look without a lock (kept_fast), when `fresh` (this walk began its
 * write section: kept_or_walk), as its f_ fields, the section ended. */
static void kept_store(const vs_heap *h, vs_view_kept *k, uint64_t room, const uint64_t *empty, size_t nempty,
                       uint64_t answer, uint32_t fresh) {
  if (fresh) {
    atomic_store_explicit(&k->f_room, room, memory_order_relaxed);
    atomic_store_explicit(&k->f_answer, answer, memory_order_relaxed);
    vs_kept_end(&k->ver, fresh);
  }
  k->valid = 1;
  for (int i = 0; i < VS_HEAP_NT; i++) k->tgen[i] = h->t[i].gen;
  k->mgen = h->map_gen;
  k->pgen = h->pend_gen;
  k->pool_bytes = h->pool_bytes;
  k->room = room;
  k->answer = answer;
  k->nempty = (uint32_t)nempty;
  if (nempty) memcpy(k->empty, empty, nempty * sizeof *empty);
}

/* Caller holds heap.mu. vs_arena_one_piece's walk. */
static uint64_t one_piece_walk(vs_heap *h, uint64_t room, const uint64_t *empty, size_t nempty) {
  /* Not VMM's small blocks' tlsf: it serves no request above VS_SMALL_MAX. */
  uint64_t largest_free = heap_extents(h, VS_HEAP_SMALL, NULL);
  /* A growth is made in whole granules (VMM) or 512-byte units (a chunk of
   * the request's own size when nothing larger is granted). */
  uint64_t back = ladder_bytes(h, empty, nempty), unit = h->vmm ? h->G : VS_TLSF_ALIGN;
  uint64_t sum = room + back < room ? UINT64_MAX : room + back, best = sum / unit * unit;
  /* VMM: a request may also start on the free granules of a handle a live
   * block pins and go on over new ones. */
  if (h->vmm) {
    uint64_t most = best > largest_free ? best : largest_free;
    best = runs_piece(h, best, most, empty, nempty);
  }
  return best > largest_free ? best : largest_free;
}

static uint64_t reclaim_walk(vs_heap *h, uint64_t room, const uint64_t *empty, size_t nempty) {
  (void)room;
  return ladder_bytes(h, empty, nempty);
}

/* The view's two walks, by their index in a->kept. */
typedef uint64_t (*view_walk)(vs_heap *h, uint64_t room, const uint64_t *empty, size_t nempty);
static const view_walk k_view_walks[2] = {one_piece_walk, reclaim_walk};
static const char *const k_view_names[2] = {"one piece", "reclaimable"};

/* `which`'s kept answer for room without a lock: 1 with *out while its
 * bit in view_fresh stands (no change since its walk began: core.h,
 * vs_view_stale) and no walk keeps another meanwhile (ver). A program
 * asking cuMemGetInfo in a loop takes no lock then. */
static int kept_fast(vs_arena *a, int which, uint64_t room, uint64_t *out) {
  vs_view_kept *k = &a->kept[which];
  uint32_t v = vs_kept_read(&k->ver);
  if (!v || atomic_load_explicit(&k->f_room, memory_order_relaxed) != room) return 0;
  uint64_t answer = atomic_load_explicit(&k->f_answer, memory_order_relaxed);
  /* Acquire: a bit set by a later walk (after a later ver's odd store)
   * shows that ver below. */
  if (!(atomic_load_explicit(&a->view_fresh, memory_order_acquire) & (1u << which)) || !vs_kept_still(&k->ver, v))
    return 0;
  *out = answer;
  return 1;
}

/* Walk `which`'s answer for room: the kept one while its key holds. */
static uint64_t kept_or_walk(vs_arena *a, int which, uint64_t room) {
  uint64_t n;
  if (a->kept && kept_fast(a, which, room, &n)) return n;
  vs_view_kept *k = a->kept ? &a->kept[which] : NULL;
  /* One walk at a time keeps an answer for the look without a lock: from
   * before its bit is set until the answer is stored, so that an answer
   * read before a change is never stored after another walk set the bit
   * anew; another walk meanwhile answers without keeping. */
  uint32_t fresh = k ? vs_kept_begin(&k->ver) : 0;
  /* Before the walk reads anything: a change after this clears it. */
  if (fresh) atomic_fetch_or_explicit(&a->view_fresh, 1u << which, memory_order_acq_rel);
  uint64_t empty[VS_EMPTY_SLABS_MAX];
  size_t nempty = empty_slabs(a, empty);
  vs_heap *h = &a->heap;
  vs_heap_lock(a);
  h->viewed = 1;
  if (k && kept_holds(h, k, room, empty, nempty)) {
    n = k->answer;
  } else {
    n = k_view_walks[which](h, room, empty, nempty);
  }
  if (k) kept_store(h, k, room, empty, nempty, n, fresh);
  vs_lock_give(&h->mu);
  return n;
}

uint64_t vs_arena_one_piece(vs_arena *a, uint64_t room) { return a ? kept_or_walk(a, 0, room) : room; }
uint64_t vs_arena_reclaimable(vs_arena *a) { return a ? kept_or_walk(a, 1, 0) : 0; }

void vs_arena_set_watch(vs_arena *a, _Atomic uint32_t *word) {
  if (a) a->watch = word;
}

/* ---- Walk ----------------------------------------------------------------- */
void vs_arena_walk(vs_arena *a, const vs_arena_walker *w) {
  if (!a || !w) return;
  vs_heap *h = &a->heap;
  vs_heap_lock(a);
  VS_HEAP_REGIONS(h, tr) {
    vs_hregion *r = hr(tr);
    vs_region_info ri = {.base = tr->base, .size = tr->size,
                         .kind = h->vmm ? VS_REGION_VMM_RANGE : r->dedicated ? VS_REGION_DEDICATED : VS_REGION_CHUNK};
    /* A VMM reservation is reported up to its highest mapped granule: the
     * rest is address space, not memory. */
    if (h->vmm) ri.size = r->hiwater * h->G;
    if (w->region) w->region(w->user, &ri);
    for (vs_tblock *b = tr->first; b && b->addr < tr->base + ri.size; b = b->next) {
      uint64_t end = b->addr + b->size;
      if (end > tr->base + ri.size) end = tr->base + ri.size;
      vs_block_info bi = {.offset = b->addr - tr->base, .size = end - b->addr,
                          .state = b->state == VS_TB_FREE ? VS_BLOCK_FREE
                                   : b->state == VS_TB_PENDING ? VS_BLOCK_PENDING : VS_BLOCK_LIVE};
      if (w->block) w->block(w->user, &ri, &bi);
    }
  }
  vs_lock_give(&h->mu);
  for (uint32_t c = 0; c < a->nclasses; c++)
    for (int k = 0; k < VS_NBINS_ALL; k++) {
      vs_bin *bin = &a->classes[c].bins[k];
      uint64_t cs = a->classes[c].size;
      vs_lock_take(bin->mu);
      for (vs_slab *s = bin->slabs; s; s = s->next) {
        vs_region_info ri = {.base = s->base, .size = VS_SLAB_SIZE, .kind = VS_REGION_SLAB, .class_size = cs};
        if (w->region) w->region(w->user, &ri);
        if (!w->block) continue;
        /* runs of slots in the same state */
        uint32_t i = 0;
        while (i < s->nslots) {
          int st = s->live_bm[i / 64] & (1ull << (i % 64)) ? VS_BLOCK_LIVE
                   : s->pend_bm[i / 64] & (1ull << (i % 64)) ? VS_BLOCK_PENDING : VS_BLOCK_FREE;
          uint32_t j = i + 1;
          while (j < s->nslots) {
            int sj = s->live_bm[j / 64] & (1ull << (j % 64)) ? VS_BLOCK_LIVE
                     : s->pend_bm[j / 64] & (1ull << (j % 64)) ? VS_BLOCK_PENDING : VS_BLOCK_FREE;
            if (sj != st || st == VS_BLOCK_LIVE) break;   /* live slots one by one */
            j++;
          }
          vs_block_info bi = {.offset = i * cs, .size = (uint64_t)(j - i) * cs, .state = (vs_block_state)st};
          w->block(w->user, &ri, &bi);
          i = j;
        }
      }
      vs_lock_give(bin->mu);
    }
}

/* ---- Check ---------------------------------------------------------------- */
#define FAIL(...) do { snprintf(err, len, __VA_ARGS__); goto out; } while (0)

static int popcount_words(const uint64_t *w, uint32_t n) {
  int c = 0;
  for (uint32_t i = 0; i < n; i++) c += __builtin_popcountll(w[i]);
  return c;
}

/* Caller holds every bin's lock and the heap's. A kept view answer whose
 * key still holds is what a walk says now (vs_view_kept). */
static int kept_check(vs_arena *a, char *err, size_t len) {
  if (!a->kept) return 0;
  vs_heap *h = &a->heap;
  uint64_t empty[VS_EMPTY_SLABS_MAX];
  size_t n = 0;
  vs_bin *bin;   /* every lock held: the view's reading without its locking */
  for (uint32_t i = 0; (bin = vs_slab_next_bin_in_use(a, &i)); i++) n = bin_empty_slabs(bin, empty, n);
  if (n > 1) qsort(empty, n, sizeof *empty, cmp_u64);
  for (int w = 0; w < 2; w++) {
    const vs_view_kept *k = &a->kept[w];
    uint64_t walked;
    if (kept_holds(h, k, k->room, empty, n) && (walked = k_view_walks[w](h, k->room, empty, n)) != k->answer) {
      snprintf(err, len, "arena: kept %s %llu for room %llu, a walk says %llu", k_view_names[w],
               (unsigned long long)k->answer, (unsigned long long)k->room, (unsigned long long)walked);
      return -1;
    }
    /* The look without a lock: an answer that still stands is a walk's. */
    uint32_t v = atomic_load(&k->ver);
    uint64_t room = atomic_load(&k->f_room);
    if (v && !(v & 1) && (atomic_load(&a->view_fresh) & (1u << w)) &&
        (walked = k_view_walks[w](h, room, empty, n)) != atomic_load(&k->f_answer)) {
      snprintf(err, len, "arena: kept %s %llu for room %llu (read without a lock), a walk says %llu",
               k_view_names[w], (unsigned long long)atomic_load(&k->f_answer), (unsigned long long)room,
               (unsigned long long)walked);
      return -1;
    }
  }
  return 0;
}

int vs_arena_check(vs_arena *a, char *err, size_t len) {
  char dummy[8];
  if (!err || !len) { err = dummy; len = sizeof dummy; }
  err[0] = 0;
  if (!a) { snprintf(err, len, "arena: NULL"); return -1; }
  int rc = -1;
  /* Lock order: every bin (class, then bin), then the heap. */
  for (uint32_t c = 0; c < a->nclasses; c++)
    for (int k = 0; k < VS_NBINS; k++) vs_lock_take(a->classes[c].bins[k].mu);
  vs_lock_take(&a->off_mu);   /* every off-lane bin's */
  vs_heap *h = &a->heap;
  vs_lock_take(&h->mu);
  if (vs_heap_check(a, err, len)) goto out;
  uint64_t live = h->live_req, nslabs_all = 0;
  int64_t unfolded = 0;
  for (uint32_t c = 0; c < a->nclasses; c++) {
    uint64_t cs = a->classes[c].size;
    if (cs % 512) FAIL("slab: class %u size %llu not 512-aligned", c, (unsigned long long)cs);
    for (int k = 0; k < VS_NBINS_ALL; k++) {
      vs_bin *bin = &a->classes[c].bins[k];
      uint64_t blive = 0, bwaste = 0, bpend = 0, n = 0;
      int cur_found = !bin->cur;
      for (vs_slab *s = bin->slabs; s; s = s->next, n++) {
        if (s->bin != bin || s->cls != c) FAIL("slab 0x%llx: wrong owner", (unsigned long long)s->base);
        if (s == bin->cur) cur_found = 1;
        if (s->base % VS_SLAB_SIZE) FAIL("slab 0x%llx: not aligned", (unsigned long long)s->base);
        if (vs_pm_get(a, s->base) != s) FAIL("slab 0x%llx: page map disagrees", (unsigned long long)s->base);
        vs_tblock *hb = vs_heap_used(h, s->base);
        if (!hb || hb->state != VS_TB_LIVE || hb->req || hb->size != VS_SLAB_SIZE)
          FAIL("slab 0x%llx: heap block missing or wrong", (unsigned long long)s->base);
        for (uint32_t w = 0; w < s->words; w++) {
          uint64_t all = w * 64 + 64 <= s->nslots ? ~0ull : (1ull << (s->nslots % 64)) - 1;
          if ((s->free_bm[w] & s->live_bm[w]) || (s->free_bm[w] & s->pend_bm[w]) || (s->live_bm[w] & s->pend_bm[w]))
            FAIL("slab 0x%llx: a slot in two states", (unsigned long long)s->base);
          if ((s->free_bm[w] | s->live_bm[w] | s->pend_bm[w]) != all)
            FAIL("slab 0x%llx: a slot in no state", (unsigned long long)s->base);
        }
        if (popcount_words(s->free_bm, s->words) != (int)s->nfree || popcount_words(s->live_bm, s->words) != (int)s->nlive ||
            popcount_words(s->pend_bm, s->words) != (int)s->npend)
          FAIL("slab 0x%llx: counts disagree with bitmaps", (unsigned long long)s->base);
        int listed = 0;
        for (vs_slab *p = bin->pend; p; p = p->pnext) if (p == s) listed = 1;
        if (listed != (s->npend > 0) || listed != s->on_pend)
          FAIL("slab 0x%llx: pending list membership wrong", (unsigned long long)s->base);
        for (uint32_t i = 0; i < s->nslots; i++)
          if (s->live_bm[i / 64] & (1ull << (i % 64))) {
            if (!s->req[i] || s->req[i] > cs) FAIL("slab 0x%llx: slot %u request %u", (unsigned long long)s->base, i, s->req[i]);
            blive += s->req[i]; bwaste += cs - s->req[i];
          }
        bpend += s->npend * cs;
        if (s->nlive == 0 && s->npend == 0 && s != bin->cur && s != bin->spare)
          FAIL("slab 0x%llx: empty but not returned", (unsigned long long)s->base);
      }
      if (!cur_found) FAIL("slab: current slab not in its bin");
      if (bin->spare && (bin->spare->nlive || bin->spare->npend || bin->spare->bin != bin || bin->spare == bin->cur))
        FAIL("slab: spare slab not empty or not the bin's");
      if (n != bin->nslabs) FAIL("slab: bin count %llu, listed %llu", (unsigned long long)bin->nslabs, (unsigned long long)n);
      uint32_t bi = c * VS_NBINS_ALL + (uint32_t)k;
      int in_use = (int)(atomic_load(&a->bins_in_use[bi / 64]) >> (bi % 64) & 1);
      if (in_use != (n > 0))
        FAIL("slab: class %u bin %d has %llu slabs, its in-use bit %d", c, k, (unsigned long long)n, in_use);
      if (blive != bin->live_req || bwaste != bin->waste || bpend != bin->pend_bytes)
        FAIL("slab: bin counters disagree with slots (class %u)", c);
      live += blive;
      unfolded += bin->live_delta;
      nslabs_all += n;
    }
  }
  uint64_t heap_slabs = 0;
  VS_HEAP_REGIONS(h, tr)
    for (vs_tblock *b = tr->first; b; b = b->next)
      if (b->state == VS_TB_LIVE && !b->req && b != h->parked) heap_slabs++;
  if (heap_slabs != nslabs_all) FAIL("arena: %llu slab blocks in the heap, %llu slabs", (unsigned long long)heap_slabs,
                                     (unsigned long long)nslabs_all);
  if (live != vs_arena_live(a) + (uint64_t)unfolded)
    FAIL("arena: live bytes %llu, blocks say %llu", (unsigned long long)vs_arena_live(a), (unsigned long long)live);
  if (kept_check(a, err, len)) goto out;
  if (vs_heap_reserved(h) > atomic_load(&a->peak_reserved)) FAIL("arena: reserved above its peak");
  if (atomic_load(&a->sync_done) > atomic_load(&a->sync_started)) FAIL("arena: sync generations inverted");
  rc = 0;
out:
  vs_lock_give(&h->mu);
  vs_lock_give(&a->off_mu);
  for (uint32_t c = a->nclasses; c-- > 0;)
    for (int k = VS_NBINS; k-- > 0;) vs_lock_give(a->classes[c].bins[k].mu);
  return rc;
}

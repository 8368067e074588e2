/* Small requests: size classes served from slabs of one class each.
 *
 * Classes are multiples of 512 B (the alignment contract): 512, 1 KiB,
 * 1.5 KiB, 2 KiB, then 4 per doubling up to VS_SMALL_MAX. A slab is one
 * VS_SLAB_SIZE block of the heap, aligned to its size, so the page map finds
 * the slab of any address without a lock.
 *
 * Each class has VS_NBINS bins, each with its own lock and slabs; a thread
 * sticks to one bin, so threads rarely share a lock. A free goes to the bin
 * that owns the slab. Besides them, the class's off-lane bin
 * (VS_BIN_OFF_LANE) serves allocations off the arena's lane once the lane
 * is in use (arena.c); a free there always pends, so no lane free feeds it.
 *
 * A slot is FREE, LIVE or PENDING (freed, waiting for a sync). A slab keeps
 * the newest stamp of its pending slots: once a sync newer than that stamp
 * has returned, all of them become FREE together. Allocation takes the
 * lowest free slot of the current slab; when it is full, the fullest slab
 * that has room becomes current, so sparse slabs drain. An empty slab goes
 * back to the heap at once (its slots were all synced), except the current.
 *
 * Invariants (checked in arena_check.c): per slab, the three bitmaps are
 * disjoint and cover every slot; nfree/nlive/npend are their popcounts; a
 * slab is on its bin's pending list iff npend > 0; the page map maps each
 * slab page to its slab; the slab's heap block is LIVE with no request. */
#include "core.h"
#include "mem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS (VS_SLAB_SIZE / 512)
#define MAX_WORDS (MAX_SLOTS / 64)

/* Size -> class, the same for every arena: filled once, before the first
 * arena exists (arenas are created while others allocate: one per context). */
static uint8_t class_by_512[VS_SMALL_MAX / 512 + 1];
static pthread_once_t class_once = PTHREAD_ONCE_INIT;

static uint64_t next_class(uint64_t s) { return s + (s < 2048 ? 512 : (1ull << vs_msb64(s)) / 4); }

static void class_table(void) {
  uint32_t c = 0;
  uint64_t size = 512;
  for (uint64_t k = 1; k <= VS_SMALL_MAX / 512; k++) {
    while (size < k * 512) {
      size = next_class(size);
      c++;
    }
    class_by_512[k] = (uint8_t)c;
  }
}

void vs_slab_classes(vs_arena *a) {
  pthread_once(&class_once, class_table);
  uint32_t n = 0;
  for (uint64_t s = 512; s <= VS_SMALL_MAX; s = next_class(s)) {
    a->classes[n].size = s;
    for (int b = 0; b < VS_NBINS_ALL; b++) {
      vs_bin *bin = &a->classes[n].bins[b];
      vs_lock_init(&bin->own);
      bin->off_lane = b == VS_BIN_OFF_LANE;
      bin->mu = bin->off_lane ? &a->off_mu : &bin->own;
      bin->cls = n;
    }
    n++;
  }
  a->nclasses = n;
}

int vs_slab_class_of(vs_arena *a, uint64_t size) {
  (void)a;
  return class_by_512[(size + 511) / 512];
}

/* ---- Page map ------------------------------------------------------------ */
vs_slab *vs_pm_get(vs_arena *a, uint64_t addr) {
  if (addr >> 48) return NULL;
  uint64_t page = addr >> VS_SLAB_SHIFT;
  vs_pm_leaf *l = atomic_load_explicit(&a->pm[page >> VS_PM_LEAF_BITS], memory_order_acquire);
  if (!l) return NULL;
  return atomic_load_explicit(&l->e[page & ((1u << VS_PM_LEAF_BITS) - 1)], memory_order_acquire);
}

static int pm_set(vs_arena *a, uint64_t addr, vs_slab *s) {
  if (addr >> 48) return -1;
  uint64_t page = addr >> VS_SLAB_SHIFT;
  _Atomic(vs_pm_leaf *) *slot = &a->pm[page >> VS_PM_LEAF_BITS];
  vs_pm_leaf *l = atomic_load_explicit(slot, memory_order_acquire);
  if (!l) {
    vs_pm_leaf *n = calloc(1, sizeof *n);
    if (!n) return -1;
    if (atomic_compare_exchange_strong(slot, &l, n)) l = n;
    else free(n);   /* another thread installed one: l holds it */
  }
  atomic_store_explicit(&l->e[page & ((1u << VS_PM_LEAF_BITS) - 1)], s, memory_order_release);
  return 0;
}

/* ---- Slab descriptors (type-stable: never freed before destroy, so a
 * lock-free page-map reader never touches freed memory) --------------------- */
static vs_slab *desc_get(vs_arena *a) {
  pthread_mutex_lock(&a->slab_mu);
  vs_slab *s = a->spare_slabs;
  if (s) a->spare_slabs = s->pnext;
  pthread_mutex_unlock(&a->slab_mu);
  if (s) return s;
  s = vs_plat_aligned_alloc(_Alignof(vs_slab), sizeof *s);   /* sizeof is a multiple of the alignment */
  if (!s) return NULL;
  memset(s, 0, sizeof *s);
  s->free_bm = calloc(3 * MAX_WORDS, sizeof(uint64_t));
  s->req = calloc(MAX_SLOTS, sizeof(uint32_t));
  if (!s->free_bm || !s->req) { free(s->free_bm); free(s->req); vs_plat_aligned_free(s); return NULL; }
  s->live_bm = s->free_bm + MAX_WORDS;
  s->pend_bm = s->live_bm + MAX_WORDS;
  pthread_mutex_lock(&a->slab_mu);
  s->all = a->all_slabs;
  a->all_slabs = s;
  pthread_mutex_unlock(&a->slab_mu);
  return s;
}

static vs_bin *my_bin(vs_arena *a, int cls) {
  static _Thread_local int tl_bin __attribute__((tls_model("initial-exec"))) = -1;
  if (tl_bin < 0) tl_bin = (int)(atomic_fetch_add(&a->next_bin, 1) % VS_NBINS);
  return &a->classes[cls].bins[tl_bin];
}

/* Caller holds bin->mu: the bin's bit in a->bins_in_use (core.h). */
static void mark_in_use(vs_arena *a, const vs_bin *bin, int on) {
  const vs_class *c = &a->classes[bin->cls];
  uint32_t i = bin->cls * VS_NBINS_ALL + (uint32_t)(bin - c->bins);
  uint64_t bit = 1ull << (i % 64);
  if (on) atomic_fetch_or_explicit(&a->bins_in_use[i / 64], bit, memory_order_release);
  else atomic_fetch_and_explicit(&a->bins_in_use[i / 64], ~bit, memory_order_release);
  /* A bin that comes into use after a view read the bitmap was not
   * walked, and its viewed mark may be old: the kept answers end here,
   * after the bit (a view that sets its bit after this clear reads the
   * clear, and the bit, before its walk: core.h, vs_view_stale). Seldom:
   * a bin's first slab, its last. */
  vs_view_stale(a);
}

/* The bin this thread holds while the heap serves it a slab: the heap's
 * idle trim (vs_slab_trim_idle) skips it rather than try-lock it again. */
static _Thread_local vs_bin *tl_growing __attribute__((tls_model("initial-exec")));

static vs_slab *slab_new(vs_arena *a, vs_bin *bin, int held_only, int *rc) {
  uint64_t base;
  const vs_tregion *region;
  tl_growing = bin;
  *rc = vs_heap_alloc_mode(a, VS_SLAB_SIZE, 0, VS_SLAB_SIZE, held_only, &base, &region);
  tl_growing = NULL;
  if (*rc) return NULL;
  vs_slab *s = desc_get(a);
  if (!s) { vs_heap_free(a, base, VS_FREE_INTERNAL); *rc = VS_BACKEND_ERROR; return NULL; }
  uint64_t size = a->classes[bin->cls].size;
  s->base = base;
  s->region = region;
  s->cls = bin->cls;
  s->nslots = (uint32_t)(VS_SLAB_SIZE / size);
  s->words = (s->nslots + 63) / 64;
  s->nfree = s->nslots;
  s->nlive = s->npend = 0;
  s->on_pend = 0;
  s->pend_stamp = 0;
  memset(s->free_bm, 0, 3 * MAX_WORDS * sizeof(uint64_t));
  for (uint32_t i = 0; i < s->nslots; i++) s->free_bm[i / 64] |= 1ull << (i % 64);
  __atomic_store_n(&s->bin, bin, __ATOMIC_RELEASE);
  s->prev = NULL;
  s->next = bin->slabs;
  if (bin->slabs) bin->slabs->prev = s;
  bin->slabs = s;
  if (bin->nslabs++ == 0) mark_in_use(a, bin, 1);
  if (pm_set(a, base, s)) {
    bin->slabs = s->next;
    if (s->next) s->next->prev = NULL;
    if (--bin->nslabs == 0) mark_in_use(a, bin, 0);
    vs_heap_free(a, base, VS_FREE_INTERNAL);
    *rc = VS_BACKEND_ERROR;
    return NULL;
  }
  return s;
}

/* Caller holds bin->mu; s is empty and not on the pending list. */
static void slab_release(vs_arena *a, vs_bin *bin, vs_slab *s) {
  pm_set(a, s->base, NULL);
  if (s->prev) s->prev->next = s->next;
  else bin->slabs = s->next;
  if (s->next) s->next->prev = s->prev;
  if (bin->cur == s) bin->cur = NULL;
  if (bin->spare == s) bin->spare = NULL;
  if (--bin->nslabs == 0) mark_in_use(a, bin, 0);
  uint64_t base = s->base;
  __atomic_store_n(&s->bin, NULL, __ATOMIC_RELEASE);
  pthread_mutex_lock(&a->slab_mu);
  s->pnext = a->spare_slabs;
  a->spare_slabs = s;
  pthread_mutex_unlock(&a->slab_mu);
  vs_heap_free(a, base, VS_FREE_INTERNAL);
}

/* Caller holds bin->mu; s is empty, not the current slab, and not pending:
 * it becomes the bin's one spare (the next burst needs it), or goes back. */
static void retire_empty(vs_arena *a, vs_bin *bin, vs_slab *s) {
  if (!bin->spare) bin->spare = s;
  else if (s != bin->spare) slab_release(a, bin, s);
}

/* Caller holds bin->mu: pending slots synced since become FREE. */
static void bin_reclaim(vs_arena *a, vs_bin *bin, int release_cur) {
  uint64_t size = a->classes[bin->cls].size;
  vs_slab **pp = &bin->pend;
  while (*pp) {
    vs_slab *s = *pp;
    if (!vs_arena_ready(a, s->pend_stamp)) { pp = &s->pnext; continue; }
    for (uint32_t w = 0; w < s->words; w++) { s->free_bm[w] |= s->pend_bm[w]; s->pend_bm[w] = 0; }
    s->nfree += s->npend;
    bin->pend_bytes -= s->npend * size;
    s->npend = 0;
    s->on_pend = 0;
    *pp = s->pnext;
    if (s->nlive == 0 && release_cur) slab_release(a, bin, s);
    else if (s->nlive == 0 && s != bin->cur) retire_empty(a, bin, s);
  }
}

/* The fullest slab with a free slot, or NULL; ties in the heap's order (tlsf.h). */
static vs_slab *pick(vs_bin *bin) {
  vs_slab *best = NULL;
  for (vs_slab *s = bin->slabs; s; s = s->next)
    if (s->nfree && (!best || s->nfree < best->nfree ||
                     (s->nfree == best->nfree && vs_tregion_before(s->region, s->base, best->region, best->base))))
      best = s;
  return best;
}

int vs_slab_alloc(vs_arena *a, int cls, uint64_t req, uint64_t *addr, int off_lane, int *fresh) {
  vs_bin *bin = off_lane ? &a->classes[cls].bins[VS_BIN_OFF_LANE] : my_bin(a, cls);
  int rc = 0, rented = 0;
  *fresh = 0;
  vs_bin_take(a, bin);
  vs_slab *s = bin->cur;
  if (!s || !s->nfree) {
    s = pick(bin);
    if (!s && bin->pend) { bin_reclaim(a, bin, 0); s = pick(bin); }
    /* A new slab from memory the heap already holds, rather than a sync,
     * while the bin's pending bytes are below its live bytes (at least a
     * slab, at most VS_SLAB_PEND_MAX): a sync is a driver call whose count
     * follows the bytes freed, the slab costs held memory in proportion to
     * what the class uses. Never a growth for it: that is a call too. */
    if (!s && bin->pend && bin->pend_bytes < VS_SLAB_PEND_MAX &&
        (bin->pend_bytes < VS_SLAB_SIZE || bin->pend_bytes < bin->live_req)) {
      s = slab_new(a, bin, 1, &rc);
      *fresh = s != NULL;
      rc = 0;
    }
    if (!s && bin->pend) {
      /* Rather than grow, one sync makes every pending slot reusable --
       * unless the syncs made in place of growths are worth one already
       * (ski rental, core.c): then the new slab below grows the heap. */
      vs_lock_give(bin->mu);
      rented = !vs_arena_sync_or_grow(a, vs_heap_growth_bytes(a, VS_SLAB_SIZE));
      vs_bin_take(a, bin);
      if (!rented) {
        bin_reclaim(a, bin, 0);
        s = pick(bin);
      }
    }
    if (!s) *fresh = (s = slab_new(a, bin, 0, &rc)) != NULL;
    /* Refused even after the heap's OOM ladder (slab_new's heap growth runs
     * it): the sync after all, and the bin's pending slots back. */
    if (!s && rented && rc == VS_BACKEND_OOM) {
      vs_lock_give(bin->mu);
      vs_arena_sync(a);
      vs_bin_take(a, bin);
      bin_reclaim(a, bin, 0);
      if ((s = pick(bin)) != NULL) rc = 0;
    }
    if (!s) {
      vs_lock_give(bin->mu);
      return rc;
    }
    vs_slab *old = bin->cur;
    bin->cur = s;
    if (bin->spare == s) bin->spare = NULL;
    /* The old current slab may have become empty in the reclaim above
     * (all its slots were pending): it is the spare now, or goes back. */
    if (old && old != s && !old->nlive && !old->npend) retire_empty(a, bin, old);
  }
  uint32_t w = 0;
  while (!s->free_bm[w]) w++;
  uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(s->free_bm[w]);
  s->free_bm[w] &= s->free_bm[w] - 1;
  s->live_bm[w] |= 1ull << (i % 64);
  s->nfree--;
  s->nlive++;
  s->req[i] = (uint32_t)req;
  uint64_t size = a->classes[cls].size;
  bin->live_req += req;
  bin->waste += size - req;
  bin->requests++;
  bin->live_delta += (int64_t)req;
  if (bin->live_delta >= (int64_t)VS_LIVE_FOLD) { vs_arena_slab_live_add(a, bin->live_delta); bin->live_delta = 0; }
  vs_lock_give(bin->mu);
  *addr = s->base + (uint64_t)i * size;
  return 0;
}

/* Locks the bin that owns the slab of addr, or returns NULL (not a slab). */
static vs_slab *lock_slab(vs_arena *a, uint64_t addr, vs_bin **out) {
  for (;;) {
    vs_slab *s = vs_pm_get(a, addr);
    if (!s) return NULL;
    vs_bin *bin = __atomic_load_n(&s->bin, __ATOMIC_ACQUIRE);
    if (!bin) continue;   /* being released: the page map is about to say so */
    vs_bin_take(a, bin);
    if (vs_pm_get(a, addr) == s && __atomic_load_n(&s->bin, __ATOMIC_RELAXED) == bin) { *out = bin; return s; }
    vs_lock_give(bin->mu);
  }
}

int vs_slab_free(vs_arena *a, uint64_t addr, int ordered) {
  vs_bin *bin;
  vs_slab *s = lock_slab(a, addr, &bin);
  if (!s) return 1;
  uint64_t size = a->classes[s->cls].size, off = addr - s->base;
  uint32_t i = (uint32_t)(off / size);
  if (off % size || i >= s->nslots || !(s->live_bm[i / 64] & (1ull << (i % 64)))) {
    vs_lock_give(bin->mu);
    return -1;
  }
  s->live_bm[i / 64] &= ~(1ull << (i % 64));
  s->nlive--;
  if (bin->off_lane) ordered = 0;   /* the bin's next owner may be off the lane */
  if (ordered) {
    /* In stream order the slot is reusable at once. */
    s->free_bm[i / 64] |= 1ull << (i % 64);
    s->nfree++;
  } else {
    s->pend_bm[i / 64] |= 1ull << (i % 64);
    s->npend++;
    s->pend_stamp = vs_arena_stamp(a);
    if (!s->on_pend) { s->on_pend = 1; s->pnext = bin->pend; bin->pend = s; }
    bin->pend_bytes += size;
  }
  bin->live_req -= s->req[i];
  bin->waste -= size - s->req[i];
  bin->live_delta -= (int64_t)s->req[i];
  if (bin->live_delta <= -(int64_t)VS_LIVE_FOLD) {
    vs_arena_slab_live_add(a, bin->live_delta);
    bin->live_delta = 0;
  }
  /* Emptied in stream order: as bin_reclaim does with an emptied slab. */
  if (ordered && s->nlive == 0 && s->npend == 0 && s != bin->cur) retire_empty(a, bin, s);
  vs_lock_give(bin->mu);
  return 0;
}

int vs_slab_lookup(vs_arena *a, uint64_t addr, uint64_t *start, uint64_t *size) {
  vs_bin *bin;
  vs_slab *s = lock_slab(a, addr, &bin);
  if (!s) return 1;
  uint64_t cs = a->classes[s->cls].size;
  uint32_t i = (uint32_t)((addr - s->base) / cs);
  int rc = -1;
  if (i < s->nslots && (s->live_bm[i / 64] & (1ull << (i % 64))) && addr - s->base - i * cs < s->req[i]) {
    *start = s->base + (uint64_t)i * cs;
    *size = s->req[i];
    rc = 0;
  }
  vs_lock_give(bin->mu);
  return rc;
}

uint64_t vs_slab_pending(vs_arena *a) {
  uint64_t n = 0;
  for (uint32_t c = 0; c < a->nclasses; c++)
    for (int b = 0; b < VS_NBINS_ALL; b++) {
      vs_bin *bin = &a->classes[c].bins[b];
      vs_lock_take(bin->mu);   /* a reading */
      n += bin->pend_bytes;
      vs_lock_give(bin->mu);
    }
  return n;
}

/* Caller holds bin->mu: its empty slabs (the spare, an empty current one,
 * and with reclaim the slabs its synced pending slots empty) back to the
 * heap. */
static uint64_t bin_trim(vs_arena *a, vs_bin *bin, int reclaim) {
  uint64_t n = 0, before = bin->nslabs;
  if (reclaim) bin_reclaim(a, bin, 1);
  if (bin->spare) slab_release(a, bin, bin->spare);
  if (bin->cur && bin->cur->nlive == 0 && bin->cur->npend == 0) slab_release(a, bin, bin->cur);
  if (before > bin->nslabs) n = (before - bin->nslabs) * VS_SLAB_SIZE;
  return n;
}

vs_bin *vs_slab_next_bin_in_use(vs_arena *a, uint32_t *i) {
  const uint32_t end = a->nclasses * VS_NBINS_ALL;
  while (*i < end) {
    uint32_t w = *i / 64;
    uint64_t m = atomic_load_explicit(&a->bins_in_use[w], memory_order_acquire) & (~0ull << (*i % 64));
    if (m) {
      uint32_t at = w * 64 + (uint32_t)__builtin_ctzll(m);
      if (at >= end) return NULL;
      *i = at;
      return &a->classes[at / VS_NBINS_ALL].bins[at % VS_NBINS_ALL];
    }
    *i = (w + 1) * 64;
  }
  return NULL;
}

/* A bin without slabs has nothing to trim: only the bins in use are
 * locked. */
uint64_t vs_slab_trim(vs_arena *a) {
  uint64_t n = 0;
  vs_bin *bin;
  for (uint32_t i = 0; (bin = vs_slab_next_bin_in_use(a, &i)); i++) {
    vs_bin_take(a, bin);
    n += bin_trim(a, bin, 1);
    vs_lock_give(bin->mu);
  }
  return n;
}

/* Before the heap grows (a driver call): the slabs that are empty now (a
 * bin's spare, an emptied current slab) of every bin whose lock is free at
 * once. No reclaim: slots waiting for a sync belong to the stream-safety
 * rules (slabs before syncs), which this must not change. Try-locks only:
 * the heap may be growing for a slab of a bin this thread holds, and a bin
 * busy now is in use anyway. */
uint64_t vs_slab_trim_idle(vs_arena *a) {
  uint64_t n = 0;
  vs_bin *bin;
  for (uint32_t i = 0; (bin = vs_slab_next_bin_in_use(a, &i)); i++) {
    if (bin == tl_growing || !vs_lock_try(bin->mu)) continue;
    vs_bin_changing(a, bin);
    n += bin_trim(a, bin, 0);
    vs_lock_give(bin->mu);
  }
  return n;
}

void vs_slab_fini(vs_arena *a) {
  for (uint32_t i = 0; i < (1u << VS_PM_TOP_BITS); i++) free(atomic_load(&a->pm[i]));
  for (vs_slab *s = a->all_slabs, *n; s; s = n) {
    n = s->all;
    free(s->free_bm);
    free(s->req);
    vs_plat_aligned_free(s);
  }
  a->all_slabs = NULL;
}

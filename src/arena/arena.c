/* The arena: dispatch by size, stream-safe reuse, counters, trim, stats.
 *
 * Sizes: <= VS_SMALL_MAX go to slabs (slab.c); everything larger, and a
 * small request when no slab can be had, to the heap (heap.c), rounded to
 * 512 B.
 *
 * Stream safety. Out of stream order (vs_arena_set_stream_ordered: in it
 * a free is reusable at once), a free never makes memory reusable by
 * itself: the block becomes PENDING, stamped with the number of syncs
 * started so far. A
 * pending block is reusable once a sync that started after its free has
 * returned, i.e. when stamp < sync_done (sync_done holds the generation of
 * the newest sync that returned; generations count syncs started). Syncs
 * are batched: one call makes every pending block reusable at once, and it
 * is issued only (a) by an allocation that could otherwise not be served
 * without growing (slab bin or heap; once such syncs have cost what a
 * growth would, the growth instead: vs_arena_sync_or_grow, core.c), (b)
 * when pending bytes exceed the batch limit, or (c) by the OOM ladder or a
 * trim. The generations and counters live in core.c.
 *
 * The lane (arena.h). A lane free is FREE at once, as in stream order; an
 * allocation off the lane that then chose any block waits, with one sync,
 * until every lane free older than its choice is behind a finished one
 * (lane_pend) -- or, on a known stream, has that stream ordered after the
 * lane instead (order_stream; lane_frees counts what an order covered).
 * Small allocations off the lane use their class's off-lane bin, which
 * lane frees never feed, so only a slab new to it must wait.
 *
 * Dependencies run one way: arena.c (this file: the API, dispatch, trim)
 * over slab.c (size classes, which take their slabs from the heap) over
 * heap.c (TLSF, VMM, chunks, the OOM ladder) over core.c (sync
 * generations, sync or grow, call and live counters, the decay clock) and
 * tlsf.c. The heap's OOM ladder returns empty slabs through
 * a->ladder_trim, and its growth through a->idle_trim, both set here, not
 * by calling slab.c. */
#include "arena.h"
#include "core.h"
#include "mem.h"

#include <stdlib.h>
#include <string.h>

void vs_arena_set_decay(vs_arena *a, uint64_t decay_ms) {
  if (!a) return;
  vs_heap_take(a);
  a->decay_ns = decay_ms * 1000000ull;
  vs_lock_give(&a->heap.mu);
}

void vs_arena_set_clock(vs_arena *a, uint64_t (*now_ns)(void *ctx), void *ctx) {
  if (!a) return;
  vs_heap_take(a);
  a->clock = now_ns;
  a->clock_ctx = ctx;
  memset(a->heap.dk_id, 0, sizeof a->heap.dk_id);
  a->heap.dk_cur = 0;
  a->heap.dk_next = vs_arena_now(a);
  vs_lock_give(&a->heap.mu);
}

vs_arena *vs_arena_create(const vs_arena_config *cfg, const vs_arena_backend *be) {
  if (!cfg || !be || !be->chunk_alloc || !be->chunk_free || !be->sync) return NULL;
  if (cfg->mode == VS_ARENA_VMM &&
      (be->granule < 512 || (be->granule & (be->granule - 1)) || !be->va_reserve || !be->va_free ||
       !be->phys_create || !be->phys_release || !be->map || !be->unmap))
    return NULL;
  if (cfg->mode != VS_ARENA_VMM && cfg->mode != VS_ARENA_CHUNKS) return NULL;
  /* Over-aligned (cache-line members): calloc's 16 bytes are not enough. */
  vs_arena *a = vs_plat_aligned_alloc(_Alignof(vs_arena), sizeof *a);
  if (a) memset(a, 0, sizeof *a);
  if (!a) return NULL;
  a->cfg = *cfg;
  a->be = *be;
  pthread_mutex_init(&a->slab_mu, NULL);
  vs_lock_init(&a->off_mu);
  pthread_mutex_init(&a->lane_mu, NULL);
  vs_heap_init(a);
  vs_slab_classes(a);
  a->ladder_trim = vs_slab_trim;   /* the heap's OOM ladder returns empty slabs too */
  a->idle_trim = vs_slab_trim_idle;   /* and so does every growth, first */
  a->decay_ns = VS_ARENA_DECAY_DEFAULT_MS * 1000000ull;
  a->heap.dk_next = vs_arena_now(a);
  atomic_init(&a->tick_stamp, VS_TICK_NEVER);
  a->kept = calloc(2, sizeof *a->kept);
  return a;
}

void vs_arena_destroy(vs_arena *a) {
  if (!a) return;
  vs_heap_fini(a);    /* returns every region and handle, live or not */
  vs_slab_fini(a);
  pthread_mutex_destroy(&a->slab_mu);
  pthread_mutex_destroy(&a->lane_mu);
  free(a->kept);
  vs_plat_aligned_free(a);
}

static uint64_t batch_limit(vs_arena *a) {
  uint64_t r = atomic_load_explicit(&a->peak_reserved, memory_order_relaxed) / 8;
  return r > VS_BATCH_MIN ? r : VS_BATCH_MIN;
}

/* 1 when every lane free up to lane_pend value l is behind a finished sync
 * (or there was none). */
static int lane_ready(vs_arena *a, uint64_t l) { return l == 0 || vs_arena_ready(a, l - 1); }
/* The same for every lane free so far: an allocation off the lane may then take any FREE block. */
static int lane_synced(vs_arena *a) { return lane_ready(a, atomic_load(&a->lane_pend)); }

static int free_block(vs_arena *a, uint64_t addr, int ordered, uint64_t size);

/* Caller holds lane_mu: stream's entry in lane_waits, or -1. */
static int lane_wait_of(vs_arena *a, uint64_t stream) {
  for (int i = 0; i < VS_LANE_WAITS; i++)
    if (a->lane_waits[i].stream == stream) return i;
  return -1;
}

/* 1 when `stream` waits for the first `seen` lane frees (lane_frees): it
 * already did (an earlier order covered them), or the backend orders it
 * now. The order is made after `seen` was read, so every lane free it
 * counts came before the lane's event. */
static int order_stream(vs_arena *a, uint64_t stream, uint64_t seen) {
  pthread_mutex_lock(&a->lane_mu);
  int i = lane_wait_of(a, stream), covered = i >= 0 && a->lane_waits[i].covered >= seen;
  pthread_mutex_unlock(&a->lane_mu);
  if (covered) return 1;
  vs_arena_call_done(a);
  if (a->be.order_after_lane(a->be.ctx, stream) != VS_BACKEND_OK) return 0;
  pthread_mutex_lock(&a->lane_mu);
  if ((i = lane_wait_of(a, stream)) < 0) {   /* a new entry, replacing the oldest one */
    i = (int)a->lane_next;
    a->lane_next = (a->lane_next + 1) % VS_LANE_WAITS;
    a->lane_waits[i].stream = stream;
    a->lane_waits[i].covered = 0;
  }
  if (a->lane_waits[i].covered < seen) a->lane_waits[i].covered = seen;
  pthread_mutex_unlock(&a->lane_mu);
  return 1;
}

void vs_arena_forget_stream(vs_arena *a, uint64_t stream) {
  if (!a || !stream) return;
  pthread_mutex_lock(&a->lane_mu);
  int i = lane_wait_of(a, stream);
  if (i >= 0) a->lane_waits[i].stream = 0, a->lane_waits[i].covered = 0;
  pthread_mutex_unlock(&a->lane_mu);
}

/* An allocation off the lane chose a block that a lane free may have made
 * FREE while lane work on it still runs: one sync, begun now, covers every
 * lane free made before the choice (`seen`, read after it: their stamps are
 * older). Lane frees made since, by other threads, are not this block's. */
static int settle_lane(vs_arena *a, uint64_t addr, uint64_t seen, uint64_t stream) {
  if (stream && a->be.order_after_lane && order_stream(a, stream, atomic_load(&a->lane_frees))) return VS_BACKEND_OK;
  vs_arena_sync(a);
  if (lane_ready(a, seen)) return VS_BACKEND_OK;
  (void)free_block(a, addr, 1, 0);   /* the sync failed: never handed out, so no use to wait for */
  return VS_BACKEND_ERROR;
}

/* VMM mode: a class takes slabs once it has made VS_SLAB_AFTER slabs'
 * worth of requests (a slab's slots: VS_SLAB_SIZE / the class size);
 * until then its blocks lie in the heap's small region (VS_HEAP_SMALL, a
 * VA region of their own mapped granule by granule), 512 B rounded. A
 * slab is a 2 MiB block held for one class: a program that makes a few
 * small tensors of several sizes (a small model's biases and norms, a few
 * hundred KiB in all) held a slab per class, 8 MiB for 0.8 MiB live, and
 * slabs laid among large blocks kept handles from coming free whole.
 * Traffic decides, not live bytes: a class allocated and freed at a high
 * rate (a server's per-token buffers, the hot-path benchmark) takes slabs
 * after a few thousand requests at most, and keeps the slab path's speed
 * and per-bin locks from then on. Smallest card met (vmm) on 22 of issue
 * 27's 24 tuned rows (was 19) and 64 of 66 held-out (was 61), none lost;
 * the threshold chosen on the tuned half (docs/benchmarks-replay.md,
 * "Seventeenth round"). Not chunks mode: there the same rule met five
 * fewer tuned cards and four fewer held-out ones (a chunk holding a few
 * small blocks cannot go back whole). */
static int slabs_for(vs_arena *a, int cls) {
  if (!a->heap.vmm) return 1;
  vs_class *c = &a->classes[cls];
  if (atomic_load_explicit(&c->heap_reqs, memory_order_relaxed) >= VS_SLAB_AFTER * (VS_SLAB_SIZE / c->size)) return 1;
  atomic_fetch_add_explicit(&c->heap_reqs, 1, memory_order_relaxed);
  return 0;
}

/* off_lane: an allocation that may be used on another stream than the
 * lane; stream: the one it is ordered on (0: any, at once). */
static int alloc_block(vs_arena *a, uint64_t size, uint64_t *addr, int off_lane, uint64_t stream) {
  if (!a || !addr || size == 0) return VS_BACKEND_ERROR;
  /* Beyond any card (64 TiB): refused as the driver refuses it, not an error. */
  if (size > (1ull << 46)) return VS_BACKEND_OOM;
  uint64_t calls0 = vs_tl_calls;
  if (a->be.could_fit && size > atomic_load_explicit(&a->fit_ok, memory_order_relaxed)) {
    if (a->be.could_fit(a->be.ctx, size) != VS_BACKEND_OK) {
      atomic_fetch_add_explicit(&a->unserved, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&a->refused, 1, memory_order_relaxed);
      return VS_BACKEND_OOM;
    }
    vs_atomic_raise(&a->fit_ok, size);
  }
  if (atomic_load_explicit(&a->pend_total, memory_order_relaxed) > batch_limit(a)) vs_arena_sync(a);
  /* Off the lane once the lane is in use, a small request takes its
   * class's off-lane bin, whose slots no lane free makes reusable at once:
   * only a slab new to that bin needs the lane settled. */
  int off_bin = off_lane && atomic_load(&a->lane_pend) != 0, fresh = 1;
  int cls = size <= VS_SMALL_MAX ? vs_slab_class_of(a, size) : -1;
  int rc = cls >= 0 && slabs_for(a, cls) ? vs_slab_alloc(a, cls, size, addr, off_bin, &fresh) : VS_BACKEND_OOM;
  /* Large, small of a class without slabs yet, or small with no room for a
   * whole slab: the heap may still fit this one request (a small one in
   * the small blocks' region first, where a class that has slabs by now
   * left the blocks it freed before). */
  if (rc == VS_BACKEND_OOM) {
    fresh = 1;
    rc = cls >= 0 ? vs_heap_alloc_small(a, up(size, VS_TLSF_ALIGN), size, addr)
                  : vs_heap_alloc(a, up(size, VS_TLSF_ALIGN), size, VS_TLSF_ALIGN, addr);
  }
  if (rc == 0 && off_lane && (!off_bin || fresh)) {
    uint64_t seen = atomic_load(&a->lane_pend);
    if (!lane_ready(a, seen)) rc = settle_lane(a, *addr, seen, stream);
  }
  if (rc != 0 || vs_tl_calls != calls0) atomic_fetch_add_explicit(&a->unserved, 1, memory_order_relaxed);
  if (rc != 0) atomic_fetch_add_explicit(&a->refused, 1, memory_order_relaxed);
  return rc;
}

int vs_arena_alloc(vs_arena *a, uint64_t size, uint64_t *addr) { return alloc_block(a, size, addr, 1, 0); }
int vs_arena_alloc_lane(vs_arena *a, uint64_t size, uint64_t *addr) { return alloc_block(a, size, addr, 0, 0); }
int vs_arena_alloc_on(vs_arena *a, uint64_t size, uint64_t stream, uint64_t *addr) {
  return alloc_block(a, size, addr, 1, stream);
}

/* size: the block's requested size where the caller knows it, else 0. */
static int free_block(vs_arena *a, uint64_t addr, int ordered, uint64_t size) {
  int rc = size > VS_SMALL_MAX ? 1 : vs_slab_free(a, addr, ordered);   /* no slab holds one this large */
  if (rc == 1) rc = vs_heap_free(a, addr, ordered ? VS_FREE_ORDERED : VS_FREE_PEND);
  /* Pending frees beyond both a batch and release_threshold are settled
   * here too, not only by the next allocation: a program that frees a
   * burst and then goes idle must still give the memory beyond
   * release_threshold back to the driver (once decay lets it go). */
  if (rc == 0) {
    uint64_t settle = batch_limit(a) > a->cfg.release_threshold ? batch_limit(a) : a->cfg.release_threshold;
    if (atomic_load_explicit(&a->pend_total, memory_order_relaxed) > settle) {
      vs_arena_sync(a);
      vs_heap_trim_decayed(a);  /* pending -> free, and what decay does not keep -> back */
    }
  }
  return rc;
}

uint64_t vs_arena_decay(vs_arena *a) {
  if (!a) return 0;
  /* Nothing beyond release_threshold (live bytes aside): the tick touches
   * nothing, so the arena's placement stays its callers' alone. */
  vs_heap_lock(a);
  uint64_t reserved = vs_heap_reserved(&a->heap);
  vs_lock_give(&a->heap.mu);
  uint64_t live = vs_arena_live(a);
  if (reserved <= live || reserved - live <= a->cfg.release_threshold) return 0;
  uint64_t st = atomic_load(&a->stamped), seen = atomic_exchange(&a->tick_stamp, st);
  /* The first look only records: "no sync since the last look" needs a
   * last look, and a tick in the first instants of a process would
   * otherwise sync and trim in the middle of its start (a replay through
   * the shim then placed differently from run to run). */
  if (seen == VS_TICK_NEVER) return 0;
  if (st == seen && atomic_load_explicit(&a->pend_total, memory_order_relaxed)) vs_arena_sync(a);
  uint64_t n = a->idle_trim ? a->idle_trim(a) : 0;
  return n + vs_heap_trim_decayed(a);
}

int vs_arena_free(vs_arena *a, uint64_t addr) { return vs_arena_free_sized(a, addr, 0, 0); }
int vs_arena_free_lane(vs_arena *a, uint64_t addr) { return vs_arena_free_sized(a, addr, 0, 1); }

int vs_arena_free_sized(vs_arena *a, uint64_t addr, uint64_t size, int lane) {
  if (!a) return -1;
  if (!lane) return free_block(a, addr, atomic_load(&a->ordered), size);
  /* Out of stream order the raise comes first: an allocation off the lane
   * that finds the block FREE then sees a lane free it must sync past
   * (the stamp also tells vs_arena_sync that a sync is worth making). */
  if (!atomic_load(&a->ordered)) {
    vs_atomic_raise(&a->lane_pend, vs_arena_stamp(a) + 1);
    atomic_fetch_add(&a->lane_frees, 1);
  }
  return free_block(a, addr, 1, size);
}

/* Caller holds heap.mu: the live user allocation of the heap containing
 * addr (0), or -1. */
static int heap_lookup(vs_heap *h, uint64_t addr, uint64_t *start, uint64_t *size) {
  vs_tblock *b = vs_heap_used(h, addr);
  if (!b) {
    vs_hregion *r = vs_heap_region_of(h, addr);
    for (b = r ? r->tr.first : NULL; b; b = b->next)
      if (addr >= b->addr && addr < b->addr + b->size) break;
  }
  if (!b || b->state != VS_TB_LIVE || !b->req || addr >= b->addr + b->req) return -1;
  *start = b->addr;
  *size = b->req;
  return 0;
}

int vs_arena_lookup(vs_arena *a, uint64_t addr, uint64_t *start, uint64_t *size) {
  if (!a || !start || !size) return -1;
  int rc = vs_slab_lookup(a, addr, start, size);
  if (rc != 1) return rc;
  vs_heap *h = &a->heap;
  vs_lock_take(&h->mu);   /* a reading */
  rc = heap_lookup(h, addr, start, size);
  vs_lock_give(&h->mu);
  return rc;
}

int vs_arena_placement(vs_arena *a, uint64_t addr, uint64_t *chunk_base, uint64_t *offset, int *vmm_backed) {
  uint64_t start, size;
  if (!a) return -1;
  int rc = vs_slab_lookup(a, addr, &start, &size);
  if (rc == -1) return -1;
  vs_heap *h = &a->heap;
  vs_lock_take(&h->mu);   /* a reading */
  if (rc == 1) rc = heap_lookup(h, addr, &start, &size);   /* not a slab: the heap's */
  vs_hregion *r = rc ? NULL : vs_heap_region_of(h, start);
  if (r) {
    if (chunk_base) *chunk_base = r->tr.base;
    if (offset) *offset = start - r->tr.base;
    if (vmm_backed) *vmm_backed = h->vmm;
  }
  vs_lock_give(&h->mu);
  return r ? 0 : -1;
}

int vs_arena_vmm_pieces(vs_arena *a, uint64_t addr, uint64_t size, vs_arena_piece_fn fn, void *user) {
  uint64_t start, len;
  if (!a || !fn || size == 0 || vs_arena_lookup(a, addr, &start, &len) != 0 || addr + size > start + len) return -1;
  vs_heap *h = &a->heap;
  vs_lock_take(&h->mu);   /* a reading */
  vs_hregion *r = h->vmm ? vs_heap_region_of(h, addr) : NULL;
  int rc = r && addr + size <= r->tr.base + r->tr.size ? 0 : -1;
  uint64_t g0 = rc ? 0 : gran(h, &r->tr, addr), g1 = rc ? 0 : gran(h, &r->tr, addr + size - 1) + 1;
  /* Check every granule first, so fn sees all of the range or nothing. */
  for (uint64_t g = g0; g < g1 && rc == 0; g++) rc = r->gmap[g] ? 0 : -1;
  for (uint64_t g = g0; g < g1 && rc == 0;) {
    uint32_t i = r->gmap[g];
    uint64_t n = 1;
    while (g + n < g1 && r->gmap[g + n] == i) n++;
    const vs_handle *x = &h->h[i - 1];
    uint64_t va = r->tr.base + (g << h->gshift);
    fn(user, va, n << h->gshift, x->id, va - x->va, x->size);
    g += n;
  }
  vs_lock_give(&h->mu);
  return rc;
}

void vs_arena_set_stream_ordered(vs_arena *a, int on) {
  if (!a) return;
  int was = atomic_exchange(&a->ordered, on ? 1 : 0);
  /* Leaving stream order: memory freed in it may still be in use by work
   * on the legacy stream, which a stream created from now on (a
   * non-blocking one) would not wait for. One sync, begun after the flag
   * is down, settles it: a free that still read the flag up was made
   * before, and so was the last use of its block. Frees in stream order
   * take no stamp: one is taken here, so that the sync is not skipped as
   * one that could make nothing reusable (core.c). */
  if (was && !on) {
    (void)vs_arena_stamp(a);
    vs_arena_sync(a);
  }
}

int vs_arena_stream_ordered(vs_arena *a) { return a && atomic_load(&a->ordered); }

void vs_arena_mappings(vs_arena *a, void (*fn)(void *user, uint64_t va, uint64_t size), void *user) {
  if (a && fn) vs_heap_mappings(a, fn, user);
}

int vs_arena_settle(vs_arena *a) {
  /* Lane frees too: their memory is reusable off the lane, or goes back
   * to the driver, only once the lane's work on it is done. */
  if (!a || (!atomic_load(&a->pend_total) && !vs_slab_pending(a) && lane_synced(a))) return 0;
  return vs_arena_sync(a);
}

uint64_t vs_arena_trim(vs_arena *a, uint64_t keep_bytes) {
  if (!a) return 0;
  vs_arena_settle(a);
  vs_slab_trim(a);
  return vs_heap_trim(a, keep_bytes);
}

/* The program's own synchronisations (arena.h). A ticket is a generation
 * as vs_arena_sync's own: every block freed before it has a smaller
 * stamp, so marking it done makes exactly those blocks reusable. */
uint64_t vs_arena_sync_ticket(vs_arena *a) { return a ? atomic_fetch_add(&a->sync_started, 1) + 1 : 0; }

void vs_arena_synced_to(vs_arena *a, uint64_t ticket) {
  if (!a || !ticket) return;
  /* A ticket never handed out would mark blocks freed later: cap it. */
  uint64_t started = atomic_load(&a->sync_started);
  if (ticket > started) ticket = started;
  vs_atomic_raise(&a->sync_done, ticket);
}

/* Internal structures of the arena, shared by its files, and the core
 * services of core.c beneath them. Not a contract: the contract is arena.h
 * (whose types, arena_types.h, are all this header takes from it). */
#ifndef VS_ARENA_CORE_H
#define VS_ARENA_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include "arena_types.h"
#include "tlsf.h"
#include "lock.h"

/* ---- Tunables ------------------------------------------------------------
 * May change (docs/arena.md explains each; measured values in
 * docs/benchmarks-arena.md); each can be overridden with -D for experiments. */
#define VS_SMALL_MAX (64ull << 10)      /* <= this: size classes in slabs */
#define VS_NBINS 2                      /* thread bins per class; vs_arena_check holds every bin
                                         * lock: classes x bins must stay < 64 (TSan) */
/* Besides them, each class has one bin for allocations off the lane
 * (arena.h) once the lane is in use: its slots are never reused at once,
 * so such an allocation needs no sync past the lane's frees. The off-lane
 * bins of all classes share one lock (a->off_mu; their traffic is small). */
#define VS_BIN_OFF_LANE VS_NBINS
#ifndef VS_LANE_WAITS
#define VS_LANE_WAITS 8                 /* streams the arena remembers as ordered after the lane */
#endif
#define VS_NBINS_ALL (VS_NBINS + 1)
#ifndef VS_CHUNK_MEDIUM
#define VS_CHUNK_MEDIUM (32ull << 20)   /* chunks mode: chunk for requests <= VS_DEDICATED_MIN */
#endif
#ifndef VS_DEDICATED_MIN
#define VS_DEDICATED_MIN (8ull << 20)   /* chunks mode: above, a chunk of its own (2 MiB rounded) */
#endif
#ifndef VS_OWN_CHUNK_MIN
#define VS_OWN_CHUNK_MIN (32ull << 20)  /* chunks mode: from this size a chunk of its own, no growth step */
#endif
#ifndef VS_SHARED_CHUNK_MULT
#define VS_SHARED_CHUNK_MULT 2          /* chunks mode: between the two above, a chunk at least this x the request */
#endif
#ifndef VS_KEEP_OUT_MAX
#define VS_KEEP_OUT_MAX (4ull << 20)    /* chunks mode: up to this, a wholly free own chunk is a last resort */
#endif
#ifndef VS_SLAB_AFTER
#define VS_SLAB_AFTER 1                 /* VMM mode: a class takes slabs after this many slabs' worth of requests */
#endif
#ifndef VS_PRESSURE_LARGEST_X2
#define VS_PRESSURE_LARGEST_X2 3        /* VMM pressure keeps room for this / 2 x the largest block (heap.c) */
#endif
#define VS_VMM_REGION (1ull << 40)      /* VMM mode: virtual space reserved at a time */
/* The small region's reservation: its blocks are at most VS_SMALL_MAX, of
 * classes that have no slabs yet (a few MiB live); a full one gets another.
 * A second 1 TiB per context took 8 TiB of address space for four contexts,
 * more than ThreadSanitizer leaves a process (the sim reserves host VA). */
#define VS_VMM_SMALL_REGION (1ull << 30)
#define VS_LIVE_FOLD (1ull << 20)       /* a bin folds its live bytes into the total by this */
#define VS_BATCH_MIN (256ull << 20)     /* heap pending bytes that force a sync at the next allocation */
#ifndef VS_GROW_DIV
#define VS_GROW_DIV 64                  /* growth step: at least held / this (held / (this / 2) in a climb) ... */
#endif
#ifndef VS_STEP_MIN_VMM
#define VS_STEP_MIN_VMM (32ull << 20)   /* ... and at least this (VMM): a small heap grows in batches too */
#endif
#ifndef VS_GROW_TO
#define VS_GROW_TO 1030                 /* VMM: a growth reaches at least this / 1000 x live (the floor's level; 0: off) ... */
#endif
#ifndef VS_GROW_NEAR_DIV
#define VS_GROW_NEAR_DIV 256            /* ... and near that level adds at most held / this beyond the need */
#endif
#ifndef VS_HANDLE_MAX
#define VS_HANDLE_MAX (1ull << 40)      /* largest physical handle (measured: capping costs calls, saves nothing) */
#endif
#ifndef VS_HANDLE_PRESSURE
#define VS_HANDLE_PRESSURE (2ull << 20) /* under pressure a handle is at most this ... */
#endif
#ifndef VS_HANDLE_PRESSURE_DIV
#define VS_HANDLE_PRESSURE_DIV 8        /* ... or this fraction of the run it backs, if larger (0: off) */
#endif
#ifndef VS_BUSY_WALK
#define VS_BUSY_WALK 64                 /* VMM ties: neighbours read each side to rank a handle's fullness */
#endif
#ifndef VS_SYNC_FRAC
#define VS_SYNC_FRAC 1                  /* sync before growth when pending * this >= the growth */
#endif
#ifndef VS_SYNC_MIN_VMM
#define VS_SYNC_MIN_VMM (64ull << 20)   /* ... and (VMM) pending is at least this */
#endif
#ifndef VS_SYNC_RENT
#define VS_SYNC_RENT 8                  /* ski rental: a growth is worth this many syncs ... */
#endif
#ifndef VS_RENT_BYTES
#define VS_RENT_BYTES (8ull << 20)      /* ... and one more per this many bytes it maps */
#endif
#ifndef VS_RENT_MAP_DIV
#define VS_RENT_MAP_DIV 2               /* VMM: a growth the rent bought maps at least pending / this (0: off) */
#endif
#ifndef VS_PLACE_SCAN
#define VS_PLACE_SCAN 4096              /* VMM: free blocks examined for the least-growth placement */
#endif
/* The heap's TLSFs: [0] every block and the slabs; [VS_HEAP_SMALL] (VMM
 * mode) small blocks of classes that have no slabs yet (arena.c,
 * slabs_for), in a VA region of their own mapped granule by granule. */
#define VS_HEAP_NT 2
#define VS_HEAP_SMALL 1
#ifndef VS_SLAB_PEND_MAX
#define VS_SLAB_PEND_MAX (8ull << 20)   /* a bin takes a new slab rather than sync while its pending bytes are below */
#endif
#define VS_TICK_NEVER UINT64_MAX   /* tick_stamp before the first vs_arena_decay */
#ifndef VS_DECAY_EPOCHS
#define VS_DECAY_EPOCHS 4               /* decay window resolution: epochs of decay / this */
#endif
#define VS_DECAY_RING (VS_DECAY_EPOCHS + 1)   /* the current epoch and a whole window before it */
#ifndef VS_DECAY_MULT_MAX
#define VS_DECAY_MULT_MAX 64            /* regret: the first regrets take the window to decay × this ... */
#endif
#ifndef VS_DECAY_MULT_CEIL
#define VS_DECAY_MULT_CEIL (1ull << 16) /* regret: past MULT_MAX, x2 per regret up to this (decay 10 s: 7.6 days) */
#endif
#ifndef VS_DECAY_REGRET_STEP
#define VS_DECAY_REGRET_STEP 64         /* regret: the window's factor per regretted release (64: straight to the cap) */
#endif
/* Do not change: the slab is also the page map's page, aligned to its size. */
#define VS_SLAB_SIZE (2ull << 20)
#define VS_SLAB_SHIFT 21

/* ---- Physical handles (VMM) ---------------------------------------------- */
typedef struct vs_handle {
  uint64_t id, size, va;   /* va valid when mapped */
  int mapped, used;        /* used: slot in use */
  uint32_t pnext;          /* pool list (index + 1) */
} vs_handle;

/* A heap region: a chunk (chunks mode) or a VA reservation (VMM). */
typedef struct vs_hregion {
  vs_tregion tr;
  int dedicated;           /* chunks mode: made for one large request */
  int cls;                 /* which tlsf of the heap */
  uint32_t *gmap;          /* VMM: per granule, handle index + 1, 0 = unmapped */
  uint64_t ngran, hiwater; /* VMM: granules; 1 + highest mapped granule ever */
} vs_hregion;

/* The most empty slabs the view reads (arena_stats.c, empty_slabs): an
 * empty slab stays in its bin only as its current or spare one, so at most
 * two per bin; slabs holding only pending slots count too, and past this
 * many are left out. */
#define VS_EMPTY_SLABS_MAX (2 * VS_ARENA_MAX_CLASSES * VS_NBINS_ALL)

/* One of the view's answers (arena_stats.c: vs_arena_one_piece,
 * vs_arena_reclaimable) and what its walk read: the TLSFs' gens (free
 * lists, regions, blocks taken and released), the heap's map_gen (handles
 * mapped and unmapped), pend_gen (blocks made PENDING), the pool's bytes
 * (a handle leaves the pool unmapped without a map_gen move; one enters it
 * only by an unmap), the room asked and the empty slabs (all of those the
 * view reads, so no workload falls back to a walk per call). The walk is a
 * function of those alone, so while they stay the answer does: a program
 * asking cuMemGetInfo in a loop pays one walk, not one per call. */
typedef struct vs_view_kept {
  int valid;
  uint64_t tgen[VS_HEAP_NT], mgen, pgen, pool_bytes, room, answer;
  uint32_t nempty;
  uint64_t empty[VS_EMPTY_SLABS_MAX];
  /* The same answer for the look without a lock (arena_stats.c,
   * kept_fast): it stands while the arena's view_fresh keeps this answer's
   * bit, which its walk set before reading and every change since has
   * cleared (vs_heap_take, vs_bin_take). ver: odd while one walk keeps an
   * answer (no other keeps meanwhile), 0 before the first. */
  _Atomic uint32_t ver;
  _Atomic uint64_t f_room, f_answer;
} vs_view_kept;

/* Medium and large allocations: TLSF over the regions, one lock. */
typedef struct vs_heap {
  vs_lock mu;
  int viewed;                       /* a view's walk read the heap since its last change (under mu) */
  vs_tlsf t[VS_HEAP_NT];            /* [0] also holds the slabs; [VS_HEAP_SMALL]: see above */
  int vmm;
  uint64_t G;
  unsigned gshift;                  /* log2(G): granule of an offset without a division */
  vs_handle *h;
  uint32_t nh, caph, hfree;         /* hfree: free slot list (index + 1) */
  uint32_t pool;                    /* unmapped handles (index + 1) */
  uint64_t pool_bytes, mapped_bytes, chunk_bytes;
  vs_tblock *pend_head, *pend_tail; /* FIFO through fnext; their bytes: the arena's pend_total */
  /* A user block freed in stream order, not yet given to its TLSF (heap.c,
   * take_parked): LIVE with req 0, its bytes neither live nor pending. A
   * heap request of exactly its size may take it back; whatever else
   * places, frees, trims or reports the heap's blocks frees it first
   * (vs_heap_lock, vs_heap_reclaim, vs_heap_free). Lookups take it for the
   * freed memory it is; vs_arena_check sees it as it is. NULL: none. */
  vs_tblock *parked;
  /* The last "yes" of take_parked's placement test (vs_tlsf_find_would_take)
   * and what it read: the block and size asked, its TLSF's gen and the
   * heap's map_gen then. A parked block taken back and parked again
   * changes neither, so a loop of one size asks the TLSF once. */
  struct {
    const vs_tblock *b;
    uint64_t size, tgen, mgen;
  } parked_yes;
  uint64_t map_gen;                 /* moves with every handle mapped or unmapped (VMM: what vmm_fuller reads) */
  uint64_t pend_gen;                /* moves with every block made PENDING (vs_view_kept) */
  uint64_t live_req, live_count, waste;   /* user blocks only (not slabs) */
  _Atomic int pressure;             /* set by the OOM ladder or a nearly full card (heap.c): smaller
                                     * handles, no steps, no rent (core.c reads it), moves */
  int freed;                        /* VMM: a user block was freed since the last growth (else a climb) */
  uint64_t steal_want, trim_want, trim_done;   /* free_handles() callbacks' state (under mu) */
  uint64_t requests;                /* user allocations served by the heap */
  uint64_t req_max;                 /* the largest user block the heap has made (pressure_from_room) */
  uint64_t slabs;                   /* slab blocks the heap has handed out and not had back */
  uint64_t trim_floor;              /* cached bytes left by the last threshold trim */
  /* Decay: the heap's in-use high (live + pending bytes) per epoch of
   * decay / VS_DECAY_EPOCHS (epoch e = now / that), a ring indexed by e
   * modulo its size, dk_id = e + 1 (0: empty). The ring holds the current
   * epoch and VS_DECAY_EPOCHS whole ones before it: a use counts for at
   * least the window (up to an epoch more), never less. dk_cur: the high of the
   * newest epoch recorded; an allocation reads the clock only above it.
   * dk_next: when the window is next looked at without the cache growing. */
  uint64_t dk_max[VS_DECAY_RING], dk_id[VS_DECAY_RING], dk_cur, dk_epoch, dk_next;
  uint64_t dk_seen;                 /* the decay clock at its last reading (decay_now) */
  uint64_t dk_res[VS_DECAY_RING]; /* per epoch: the most held right after a growth (decay_note_reserved) */
  uint64_t dk_carry, dk_carry_use;  /* the last growth's reserved level and the window's use high then (decay_keep) */
  /* Regret (decay_regret): the window is decay × dk_mult; dk_rel: bytes
   * decay released since the last growth. */
  uint64_t dk_mult, dk_rel;
  uint64_t idle_req, idle_since;    /* vs_heap_trim_decayed: `requests` when it last changed, and when */
  uint64_t use_since;               /* decay: highest heap use since decay_keep last looked (no clock read) */
} vs_heap;

/* v rounded up to a multiple of a. */
static inline uint64_t up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
/* The heap region of a tlsf region (its first member). */
static inline vs_hregion *hr(vs_tregion *r) { return (vs_hregion *)r; }
/* Index in r's granule map of the granule holding va (G is a power of two). */
static inline uint64_t gran(const vs_heap *h, const vs_tregion *r, uint64_t va) { return (va - r->base) >> h->gshift; }

/* ---- Small objects ------------------------------------------------------ */
/* Cache-line aligned: two threads' slabs must not share a line (their
 * counters and bitmaps pointers are written on every allocation). */
typedef struct vs_slab {
  _Alignas(64) uint64_t base; /* VS_SLAB_SIZE aligned */
  const vs_tregion *region; /* the heap region it lies in: slabs rank as the heap's places do */
  struct vs_bin *bin;
  uint32_t cls, nslots, nfree, nlive, npend;
  uint64_t pend_stamp;      /* newest stamp among pending slots */
  struct vs_slab *next, *prev;        /* bin's slab list */
  struct vs_slab *pnext;              /* bin's list of slabs with pending slots; spare list */
  struct vs_slab *all;                /* every descriptor, for destroy */
  int on_pend;
  uint64_t *free_bm, *live_bm, *pend_bm;
  uint32_t *req;            /* requested size per slot */
  uint32_t words;
} vs_slab;

/* Each bin on its own cache lines (a thread keeps to one bin per class):
 * the bin's lock and counters, written on every allocation, must not share
 * a line with another thread's bin or with the class size everyone reads. */
typedef struct vs_bin {
  _Alignas(64) vs_lock own;
  vs_lock *mu;              /* &own, or the arena's off_mu for an off-lane bin */
  int off_lane;             /* the class's off-lane bin: a free there always pends */
  uint32_t cls;
  vs_slab *slabs;           /* every slab of the bin */
  vs_slab *cur;             /* slab allocations come from */
  vs_slab *spare;           /* one empty slab kept besides cur, against churn */
  vs_slab *pend;            /* slabs with pending slots */
  uint64_t nslabs, live_req, waste, pend_bytes, requests;   /* live slots: the slabs' nlive */
  int64_t live_delta;       /* live bytes not yet folded into the arena's total */
  int viewed;               /* a view's walk read the bin since its last change (under mu) */
  char pad[64];
} vs_bin;

typedef struct vs_class {
  uint64_t size;
  /* VMM: requests served by the heap before the class took slabs
   * (vs_arena's dispatch, arena.c); written until it reaches the
   * threshold, read only after. */
  _Atomic uint64_t heap_reqs;
  vs_bin bins[VS_NBINS_ALL];
} vs_class;

/* Page map: slab lookup by address without a lock. Two levels over 48-bit
 * addresses in VS_SLAB_SIZE pages; leaves are never freed before destroy. */
#define VS_PM_TOP_BITS 13
#define VS_PM_LEAF_BITS (48 - VS_SLAB_SHIFT - VS_PM_TOP_BITS)
typedef struct { _Atomic(vs_slab *) e[1u << VS_PM_LEAF_BITS]; } vs_pm_leaf;

struct vs_arena {
  vs_arena_config cfg;
  vs_arena_backend be;
  vs_heap heap;
  uint32_t nclasses;
  vs_class classes[VS_ARENA_MAX_CLASSES];
  _Atomic(vs_pm_leaf *) pm[1u << VS_PM_TOP_BITS];
  pthread_mutex_t slab_mu;          /* slab descriptor pool */
  vs_lock off_mu;                   /* every off-lane bin's (VS_BIN_OFF_LANE) */
  vs_slab *spare_slabs;
  vs_slab *all_slabs;               /* every descriptor ever made (freed at destroy) */
  /* Bit c * VS_NBINS_ALL + k: bin k of class c has a slab. Written under
   * that bin's lock when its count leaves or reaches 0; read without locks
   * by the walks over every bin (the view's empty slabs, trims), which
   * lock only the bins it names. A slab added after the reading is one
   * such a walk could have missed anyway: it visits bins one at a time. */
  _Atomic uint64_t bins_in_use[(VS_ARENA_MAX_CLASSES * VS_NBINS_ALL + 63) / 64];
  /* Bit w: a->kept[w]'s answer stands (vs_view_kept). Its own line: read
   * by each view without a lock, written only by a view's walk and by the
   * first change after one. */
  _Alignas(64) _Atomic uint32_t view_fresh;
  /* Shared counters, each on its own line; none is written on the small
   * hot path (bins keep their own and fold live bytes in by the MiB). */
  _Alignas(64) _Atomic uint64_t sync_started;
  _Alignas(64) _Atomic uint64_t sync_done;
  _Atomic uint64_t stamped;         /* the newest stamp a free got (vs_arena_stamp) */
  /* Syncs and releases past their hold check and not yet back
   * (vs_arena_unsafe_enter): what vs_arena_fence waits out before a
   * capture begins. */
  _Atomic uint32_t unsafe_calls;
  _Alignas(64) _Atomic uint64_t backend_calls;
  _Atomic uint64_t syncs, unserved, refused, peak_reserved;
  /* Syncs made in place of a growth since the heap last grew (ski rental:
   * vs_arena_sync_or_grow). Reset by every growth. */
  _Atomic uint32_t rent;
  _Atomic uint64_t rent_since;      /* the decay clock at the first of them */
  /* The largest size be.could_fit approved: a request no larger is not
   * asked again (the question reads the tenant's ledger). A stale answer
   * (a limit lowered since) costs only what the check saves: the request
   * goes through the OOM ladder and is refused there by the charge. */
  _Atomic uint64_t fit_ok;
  /* Live requested bytes = heap_live + slab_live. heap_live is a copy of
   * heap.live_req stored under the heap's lock (a plain store: the heap
   * pair takes no locked instruction for it); slab_live is what the bins
   * folded (VS_LIVE_FOLD), added atomically since bins have their own
   * locks. peak_live is raised with the sum read at each change: exact on
   * one thread; two threads changing the two halves at once may each read
   * the other's previous half, so it can miss a peak they made together. */
  _Alignas(64) _Atomic uint64_t heap_live;
  _Atomic uint64_t slab_live;
  _Atomic uint64_t peak_live;
  _Alignas(64) _Atomic uint64_t pend_total;   /* heap pending bytes (slabs keep theirs per bin) */
  _Atomic uint32_t next_bin;
  /* Stream order (vs_arena_set_stream_ordered): frees are reusable at once.
   * Read by every free, written once or twice in the arena's life. */
  _Alignas(64) _Atomic int ordered;
  /* The lane (vs_arena_free_lane): 1 + the newest stamp a lane free took
   * out of stream order, 0 before the first. Raised before the block turns
   * FREE, so an allocation off the lane that chose it reads the raise. */
  _Atomic uint64_t lane_pend;
  /* Lane frees so far (raised with lane_pend, before the block turns FREE):
   * lane_pend's stamps repeat between syncs, this count does not. */
  _Atomic uint64_t lane_frees;
  _Atomic uint64_t tick_stamp;      /* `stamped` at the last vs_arena_decay (idle: unchanged since), or VS_TICK_NEVER */
  /* Streams already ordered after the lane (vs_arena_alloc_on), each with
   * the lane_frees count its order covered; a few, replaced round-robin. */
  pthread_mutex_t lane_mu;
  struct { uint64_t stream, covered; } lane_waits[VS_LANE_WAITS];
  unsigned lane_next;
  _Atomic uint64_t decay_ns;        /* 0: release beyond the threshold at once (core.c reads it unlocked) */
  uint64_t (*ladder_trim)(vs_arena *a);  /* the OOM ladder's "empty slabs back" (slab.c's, set by arena.c) */
  uint64_t (*idle_trim)(vs_arena *a);    /* before a growth: empty slabs of idle bins back (slab.c's, set by arena.c) */
  uint64_t (*clock)(void *ctx);     /* NULL: CLOCK_MONOTONIC */
  void *clock_ctx;
  /* vs_arena_one_piece's [0] and vs_arena_reclaimable's [1] kept answers,
   * under heap.mu; NULL (out of host memory at creation): every view walks.
   * Their own allocation: 12 KiB in the arena's struct, in the heap or at
   * its end, made the slab pair 4-7 % slower with no instruction more (the
   * arena's size moves where the allocator places it). */
  vs_view_kept *kept;
  _Atomic uint32_t *watch;          /* cleared with view_fresh (vs_arena_set_watch) */
};

/* core.c (below slab.c and heap.c; uses neither) */
/* *v = max(*v, to), atomically: peaks and generations only ever rise. */
static inline void vs_atomic_raise(_Atomic uint64_t *v, uint64_t to) {
  uint64_t cur = atomic_load(v);
  while (to > cur && !atomic_compare_exchange_weak(v, &cur, to)) {}
}
/* initial-exec: the hot path reads it without __tls_get_addr (the library is preloaded or linked, never dlopened late) */
extern _Thread_local uint64_t vs_tl_calls __attribute__((tls_model("initial-exec")));    /* backend calls made by this thread */
int vs_arena_call_done(vs_arena *a);          /* counts one backend call */
uint64_t vs_arena_now(vs_arena *a);           /* the decay clock, ns */
int vs_arena_sync(vs_arena *a);               /* one sync; pending up to now becomes reusable (1: a backend call was made) */
/* The backend's hold (arena_types.h): no sync, no ordering, no release now. */
static inline int vs_arena_held(const vs_arena *a) { return a->be.hold && a->be.hold(a->be.ctx); }

/* The driver calls a graph capture forbids (a sync; a cuMemFree, cuMemUnmap
 * or cuMemRelease giving memory back) are made between
 * vs_arena_unsafe_enter, which answers 0 while held (make none), and
 * vs_arena_unsafe_leave. Counted in flight before the hold is read, both
 * sequentially consistent as the capture's count is (arena_backend.c): a
 * capture about to begin either finds these calls counted and waits for
 * them (vs_arena_fence), or is seen here. */
static inline int vs_arena_unsafe_enter(vs_arena *a) {
  atomic_fetch_add(&a->unsafe_calls, 1);
  if (!vs_arena_held(a)) return 1;
  atomic_fetch_sub(&a->unsafe_calls, 1);
  return 0;
}
static inline void vs_arena_unsafe_leave(vs_arena *a) { atomic_fetch_sub(&a->unsafe_calls, 1); }
int vs_arena_sync_or_grow(vs_arena *a, uint64_t grow); /* a sync a growth of `grow` bytes could replace: 1 synced, 0 grow */
uint64_t vs_arena_stamp(vs_arena *a);
int vs_arena_ready(vs_arena *a, uint64_t stamp);
void vs_arena_slab_live_add(vs_arena *a, int64_t folded); /* a bin's fold (either sign) */
void vs_arena_heap_live_set(vs_arena *a, uint64_t live);  /* under the heap lock: heap.live_req */
uint64_t vs_arena_live(vs_arena *a);                      /* live requested bytes, folded slabs */

/* heap.c */
int vs_heap_init(vs_arena *a);
void vs_heap_fini(vs_arena *a);
/* size: multiple of 512; req: requested bytes (0 for a slab). align: 512 or VS_SLAB_SIZE. */
uint64_t vs_heap_growth_bytes(vs_arena *a, uint64_t need);   /* the ski rental's estimate of a growth's bytes */
int vs_heap_alloc(vs_arena *a, uint64_t size, uint64_t req, uint64_t align, uint64_t *addr);
/* held_only: VS_BACKEND_OOM rather than grow or sync. *region (may be
 * NULL): the region the block lies in (vs_tregion_before), valid while it lives. */
int vs_heap_alloc_mode(vs_arena *a, uint64_t size, uint64_t req, uint64_t align, int held_only, uint64_t *addr,
                       const vs_tregion **region);
/* A small block (<= VS_SMALL_MAX) of a class without slabs: VMM, its own region (VS_HEAP_SMALL). */
int vs_heap_alloc_small(vs_arena *a, uint64_t size, uint64_t req, uint64_t *addr);
/* how: VS_FREE_PEND (a user block becomes PENDING), VS_FREE_ORDERED (a user
 * block freed in stream order: FREE at once), VS_FREE_INTERNAL (a slab's
 * block, FREE at once). -1 when not a live block of that kind. */
enum { VS_FREE_PEND = 0, VS_FREE_INTERNAL = 1, VS_FREE_ORDERED = 2 };
int vs_heap_free(vs_arena *a, uint64_t addr, int how);
uint64_t vs_heap_trim(vs_arena *a, uint64_t keep);          /* caller holds no heap lock */
/* VMM: fn on every mapped handle's range, under the heap lock (no new
 * mapping meanwhile); fn must not call the arena. */
void vs_heap_mappings(vs_arena *a, void (*fn)(void *user, uint64_t va, uint64_t size), void *user);
uint64_t vs_heap_trim_decayed(vs_arena *a);                 /* beyond what decay keeps; no heap lock held */
uint64_t vs_heap_reserved(vs_heap *h);                      /* caller holds mu */
uint64_t vs_heap_cached(vs_heap *h);                        /* caller holds mu */
/* Caller holds mu: the parked block freed, and pending blocks whose work is done. */
void vs_heap_reclaim(vs_arena *a);
/* Takes mu and frees the parked block: how the stats, the walks (the
 * view's among them), the decay tick and the VMM mapping list begin (the
 * allocation, free and trim paths free it themselves). These read: the
 * kept view answers stand (vs_view_stale). Freeing the parked block
 * changes the heap's blocks but not what the view answers: a block is
 * parked by a free, a take for a change, and the view keeps no answer
 * while one is parked (it frees it first). */
void vs_heap_lock(vs_arena *a);

/* Every take of the heap's or a bin's lock for a change comes through
 * these (readings -- the view's walks, stats, lookups, checks -- take the
 * lock plainly). The first change after a view's walk read the structure
 * clears the arena's view_fresh: the kept answers (vs_view_kept) no longer
 * stand. Without a view since, one plain load of the holder's own line.
 *
 * Why that suffices: a view sets its bit before its walk and marks each
 * structure viewed under that structure's lock. A change that comes after
 * the walk's visit finds the mark and clears the bit, later than it was
 * set; one that comes before is in what the walk read. A clear is a
 * read-modify-write, so that a view's setting of its bit reads every
 * earlier clear in one release sequence (what the bins-in-use bitmap's
 * clear relies on: slab.c, mark_in_use). */
static inline void vs_view_stale(vs_arena *a) {
  atomic_fetch_and_explicit(&a->view_fresh, 0, memory_order_acq_rel);
  if (a->watch) atomic_fetch_and_explicit(a->watch, 0, memory_order_acq_rel);
}
static inline void vs_heap_take(vs_arena *a) {
  vs_lock_take(&a->heap.mu);
  if (a->heap.viewed) a->heap.viewed = 0, vs_view_stale(a);
}
/* Caller holds bin->mu, taken for a change (vs_bin_take, or a try-lock). */
static inline void vs_bin_changing(vs_arena *a, vs_bin *bin) {
  if (bin->viewed) bin->viewed = 0, vs_view_stale(a);
}
static inline void vs_bin_take(vs_arena *a, vs_bin *bin) {
  vs_lock_take(bin->mu);
  vs_bin_changing(a, bin);
}
/* Caller holds mu; after the OOM ladder's sync and slab trim. At least the
 * largest request its retry could place with room bytes from the backend
 * and what its trim would release (VMM; UINT64_MAX in chunks mode). */
uint64_t vs_heap_ladder_piece(vs_heap *h, uint64_t room);
int vs_heap_check(vs_arena *a, char *err, size_t len);      /* caller holds mu */
int vs_heap_mapped(vs_heap *h, vs_hregion *r, uint64_t addr, uint64_t size);
vs_tblock *vs_heap_used(vs_heap *h, uint64_t addr);           /* caller holds mu */
vs_hregion *vs_heap_region_of(vs_heap *h, uint64_t addr);     /* the region holding addr, or NULL; caller holds mu */
#define VS_HEAP_REGIONS(h, tr) \
  for (int k_ = 0; k_ < VS_HEAP_NT; k_++) for (vs_tregion *tr = (h)->t[k_].regions; tr; tr = tr->rnext)

/* slab.c */
void vs_slab_classes(vs_arena *a);
int vs_slab_class_of(vs_arena *a, uint64_t size);
/* VS_BACKEND_OOM: no room for a slab. off_lane: from the class's off-lane
 * bin; *fresh is then 1 when the slot lies in a slab new to the bin (heap
 * memory a lane free may have left with work in flight). */
int vs_slab_alloc(vs_arena *a, int cls, uint64_t req, uint64_t *addr, int off_lane, int *fresh);
int vs_slab_free(vs_arena *a, uint64_t addr, int ordered);   /* -1 not a slab slot, 1 not a slab */
int vs_slab_lookup(vs_arena *a, uint64_t addr, uint64_t *start, uint64_t *size);  /* 0, -1, 1 */
vs_slab *vs_pm_get(vs_arena *a, uint64_t addr);
void vs_slab_fini(vs_arena *a);
/* The next bin at or after index *i (c * VS_NBINS_ALL + k) that has a slab
 * (bins_in_use), NULL past the last; *i is set to its index. */
vs_bin *vs_slab_next_bin_in_use(vs_arena *a, uint32_t *i);
uint64_t vs_slab_trim(vs_arena *a);                        /* empty slabs back to the heap */
uint64_t vs_slab_trim_idle(vs_arena *a);                   /* try-locks only: safe under a bin lock */
uint64_t vs_slab_pending(vs_arena *a);                     /* bytes of pending slots */

#endif

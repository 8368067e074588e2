/* The arena: serves device allocations from memory it holds, to cut driver
 * calls and fragmentation. One arena per card.
 *
 * It knows nothing of CUDA symbols or tenants: it asks a backend
 * (vs_arena_backend) for device memory. The shim implements the backend
 * over the real driver table (charging the tenant ledger as it grows); the
 * replay tool and the unit tests implement it over a simulated address
 * space (space_backend.h). A backend call that returns VS_BACKEND_OOM is a
 * refusal (driver or quota): the arena then releases everything it caches
 * and retries once before failing (the OOM ladder).
 *
 * Thread safety: every function may be called from any thread at once.
 *
 * This header is the contract between the arena and its users; keep it
 * readable top to bottom. */
#ifndef VS_ARENA_H
#define VS_ARENA_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "arena_types.h"

vs_arena *vs_arena_create(const vs_arena_config *cfg, const vs_arena_backend *backend);

/* Decay (jemalloc's model): cached memory beyond release_threshold goes
 * back to the backend only once it has not been needed for decay_ms: the
 * most the heap held in use (live and pending) over the last decay_ms,
 * less what it holds in use now, stays cached. So a workload that swings
 * between a low and a high keeps what its highs need, and a burst followed
 * by a lull gives the burst back decay_ms later (at the arena's next call,
 * or at the next vs_arena_decay: the arena has no thread of its own).
 * Default VS_ARENA_DECAY_DEFAULT_MS;
 * VS_ARENA_DECAY_NONE releases beyond release_threshold at once (the rule
 * before decay). vs_arena_trim and the OOM ladder release at once anyway. */
#define VS_ARENA_DECAY_DEFAULT_MS 10000ull
#define VS_ARENA_DECAY_NONE 0ull
void vs_arena_set_decay(vs_arena *a, uint64_t decay_ms);
/* The decay's tick from outside the arena's calls (issue 23: the shim's
 * background thread, so an idle process gives its cache back too). Does
 * nothing while the arena holds at most release_threshold beyond its live
 * bytes (its placement stays its callers' alone); else empty slabs of idle
 * bins go to the heap, and what decay no longer keeps goes
 * back to the backend. Pending frees are settled only when the arena made
 * no free since the previous tick (then a sync costs nothing: it is idle).
 * Returns bytes released. */
uint64_t vs_arena_decay(vs_arena *a);
/* The clock decay runs on, in nanoseconds (NULL: CLOCK_MONOTONIC). The
 * replay passes the trace's Time column. Set before the first allocation. */
void vs_arena_set_clock(vs_arena *a, uint64_t (*now_ns)(void *ctx), void *ctx);
void vs_arena_destroy(vs_arena *a);   /* returns every byte to the backend */

/* Stream order. Off (the default), a freed block waits for a sync that
 * began after its free (backend->sync) before it is handed out again: the
 * arena cannot know which stream still reads it. On, the caller vouches
 * that all device work using the arena's memory is ordered after every
 * earlier free: a program that uses only the legacy default stream of a
 * single context (the CUDA driver API serialises all work there, "Stream
 * synchronization behavior"), so the next use of a reused block runs after
 * the last use of its previous owner. Then a free is reusable at once, as
 * in PyTorch's allocator on one stream, and the arena never syncs for
 * stream safety. Turning it off (a non-legacy stream was created, a
 * per-thread default stream is in use, a second context appeared) syncs
 * once, so what was freed in order is idle before any other stream can
 * see it. Blocks that were pending when it is turned on stay pending
 * until their sync. */
void vs_arena_set_stream_ordered(vs_arena *a, int on);
int vs_arena_stream_ordered(vs_arena *a);

/* The program's own synchronisations. Out of stream order a freed block
 * waits for a sync begun after its free; a sync the program makes itself
 * does as well as the backend's, if the caller can vouch for it. Before
 * the program's sync is forwarded, take a ticket (every block freed before
 * this call has a smaller stamp; 0 for a NULL arena); once the caller
 * knows that all device work that could use the arena's memory and was
 * enqueued before the ticket was taken has finished, vs_arena_synced_to
 * makes every block freed before it reusable, with no backend call. The
 * caller vouches for every stream that could touch the memory (the shim:
 * a context-wide sync, or the oldest ticket over all its streams'
 * syncs). Tickets may be marked in any order, more than once, or never;
 * 0 and tickets never handed out do nothing beyond the newest one taken.
 * A backend sync that could make nothing reusable (every pending block
 * is already marked) is then not made. */
uint64_t vs_arena_sync_ticket(vs_arena *a);
void vs_arena_synced_to(vs_arena *a, uint64_t ticket);

/* Memory outside the arena that the device may still be using when it is
 * freed (the shim's spilled host blocks, kept for reuse) waits as a
 * pending block does: a stamp at its free, and vs_arena_hold_settled says, by
 * the same syncs (the arena's, or the program's through
 * vs_arena_synced_to), whether the device is done with it, making one sync
 * where none has come since (none while the backend holds: 0 then). */
uint64_t vs_arena_hold_stamp(vs_arena *a);
int vs_arena_hold_settled(vs_arena *a, uint64_t stamp);

/* The lane: stream-ordered allocation on one stream (the shim's lane is the
 * legacy default stream of the arena's context, named in cuMemAllocAsync /
 * cuMemFreeAsync). Out of stream order, a lane free is reusable at once by
 * a lane allocation, with no sync: the caller vouches for the contract of
 * CUDA's stream-ordered allocator, i.e. every use of the block is ordered
 * before its free on the lane, and every use of a lane allocation after
 * the allocation on the lane (a use on another stream waits for an event
 * recorded on the lane after it). An allocation off the lane
 * (vs_arena_alloc: it may be used on any stream at once) is handed out only
 * when every earlier lane free is behind a sync: the program's own
 * (vs_arena_synced_to) or, if none covers them, one the arena makes after
 * choosing the block. A block freed off the lane (vs_arena_free) stays
 * pending as above, whichever way it was allocated. In stream order the
 * whole program is one lane: these are vs_arena_alloc and vs_arena_free. */
int vs_arena_alloc_lane(vs_arena *a, uint64_t size, uint64_t *addr);
int vs_arena_free_lane(vs_arena *a, uint64_t addr);
/* An allocation off the lane whose every use is ordered after it on
 * `stream` (not the lane; nonzero), as cuMemAllocAsync promises: where
 * vs_arena_alloc would sync for the lane's frees, the backend orders the
 * stream after the lane instead (order_after_lane; once per stream until
 * the next lane free), and only without one the arena syncs. */
int vs_arena_alloc_on(vs_arena *a, uint64_t size, uint64_t stream, uint64_t *addr);
/* `stream` names a new stream (its handle may be an old one's): it has
 * waited for nothing yet. */
void vs_arena_forget_stream(vs_arena *a, uint64_t stream);

/* ---- Allocation --------------------------------------------------------- */
/* 0, VS_BACKEND_OOM (after the OOM ladder), or VS_BACKEND_ERROR. Every
 * pointer is at least 512-byte aligned. size 0 is refused with ERROR. */
int vs_arena_alloc(vs_arena *a, uint64_t size, uint64_t *addr);
/* 0, or -1 when addr is not a live allocation of this arena (nothing changes). */
int vs_arena_free(vs_arena *a, uint64_t addr);
/* vs_arena_free (lane 0) or vs_arena_free_lane (lane 1) of a block its
 * caller knows the requested size of (as allocated): a size above the slab
 * classes' looks in the heap only, not first in the slabs' page map. */
int vs_arena_free_sized(vs_arena *a, uint64_t addr, uint64_t size, int lane);
/* Any address inside a live allocation: its own start and requested size.
 * 0 found, -1 not an arena allocation. */
int vs_arena_lookup(vs_arena *a, uint64_t addr, uint64_t *start, uint64_t *size);
/* Where a live allocation sits in backend memory: the chunk (or VMM range)
 * base and the allocation's offset in it, and whether it is VMM-backed
 * (then vs_arena_vmm_pieces says which physical memory lies under it). */
int vs_arena_placement(vs_arena *a, uint64_t addr, uint64_t *chunk_base, uint64_t *offset, int *vmm_backed);
/* VMM: the physical memory under the granules that [addr, addr+size) (inside
 * one live allocation) touches, in address order: fn gets each run of
 * granules on one backend handle (its VA, length, the handle, the run's
 * offset in it and the handle's size). While the allocation stays live
 * these never change (only a handle wholly in free space is moved or
 * released). fn runs under the
 * heap's lock: it must not call the arena. 0, or -1 when addr is not a live
 * allocation of a VMM arena or the range leaves it. */
typedef void (*vs_arena_piece_fn)(void *user, uint64_t va, uint64_t len, uint64_t handle, uint64_t handle_offset,
                                  uint64_t handle_size);
int vs_arena_vmm_pieces(vs_arena *a, uint64_t addr, uint64_t size, vs_arena_piece_fn fn, void *user);
/* Releases cached free memory down to keep_bytes (0 = everything). Returns bytes released. */
uint64_t vs_arena_trim(vs_arena *a, uint64_t keep_bytes);
/* VMM mode: fn on every range the arena has mapped now (va, size), each
 * one mapping of one physical handle, under the heap's lock: no mapping is
 * made or undone meanwhile, and fn must not call the arena. Chunks mode:
 * nothing. (The shim opens them to a peer device: arena_backend.c.) */
void vs_arena_mappings(vs_arena *a, void (*fn)(void *user, uint64_t va, uint64_t size), void *user);
/* One sync when any freed block still waits for one (none otherwise):
 * afterwards every block freed so far is reusable. 1 when a sync was made. */
int vs_arena_settle(vs_arena *a);
/* With the backend's hold on (arena_types.h: a graph capture is about to
 * begin), waits until no sync or release that read the hold before it was
 * on is still on its way to the driver. Call without the arena's locks. */
void vs_arena_fence(vs_arena *a);

/* ---- Introspection ------------------------------------------------------ */
#define VS_ARENA_HIST_BUCKETS 48   /* free extents by floor(log2(size)) */
/* VS_ARENA_MAX_CLASSES: arena_types.h */

typedef struct vs_arena_stats {
  uint64_t live_bytes, live_count, peak_live_bytes;   /* requested sizes */
  uint64_t reserved_bytes, peak_reserved_bytes;       /* held from the backend */
  uint64_t internal_waste;      /* rounding: allocated block bytes - requested bytes */
  uint64_t free_bytes;          /* reserved, not live (includes pending) */
  uint64_t pending_bytes;       /* freed, waiting for a sync before reuse */
  uint64_t largest_free;        /* largest contiguous free extent that could serve one request */
  uint64_t hist_count[VS_ARENA_HIST_BUCKETS], hist_bytes[VS_ARENA_HIST_BUCKETS];
  uint64_t requests, served_from_cache;  /* allocations, and those with no backend call */
  uint64_t backend_calls;       /* every backend call that grows, shrinks, maps or syncs */
  uint64_t syncs;
  uint32_t class_count;         /* size classes in use by the small-object path */
  uint64_t class_size[VS_ARENA_MAX_CLASSES];
  uint64_t class_live[VS_ARENA_MAX_CLASSES];   /* live blocks of that class */
  uint64_t class_slots[VS_ARENA_MAX_CLASSES];  /* slots in its slabs */
} vs_arena_stats;

void vs_arena_get_stats(vs_arena *a, vs_arena_stats *out);

/* The largest single request the arena could serve now when its backend
 * may still grow by `room` bytes: from one free extent it holds, or from a
 * growth after its OOM ladder gave back what it can give (pending blocks
 * after a sync, empty slabs, then every wholly free chunk or handle). Free
 * memory inside a chunk or handle that a live block pins serves only
 * requests that fit in it. What cuMemGetInfo's view calls free: a program
 * allocates what it is told is free, in one piece (quota.c). */
uint64_t vs_arena_one_piece(vs_arena *a, uint64_t room);
/* What vs_arena_trim(a, 0) (or the OOM ladder) would give back now: every
 * chunk or handle no live block pins once pending blocks are synced and
 * empty slabs returned. */
uint64_t vs_arena_reclaimable(vs_arena *a);
/* A word of the caller's that the arena clears (an atomic read-modify-
 * write) wherever its own kept answers stop standing: the first change
 * after a view's walk (core.h, vs_view_stale). What lets a caller keep an
 * answer built on vs_arena_one_piece without asking the arena each time
 * (the shim's view of a card). Set before the arena is shared; NULL: none. */
void vs_arena_set_watch(vs_arena *a, _Atomic uint32_t *word);

/* Memory map walk, for dumps: each region (slab, TLSF chunk, VMM range,
 * dedicated chunk) then its blocks in address order. */
typedef enum { VS_REGION_SLAB = 1, VS_REGION_CHUNK, VS_REGION_VMM_RANGE, VS_REGION_DEDICATED } vs_region_kind;
typedef enum { VS_BLOCK_FREE = 0, VS_BLOCK_LIVE = 1, VS_BLOCK_PENDING = 2 } vs_block_state;
typedef struct vs_region_info { uint64_t base, size; vs_region_kind kind; uint64_t class_size; } vs_region_info;
typedef struct vs_block_info { uint64_t offset, size; vs_block_state state; } vs_block_info;
typedef struct vs_arena_walker {
  void *user;
  void (*region)(void *user, const vs_region_info *r);
  void (*block)(void *user, const vs_region_info *r, const vs_block_info *b);
} vs_arena_walker;
void vs_arena_walk(vs_arena *a, const vs_arena_walker *w);

/* Walks every structure and checks every invariant. 0 when all hold;
 * otherwise -1 with the first broken invariant described in err. */
int vs_arena_check(vs_arena *a, char *err, size_t errlen);

#endif

/* The arena inside the shim: one vs_arena per context (src/arena/arena.h,
 * contexts.h), created on the context's first cuMemAlloc with the mode the
 * settings choose for its card, over a backend that calls the real driver
 * table (under the recursion guard) and charges the tenant quota (quota.h)
 * for every byte it takes from the driver. When the context ends its arena
 * goes with it (vs_arena_glue_ctx_end): nothing of it is handed out again. */
#ifndef VS_ARENA_GLUE_H
#define VS_ARENA_GLUE_H

#include "arena.h"
#include "contexts.h"
#include "cuda_api.h"

#include <stdint.h>

/* Serves a cuMemAlloc of size bytes (> 0) in ctx (the caller's current
 * context, referenced) from its arena; lane 1: a cuMemAllocAsync on ctx's
 * legacy stream (the arena's lane, arena.h); else stream != 0: a
 * cuMemAllocAsync on that stream of ctx (vs_arena_alloc_on). VS_MEM_DONE:
 * *res says how (CUDA_SUCCESS with *addr, or the refusal after the OOM
 * ladder); VS_MEM_PASS: the arena is off for this card. */
int vs_arena_glue_alloc(vs_ctx *ctx, uint64_t size, int lane, uint64_t stream, uint64_t *addr, CUresult *res);
/* A stream was just made: no arena may take its handle for one already
 * ordered after its lane. */
void vs_arena_glue_forget_stream(uint64_t stream);
/* Returns a block of ctx's arena, of `size` bytes as requested (its
 * record's); lane 1: a cuMemFreeAsync on ctx's legacy stream. 0 done, -1
 * not one of its blocks. */
int vs_arena_glue_free(vs_ctx *ctx, uint64_t addr, uint64_t size, int lane);
/* Gives every cached byte of ctx's arena back to the driver (one sync
 * first if blocks are pending). Called when another process waits. */
void vs_arena_glue_trim(vs_ctx *ctx);
/* Every arena of card's contexts down to keep_bytes cached each
 * (vs_arena_trim): the program trimmed the device's default pool, whose
 * stream-ordered blocks those arenas serve (pool_view.c). */
void vs_arena_glue_trim_card(int card, uint64_t keep_bytes);
/* Everything the arenas of ctx's card other than ctx's own cache, given
 * back (an arena's request refused: its ladder trimmed only itself).
 * Returns the bytes released. */
uint64_t vs_arena_glue_trim_others(vs_ctx *ctx);
/* The decay's tick on every arena (vs_arena_decay): the background thread
 * calls it, so an idle process's cache goes back to release_threshold
 * within the decay time (release_decay) too (issue 23). */
void vs_arena_glue_decay(void);
/* The program's cuCtxEnablePeerAccess (on) or cuCtxDisablePeerAccess (off)
 * from a context of `card` to context peer_ctx succeeded: the VMM arena
 * of peer_ctx opens its memory to card (arena_backend.h, vs_backend_peer),
 * now and when it begins later. */
void vs_arena_glue_peer_access(uint64_t peer_ctx, int card, int on);
/* The program gave device `to` access to card's default pool
 * (cuMemPoolSetAccess): every VMM arena on card opens its memory to `to`,
 * its stream-ordered blocks among it (arena_backend.h, vs_backend_peer).
 * 1 when a chunks arena on card could not (its blocks lie in cuMemAlloc
 * chunks, which only peer access opens). */
int vs_arena_glue_open_card(int card, int to);
/* Every arena syncs once if a freed block of it waits for a sync (before a
 * graph capture begins: during one the arenas may not sync). */
void vs_arena_glue_settle_all(void);
/* Every arena waits out the syncs and releases that read the hold before
 * it was on (vs_arena_fence): called once the hold is on, before the
 * driver begins a capture. */
void vs_arena_glue_fence_all(void);
/* ctx has ended (unlinked, no references): its arena is destroyed, its
 * chunks (which the driver freed with the context) only leave the books,
 * its VMM handles and ranges are released. */
void vs_arena_glue_ctx_end(vs_ctx *ctx);

/* An arena block's own range around ptr: VS_MEM_DONE or VS_MEM_PASS. */
int vs_arena_glue_range(uint64_t ptr, uint64_t *base, uint64_t *size);
/* The live arena block around ptr (any interior address): its card, the
 * context it was allocated in, its start and size. 0, or -1. */
int vs_arena_glue_find(uint64_t ptr, int *card, uint64_t *ctx_handle, uint64_t *base, uint64_t *size);
/* The arena block around ptr (any interior address): its card, start and
 * size, and where it sits in driver memory (vs_arena_placement). 0, or -1
 * when ptr is in no live arena block. */
int vs_arena_glue_placement(uint64_t ptr, int *card, uint64_t *base, uint64_t *size, uint64_t *chunk_base,
                            uint64_t *offset, int *vmm_backed);
/* 1 when addr lies in driver memory an arena holds (a chunk or a VMM
 * range), whether or not a live block is there: the driver must never be
 * asked to free it. */
int vs_arena_glue_holds(uint64_t addr);
/* VMM: the physical memory under [base, base+size) of a live arena block,
 * as vs_arena_vmm_pieces (src/arena/arena.h) of the arena holding it; -1
 * when no arena holds a block there. */
int vs_arena_glue_vmm_pieces(uint64_t base, uint64_t size, vs_arena_piece_fn fn, void *user);
/* Offers the layers below what they ask of the arenas (offer_once, else
 * done by the first arena's creation), at the shim's start: the view of
 * free memory rounds to the first arena's growth before it exists. */
void vs_arena_glue_offer(void);
/* The largest single allocation the arenas of card could serve with room
 * more bytes from the driver (vs_arena_one_piece of the current context's
 * arena, beside what the card's other arenas would give back; with no
 * context of the card current, the best of them): the tenant's view of
 * free memory. With no arena on the card yet, what the first one's
 * growth could take of room (room itself with the arena off). */
uint64_t vs_arena_glue_one_piece(int card, uint64_t room);
/* What trimming every arena on the card would give back now (the sum of
 * vs_arena_reclaimable over its contexts' arenas). */
uint64_t vs_arena_glue_reclaimable(int card);
/* 1 when cuMemAlloc on card is served by an arena (decided at its first
 * request; 0 before, and for arena = off). */
int vs_arena_glue_on(int card);

/* For the observer: between vs_arena_glue_read_lock and _unlock no arena
 * is destroyed; vs_arena_glue_get(card) is then the arena of card's
 * primary context if it has one (else of its newest context with an
 * arena), NULL when none, and vs_arena_glue_is_vmm(card) says whether
 * that one is a VMM arena. */
void vs_arena_glue_read_lock(void);
void vs_arena_glue_read_unlock(void);
vs_arena *vs_arena_glue_get(int card);
int vs_arena_glue_is_vmm(int card);

void vs_arena_glue_atfork_child(void);
/* Leaving stream order (stream_order.c): every arena syncs once and from
 * then on waits for a sync before reusing a freed block. */
void vs_arena_glue_leave_order(void);

#endif

/* The arena inside the shim: one vs_arena per card (src/arena/arena.h),
 * created on first use with the mode the settings choose, over a backend
 * that calls the real driver table (under the recursion guard) and charges
 * the tenant quota (quota.h) for every byte it takes from the driver. */
#ifndef VS_ARENA_GLUE_H
#define VS_ARENA_GLUE_H

#include "arena.h"
#include "cuda_api.h"

#include <stdint.h>

/* Serves a cuMemAlloc of size bytes on card from the arena.
 * VS_MEM_DONE: *res says how (CUDA_SUCCESS with *addr, or the refusal
 * after the OOM ladder); VS_MEM_PASS: the arena is off for this card. */
int vs_arena_glue_alloc(int card, uint64_t size, uint64_t *addr, CUresult *res);
/* Returns an arena block; 0 done, -1 not an arena block. */
int vs_arena_glue_free(int card, uint64_t addr);
/* An arena block's own range around ptr: VS_MEM_DONE or VS_MEM_PASS. */
int vs_arena_glue_range(uint64_t ptr, uint64_t *base, uint64_t *size);
/* The arena block around ptr (any interior address): its card, start and
 * size, and where it sits in driver memory (vs_arena_placement). 0, or -1
 * when ptr is in no live arena block. */
int vs_arena_glue_placement(uint64_t ptr, int *card, uint64_t *base, uint64_t *size, uint64_t *chunk_base,
                            uint64_t *offset, int *vmm_backed);
/* 1 when addr lies in driver memory an arena holds (a chunk or a VMM
 * range), whether or not a live block is there: the driver must never be
 * asked to free it. */
int vs_arena_glue_holds(uint64_t addr);
/* Free device bytes the arena holds on card (counted in the tenant's view). */
uint64_t vs_arena_glue_cached(int card);
/* Gives every cached byte of card back to the driver (one sync first if
 * blocks are pending). Called when another process waits for memory. */
void vs_arena_glue_trim(int card);
/* The arena of card, or NULL (off, or not created yet): one acquire load. */
vs_arena *vs_arena_glue_get(int card);
/* 1 when card's arena (vs_arena_glue_get) is a VMM one, 0 for chunks or
 * no arena. For dumps. */
int vs_arena_glue_is_vmm(int card);

void vs_arena_glue_atfork_child(void);
#endif

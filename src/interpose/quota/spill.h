/* Degraded mode `on_limit = spill:MAX` (issue 13; docs/config.md, "Spilling").
 *
 * When a cuMemAlloc is refused (by the tenant's admission rule or by the
 * driver, after the arena's OOM ladder gave its cache back), the memory
 * service asks here before failing. A tenant whose on_limit is spill gets
 * pinned host memory mapped into the device's address space
 * (cuMemHostAlloc with DEVICEMAP | PORTABLE, then
 * cuMemHostGetDevicePointer_v2): the program sees success, kernels reach
 * the memory over the bus, copies and memsets work. MAX caps the tenant's
 * spilled bytes on the card across all its processes (the ledger counts
 * them apart from device usage: they never count against the card).
 *
 * Spilled blocks are not in the tracker and not in the arena: this module
 * keeps them (device pointer -> host pointer, size, card), so every query
 * about them (pointer attributes, cuMemGetAddressRange) reaches the driver
 * unchanged, and answers what the driver answers for host memory, but the
 * range of a kept block served again, which is the request's (below). Live
 * spilled blocks are never moved; once device memory is free again, new
 * requests go back to the device by themselves (this is only asked after a
 * refusal).
 *
 * Runs under the recursion guard (inside a hook). Thread-safe. */
#ifndef VS_SPILL_H
#define VS_SPILL_H

#include "cuda_api.h"

#include <stdint.h>

/* After a refused request for size bytes on card, in the context the
 * shim knows by ctx_id (contexts.h; 0: none known) (by_driver: the driver
 * refused it, not the tenant's admission rule): 1 when it was served
 * from host memory (*addr the device pointer), 0 when not (the tenant does
 * not spill, MAX would be exceeded, or the host refused: the request fails
 * as with on_limit = fail; a line says why MAX stopped it). */
int vs_spill_alloc(int card, uint64_t ctx_id, uint64_t size, int by_driver, uint64_t *addr);

/* The free of addr (any cuMemFree variant): 1 when addr is a live spilled
 * block, which is then given back to the host (cuMemFreeHost) and its
 * bytes to the ledger (*res what the driver said), or kept for a later
 * spilled request of its size (below); 0 when it is not one. Costs one
 * relaxed load while this process has no spilled block.
 *
 * Kept blocks: a block whose context has an arena (which knows when the
 * device is done with memory freed now: vs_spill_settle) is kept (its
 * bytes leave the ledger's spilled bytes, and count again when it serves)
 * while the process's kept bytes on the card stay within its live spilled
 * bytes and, with them, within MAX; a spilled request in the same context
 * of its size or up to a fifth less takes it again once the device is done
 * with it (a sync made if none came since). Kept blocks go back to the
 * host when the process's last live spilled block on the card is freed
 * (the episode ends), when MAX would refuse a new spill, and with their
 * context. */
int vs_spill_free(uint64_t addr, CUresult *res);

/* What the arenas offer (arenas/arena_glue.c; they lie above, src/LAYERS):
 * stamp: when a spilled block of context ctx_id is freed, its stamp (0
 * returned: no arena for it, the block goes back to the host at once);
 * settled: whether the device is done with memory freed at that stamp,
 * a sync made if needed and allowed (1 yes, 0 not now). */
typedef struct vs_spill_settle {
  int (*stamp)(uint64_t ctx_id, uint64_t *stamp);
  int (*settled)(uint64_t ctx_id, uint64_t stamp);
} vs_spill_settle;
void vs_spill_set_settle(const vs_spill_settle *settle);

/* The context ctx_id ends (destroy, last primary release, reset): the
 * driver frees the host memory it allocated, so its spilled blocks leave
 * the table and give their bytes back to the ledger. Called before the
 * driver frees it, as for the tracker's records (memory_service.c). */
void vs_spill_ctx_end(uint64_t ctx_id);

/* Whether addr starts a live spilled block (*card, *size filled; may be NULL). */
int vs_spill_lookup(uint64_t addr, int *card, uint64_t *size);

/* A live spilled block served from a kept block larger than the request
 * (req < size): 1 when ptr lies in its host allocation, with *base its
 * start and *size what the program asked for (the range the program
 * sees, as the driver would give a block of that size; ptr may lie past
 * it). 0 for every other pointer; one relaxed load while no such block
 * lives. */
int vs_spill_range(uint64_t ptr, uint64_t *base, uint64_t *size);

/* The card's spilled figures (bytes, peak, blocks) for dumps and the
 * timeline are observe's (vs_observe_spill, src/explain/stats.h). */

void vs_spill_atfork_prepare(void);
void vs_spill_atfork_parent(void);
/* A fork child starts clean: the parent's spilled blocks are the parent's. */
void vs_spill_atfork_child(void);

#endif

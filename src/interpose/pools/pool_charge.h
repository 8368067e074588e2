/* What a driver memory pool holds on the card, charged to the tenant
 * (issue 22; docs/architecture.md, "Driver pools").
 *
 * A pool keeps freed blocks reserved on the card (its release threshold),
 * so charging its blocks from allocation to free would let a tenant hold
 * more than its limit. Instead each pool this process allocates from is
 * charged what the driver says it reserves (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT):
 *   - before a pool allocation that may grow the pool, the growth (the
 *     request rounded up to 2 MiB) is admitted by the ledger; a refusal
 *     first gives the pool's unused memory back (cuMemPoolTrimTo to what
 *     it uses, as the driver does before it fails) and asks again, so the
 *     pool cannot grow past the limit;
 *   - after the allocation, and after every call that may grow or shrink
 *     a pool (a free, a synchronisation, a trim, a release threshold set,
 *     a destroy, the end of a context), the pool's reserved bytes are read
 *     again and the difference charged or given back.
 * Pools of host memory and pools imported from another process (their
 * memory is the exporter's) are never charged. What the program reads
 * with cuMemPoolGetAttribute is the driver's (pool_view.c). A pool
 * destroyed while blocks of it live keeps their bytes charged until they
 * are freed.
 * Thread safety: every function may be called from any thread; the
 * driver calls run under the recursion guard. */
#ifndef VS_POOL_CHARGE_H
#define VS_POOL_CHARGE_H

#include "cuda_api.h"
#include "driver_table.h"

#include <stdint.h>

/* A pool allocation in flight (lives in vs_mem_op). */
typedef struct vs_pool_op {
  CUmemoryPool pool;   /* the pool it comes from; NULL: not charged by pool */
  int card;
  uint64_t admitted;   /* growth charged before the driver call */
  uint64_t serial;     /* the pool's entry; recorded with the block (vs_alloc_info.pool) */
  int per_block;       /* the pool could not be told (a driver without cuDeviceGetMemPool):
                          the caller charges the block itself, as any other allocation */
} vs_pool_op;

/* Before a pool allocation of size bytes on card from pool (NULL: the
 * device's current pool, as cuMemAllocAsync takes). CUDA_SUCCESS: the
 * growth was admitted (or the pool is not charged: op->pool NULL);
 * CUDA_ERROR_OUT_OF_MEMORY: refused even after the pool's unused memory
 * was given back (the caller may wait, vs_quota_wait, and ask again). */
CUresult vs_pool_alloc_begin(const vs_real_table *real, vs_pool_op *op, CUmemoryPool pool, int card, uint64_t size);
/* After the driver's answer r: the pool's charge becomes what it reserves;
 * the admission is settled against it. */
void vs_pool_alloc_end(const vs_real_table *real, vs_pool_op *op, CUresult r);
/* Reads every charged pool again (after frees and synchronisations; card
 * -1 for every card). One relaxed load when this process charges no pool. */
void vs_pool_refresh(const vs_real_table *real, int card);
/* Hooks of pool objects: created (its location: host pools are never
 * charged), imported (the exporter's memory), trimmed or an attribute set
 * (read again), destroyed (before: what its live blocks use stays charged;
 * after: the rest is given back). */
void vs_pool_created(CUmemoryPool pool, const CUmemPoolProps *props);
void vs_pool_imported(CUmemoryPool pool);
void vs_pool_changed(const vs_real_table *real, CUmemoryPool pool);
/* Around cuMemPoolDestroy: *used is what blocks still allocated use. */
void vs_pool_destroying(const vs_real_table *real, CUmemoryPool pool, uint64_t *used);
void vs_pool_destroyed(CUmemoryPool pool, uint64_t used, CUresult r);
/* A block of the pool entry `serial` was freed: a destroyed pool's
 * remaining charge shrinks by its size (to 0 with its last block). */
void vs_pool_block_freed(uint64_t serial, uint64_t size);
/* The bytes this process's pools hold on card (status, tests). */
uint64_t vs_pool_charged(int card);
void vs_pool_atfork_child(void);

#endif

/* The device memory service: the one seam between the hooks and what the
 * shim does with memory.
 *
 * A hook describes what the program asked for (kind, card, size), and the
 * service decides how it is served. Two phases around the program's own
 * driver call, so no request ever changes ABI variant:
 *
 *   vs_mem_op op;
 *   if (vs_mem_alloc_begin(&op, VS_MEM_DEVICE, card, size, VRAMSHIM_CALL_MEM_ALLOC) == VS_MEM_DONE)
 *     return op.result;                      // served (or refused) without the driver
 *   CUresult r = real->cuMemAlloc_v2(dptr, size);
 *   return vs_mem_alloc_end(&op, r, *dptr);  // record it, or roll back
 *
 *   if (vs_mem_free_begin(&op, VS_SPACE_DEVPTR, VS_FREE_MEM_FREE, ptr, call) == VS_MEM_DONE)
 *     return op.result;
 *   return vs_mem_free_end(&op, real->cuMemFree_v2(ptr));
 *
 * What the service does behind this header, without touching a hook:
 *   - contexts (contexts.h): a request for memory a context owns holds
 *     the current context from begin to end and its record carries the
 *     context's id; when the context ends (vs_mem_ctx_ending/_ended)
 *     everything it owned leaves the tracker, the counters, the ledger and
 *     the arena;
 *   - the arena (arena_glue.h): alloc_begin serves VS_MEM_DEVICE requests
 *     (and alloc_stream_begin the VS_MEM_ASYNC ones stream_alloc.h routes
 *     to it) with a current context from that context's arena where it is
 *     on, and answers VS_MEM_DONE with op->addr (or the refusal or error);
 *     free_begin finds the record's owner == arena and answers VS_MEM_DONE
 *     after vs_arena_glue_free(), and refuses an unknown pointer inside
 *     the arena's driver memory. The arena's backend calls the driver
 *     table directly and charges the tenant for its growths (its chunks
 *     and handles are "reserved", its blocks "live").
 *   - driver pools (pool_charge.h): a cuMemAllocFromPoolAsync, and a
 *     cuMemAllocAsync the driver's pool serves, is charged by what its
 *     pool grows (admitted before the call), never block by block; frees
 *     and synchronisations read the pool's reserved bytes again;
 *   - the tenant ledger (quota.h), for every other request for device
 *     memory (CUDA arrays among them, by handle): alloc_begin charges
 *     op->size (a refusal first gives back the arenas' cache on the card,
 *     then waits under on_limit = wait) and answers VS_MEM_DONE with
 *     CUDA_ERROR_OUT_OF_MEMORY when admission fails; alloc_end refunds the
 *     charge when the driver refused (and settles a pitch allocation's
 *     final size); free_end, on success, refunds the freed bytes.
 *   - on_limit = spill (spill.h): a cuMemAlloc refused by the ledger or by
 *     the driver is served from host memory the device can address
 *     (VS_MEM_DONE from alloc_begin, or CUDA_SUCCESS from alloc_end with
 *     op->addr set, which the hook hands to the program); free_begin gives
 *     a spilled block back to the host and answers VS_MEM_DONE.
 *   - the views: vs_mem_info answers from the tenant's ledger where its
 *     card is enforced, vs_mem_range from the arena's blocks.
 * Address ranges (cuMemAddressReserve) and peer memory (IPC) are recorded
 * and counted, never charged.
 * Thread safety: every function may be called from any thread at once. */
#ifndef VS_MEMORY_SERVICE_H
#define VS_MEMORY_SERVICE_H

#include "contexts.h"
#include "cuda_api.h"
#include "pool_charge.h"
#include "served.h"
#include "stream_alloc.h"
#include "tracker.h"
#include "vramshim.h"

#include <stdint.h>

typedef enum vs_mem_kind {
  VS_MEM_DEVICE = 0,  /* cuMemAlloc                               */
  VS_MEM_PITCH,       /* cuMemAllocPitch (size = pitch x height)  */
  VS_MEM_MANAGED,     /* cuMemAllocManaged                        */
  VS_MEM_ASYNC,       /* cuMemAllocAsync (the stream's pool)      */
  VS_MEM_POOL,        /* cuMemAllocFromPoolAsync                  */
  VS_MEM_VMM_PHYS,    /* cuMemCreate: physical memory, by handle  */
  VS_MEM_VA_RANGE,    /* cuMemAddressReserve: no device memory    */
  VS_MEM_IPC,         /* cuIpcOpenMemHandle: another process's    */
  VS_MEM_DEVICE_V1,   /* legacy 32-bit cuMemAlloc: never served by the arena, whose addresses need 64 bits */
  VS_MEM_ARRAY,       /* cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate: by handle, size estimated */
  VS_MEM_KINDS
} vs_mem_kind;

/* Which kinds each release path may free (a free on a record of another
 * kind leaves the record alone and goes to the driver unchanged). */
#define VS_KIND_BIT(k) (1u << (k))
#define VS_FREE_MEM_FREE                                                                     \
  (VS_KIND_BIT(VS_MEM_DEVICE) | VS_KIND_BIT(VS_MEM_PITCH) | VS_KIND_BIT(VS_MEM_MANAGED) |    \
   VS_KIND_BIT(VS_MEM_ASYNC) | VS_KIND_BIT(VS_MEM_POOL) | VS_KIND_BIT(VS_MEM_DEVICE_V1))
#define VS_FREE_MEM_FREE_ASYNC VS_FREE_MEM_FREE
#define VS_FREE_IPC_CLOSE VS_KIND_BIT(VS_MEM_IPC)
#define VS_FREE_RELEASE VS_KIND_BIT(VS_MEM_VMM_PHYS)
#define VS_FREE_ADDRESS VS_KIND_BIT(VS_MEM_VA_RANGE)
#define VS_FREE_ARRAY VS_KIND_BIT(VS_MEM_ARRAY)
/* What the driver frees with the context the memory was allocated in. Not
 * VMM handles and ranges (no context owns them), nor stream-ordered blocks
 * (their pool is the device's; cuda.h: cuCtxDestroy does not free them). */
#define VS_CTX_OWNED                                                                         \
  (VS_KIND_BIT(VS_MEM_DEVICE) | VS_KIND_BIT(VS_MEM_PITCH) | VS_KIND_BIT(VS_MEM_MANAGED) |    \
   VS_KIND_BIT(VS_MEM_DEVICE_V1) | VS_KIND_BIT(VS_MEM_IPC) | VS_KIND_BIT(VS_MEM_ARRAY))
/* What leaves with a context: the above, and stream-ordered blocks its
 * arena served (only those carry the context's id). */
#define VS_CTX_SWEPT (VS_CTX_OWNED | VS_KIND_BIT(VS_MEM_ASYNC))

/* VS_MEM_DONE / VS_MEM_PASS: served.h */

/* One request in flight. Lives on the hook's stack. */
typedef struct vs_mem_op {
  vs_space space;
  vramshim_driver_call call;
  int known;            /* free: the record was found (and is held in `rec`) */
  vs_alloc_info rec;    /* alloc: what will be recorded; free: what was removed */
  CUresult result;      /* when VS_MEM_DONE: what the hook returns */
  uint64_t addr;        /* when VS_MEM_DONE after an alloc: the address served */
  vs_ctx *ctx;          /* alloc of memory a context owns: its context, referenced until the end */
  int zero;             /* alloc of 0 bytes: the driver's error, not a refusal */
  vs_pool_op pool;      /* a driver pool's allocation: its growth admitted (pool_charge.h) */
  int deferred;         /* free: a cuMemRelease after which the memory stays (vmm_life.h) */
} vs_mem_op;

/* card: the device the memory is on (-1 unknown: recorded on card 0 if the
 * driver grants it). size: the bytes asked for (for pitch: the estimate
 * width x height; alloc_end takes the final size). */
int vs_mem_alloc_begin(vs_mem_op *op, vs_mem_kind kind, int card, uint64_t size, vramshim_driver_call call);
/* r: what the driver returned; addr: the address or handle it gave (read
 * only when r == CUDA_SUCCESS). Returns what the hook returns. */
CUresult vs_mem_alloc_end(vs_mem_op *op, CUresult r, uint64_t addr);
/* After the driver refused a request the books admitted (r is its
 * answer): 1 when caches on the card were given back (this process's
 * arenas, other processes' asked: vs_quota_ask_card) and the hook should
 * ask the driver once more, then end the request with that answer. Without
 * the shim those caches would have been the driver's. Pool requests too:
 * the driver's pool was refused room on the card, as a cuMemAlloc is (what
 * it caches itself it uses before it asks the card). */
int vs_mem_retry_refused(vs_mem_op *op, CUresult r);
/* cuMemAllocFromPoolAsync from pool: charged by the pool's growth
 * (pool_charge.h), as cuMemAllocAsync requests the driver's pool serves. */
int vs_mem_alloc_pool_begin(vs_mem_op *op, int card, uint64_t size, vramshim_driver_call call, CUmemoryPool pool);
/* Same, with the size known only after the call (pitch x height). */
CUresult vs_mem_alloc_end_sized(vs_mem_op *op, CUresult r, uint64_t addr, uint64_t size);

/* Unknown keys pass to the driver unchanged and change no accounting. */
int vs_mem_free_begin(vs_mem_op *op, vs_space space, unsigned kind_mask, uint64_t key,
                      vramshim_driver_call call);

/* Stream-ordered allocation (cuMemAllocAsync, cuMemFreeAsync): the way
 * stream_alloc.h decides from its stream (VS_ROUTE_*). */
/* A VS_MEM_ASYNC request on `stream`: with VS_ROUTE_LANE or _OFF_LANE
 * served by the current context's arena where it is on for the card (recorded as
 * VS_MEM_ASYNC, owned by the arena and its context: the block goes with
 * the context's arena), else as vs_mem_alloc_begin. */
int vs_mem_alloc_stream_begin(vs_mem_op *op, int card, uint64_t size, vramshim_driver_call call, int route,
                              CUstream stream);
/* cuMemFreeAsync of key: an arena block goes back on the lane when route
 * is VS_ROUTE_LANE and its context is the current one, else pending (as
 * cuMemFree). VS_ROUTE_CAPTURED: an arena block is left allocated (the
 * driver cannot record a graph free of memory it does not know; warned
 * once) and the answer is CUDA_SUCCESS; other keys go to the driver. */
int vs_mem_free_stream_begin(vs_mem_op *op, uint64_t key, vramshim_driver_call call, int route);
CUresult vs_mem_free_end(vs_mem_op *op, CUresult r);

/* The program's own VMM memory lives while its handle is referenced or
 * mapped (vmm_life.h): a cuMemRelease that leaves it referenced or mapped
 * keeps the record and the charge (vs_mem_free_begin), and the record goes
 * at the cuMemUnmap of the last mapping of a released handle. The hooks
 * report a successful cuMemMap, cuMemUnmap and cuMemRetainAllocationHandle. */
void vs_mem_vmm_mapped(uint64_t handle, uint64_t va, uint64_t size);
void vs_mem_vmm_unmapped(uint64_t va, uint64_t size);
void vs_mem_vmm_retained(uint64_t handle);
/* The record of a live allocation starting exactly at key, 0 found / -1. */
int vs_mem_lookup(vs_space space, uint64_t key, vs_alloc_info *out);

/* The view of a card (cuMemGetInfo, cuDeviceTotalMem): VS_MEM_DONE with
 * free_bytes and total_bytes (free_bytes may be NULL) filled when the service answers (the tenant's
 * view, vs_quota_view), VS_MEM_PASS to ask the driver (the card is not enforced, or the driver's
 * own answer is the tenant's). */
int vs_mem_info(int card, uint64_t *free_bytes, uint64_t *total_bytes);
/* The same view made from the driver's own figures for the card (asked by
 * the caller: cuMemGetInfo's hook with the program's variant). */
int vs_mem_info_driver(int card, uint64_t drv_free, uint64_t drv_total, uint64_t *free_bytes, uint64_t *total_bytes);
/* The allocation around ptr as the program sees it (cuMemGetAddressRange,
 * CU_POINTER_ATTRIBUTE_RANGE_START/SIZE): VS_MEM_DONE when the service
 * placed it (an arena block inside a larger driver chunk), VS_MEM_PASS to
 * ask the driver (every other pointer). */
int vs_mem_range(uint64_t ptr, uint64_t *base, uint64_t *size);

/* The live arena block around ptr, as pointer attributes describe it. */
typedef struct vs_mem_block {
  uint64_t base, size;   /* the block as the program asked for it */
  uint64_t ctx_handle;   /* the CUcontext it was allocated in */
  uint64_t buffer_id;    /* unique per allocation, never repeated */
  int card;
  int stream_ordered;    /* served for a cuMemAllocAsync (its pool is the device's default one) */
  int sync_memops;       /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS as the program last set it on this block */
} vs_mem_block;
enum { VS_AT_DRIVER = 0, VS_AT_BLOCK, VS_AT_GAP };
/* VS_AT_BLOCK with *out: ptr is in an arena block. VS_AT_GAP: ptr is
 * in driver memory an arena holds but in no live block (past a block's
 * end, say): the driver would say it knows no such allocation.
 * VS_AT_DRIVER: ask the driver. */
int vs_mem_block_at(uint64_t ptr, vs_mem_block *out);
/* The block at base (a vs_mem_block's base) reads SYNC_MEMOPS on (0 or 1)
 * from now on; 0 done, -1 no such block (freed meanwhile). */
int vs_mem_block_set_sync_memops(uint64_t base, int on);

/* Contexts (hooks_ctx.c). A context began (cuCtxCreate*, primary = 0; a
 * retain of dev's primary context, primary = 1). */
void vs_mem_ctx_begin(uint64_t handle, int dev, int primary);
/* A context ends: handle (primary_dev -1), or dev's primary context
 * (primary_dev >= 0). Everything it owned leaves the shim: tracker records,
 * their counters and tenant charges, its arena. In two steps around the
 * driver's call where the end is certain beforehand (destroy, reset):
 * vs_mem_ctx_ending before (the records go while the driver still holds
 * the memory, so no address it hands out next can meet one), then
 * vs_mem_ctx_ended with the driver's answer (the arena goes: VMM memory is
 * released once the device is done with it). vs_mem_ctx_end does both,
 * after a driver call that already ended the context (a last release). */
vs_ctx *vs_mem_ctx_ending(uint64_t handle, int primary_dev);
void vs_mem_ctx_ended(vs_ctx *c, CUresult r);
void vs_mem_ctx_end(uint64_t handle, int primary_dev);

/* A driver call that neither allocates nor frees (map, unmap, queries),
 * counted on its card. */
void vs_mem_count_call(int card, vramshim_driver_call call);

/* fork handlers for everything the service owns. */
void vs_mem_atfork_prepare(void);
void vs_mem_atfork_parent(void);
void vs_mem_atfork_child(void);

#endif

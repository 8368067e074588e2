/* Stream-ordered allocation served by the arena (docs/arena.md, "The
 * lane"): which way a cuMemAllocAsync / cuMemFreeAsync goes (VS_ROUTE_*,
 * served by memory_service.h), from the stream it names.
 *
 * cuMemAllocAsync on the legacy stream of the current context takes the
 * arena's lane: a block freed there by cuMemFreeAsync is the next such
 * allocation's at once, with no sync, even after the program made streams
 * of its own (CUDA's stream-ordered allocator promises that every use of a
 * block is ordered before its free on that stream, and every use of a new
 * block after its allocation there). The legacy stream cannot capture a
 * graph, so no capture check is made on it.
 * On a stream the program created in the current context (the shim saw it
 * made: stream_syncs.h), the arena serves it off the lane
 * (vs_arena_alloc_on): where the lane's frees are not yet behind a sync,
 * the stream is made to wait for the lane (an event, cuStreamWaitEvent)
 * rather than the host for the device, as the driver's pool orders its
 * own reuse. Not while a graph capture may be under way (a
 * cuStreamBeginCapture* was called, or the per-thread default stream is in
 * use) and the stream says it is capturing: a captured allocation must
 * become a graph node, which only the driver can make.
 * The driver's pool keeps everything else: the per-thread default stream,
 * a stream the shim does not know, and every request once the program has
 * chosen a memory pool of its own for a device (cuDeviceSetMemPool,
 * cuMemSetMemPool: its properties are the program's to choose) or given a
 * pool's memory to other devices (cuMemPoolSetAccess), or with
 * VRAMSHIM_ARENA_ASYNC=off.
 * Thread safety: every function may be called from any thread at once. */
#ifndef VS_STREAM_ALLOC_H
#define VS_STREAM_ALLOC_H

#include "cuda_api.h"
#include "driver_table.h"

/* Which way a stream-ordered request goes (memory_service.h serves it). */
enum {
  VS_ROUTE_DRIVER = 0,  /* the driver's memory pool, as vs_mem_alloc_begin(VS_MEM_ASYNC) */
  VS_ROUTE_OFF_LANE,    /* the current context's arena, on a stream of that context other than its legacy one */
  VS_ROUTE_LANE,        /* the current context's arena, on its legacy stream: the arena's lane (arena.h) */
  VS_ROUTE_CAPTURED     /* free only: the stream is capturing a graph */
};
/* For cuMemAllocAsync(_ptsz: ptsz 1) on h. */
int vs_stream_alloc_route(const vs_real_table *real, CUstream h, int ptsz);
/* 1 when h (ptsz: named in a _ptsz call) is capturing a graph, or its
 * capture was invalidated, or the driver cannot say: a stream-ordered
 * allocation there is a node of the graph, no memory (the driver takes it at
 * the graph's launch, which is admitted then: graph_charge.h), or the
 * driver's own error, so it goes to the driver unaccounted, never refused,
 * as without the shim. Asked before vs_stream_alloc_route, which then never
 * sees a capturing stream. 0 on the legacy stream (it cannot capture) and
 * while no capture was ever begun: no driver call then. */
int vs_stream_alloc_captured(const vs_real_table *real, CUstream h, int ptsz);
/* For cuMemFreeAsync(_ptsz) on h: VS_ROUTE_LANE on the legacy stream,
 * VS_ROUTE_CAPTURED on a capturing stream, else VS_ROUTE_OFF_LANE. */
int vs_stream_free_route(const vs_real_table *real, CUstream h, int ptsz);

#endif

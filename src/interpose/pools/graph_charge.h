/* The device's graph memory pool charged to the tenant (issue 22;
 * docs/architecture.md, "Driver pools").
 *
 * A graph's memory-allocation nodes take their memory from the device's
 * graph pool when the graph is launched; the pool keeps it reserved on
 * the card after the graph's free nodes ran, until cuDeviceGraphMemTrim or
 * the end of the context. So the tenant is charged what the driver says
 * the pool reserves (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), as for a
 * driver pool (pool_charge.h):
 *   - the bytes of each graph's allocation nodes are recorded per device
 *     (cuGraphAddMemAllocNode, cuGraphAddNode) and follow it to its
 *     executable graphs;
 *   - before cuGraphLaunch and cuGraphUpload (which backs the allocations
 *     ahead of a launch; also instantiation with
 *     CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD), the growth the call may cause
 *     (the graph's allocation bytes less what the pool reserves and does
 *     not use, rounded up to 2 MiB) is admitted by the ledger, after the
 *     arena's cache on the card was given back when refused; a refusal
 *     that stands (on_limit = fail, or a wait that ran out) is the call's
 *     CUDA_ERROR_OUT_OF_MEMORY, the driver not asked;
 *   - after a launch or upload, a trim (cuDeviceGraphMemTrim) and the end
 *     of a context, the pool's reserved bytes are read again and the
 *     charge becomes them.
 * The program's cuDeviceGetGraphMemAttribute is the driver's (not hooked).
 * A graph made by stream capture has allocation nodes the shim did not see
 * added: they are read from the graph when its capture ends
 * (vs_graph_mem_captured); a driver that cannot list them leaves its launch
 * admitted nothing in advance, charged what the pool reserves after it.
 * Thread safety: any thread; the driver calls run under the recursion guard. */
#ifndef VS_GRAPH_CHARGE_H
#define VS_GRAPH_CHARGE_H

#include "driver_table.h"

#include <stdint.h>

/* Reads the graph pool of card again (every card: -1) and settles the
 * charge; nothing when this process never launched a graph with
 * allocation nodes there. */
void vs_graph_mem_refresh(const vs_real_table *real, int card);
/* A graph made (or extended: cuStreamBeginCaptureToGraph) by stream
 * capture: its allocation nodes, which no hook saw added, are counted from
 * the graph itself (its nodes, and those of its child graphs), so its launch
 * is admitted like any other's. */
void vs_graph_mem_captured(const vs_real_table *real, CUgraph graph);
void vs_graph_mem_atfork_child(void);
/* What the card's graph pool reserved at the last reading (0 before any). */
uint64_t vs_graph_mem_charged(int card);

#endif

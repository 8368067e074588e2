/* The one list of CUDA Driver API functions the shim hooks.
 *
 * Every row is one ABI variant, named exactly as the driver exports it
 * (cuMemAlloc is the legacy 32-bit-size function, cuMemAlloc_v2 the one
 * cuda.h maps "cuMemAlloc" to; cuMemAllocAsync_ptsz the per-thread-stream
 * one). From this list alone come:
 *   - the exported entry points (hooks.c), each checked by the compiler
 *     against its prototype in cuda.h;
 *   - the table of real driver pointers (driver_table.c);
 *   - the answer to dlsym / GetProcAddress (lookup.c) and to cuGetProcAddress (procaddress.c),
 *     both through the name/hook/real tables (hook_table.c).
 * Adding a hook: one row here plus its body `vs_hook_<name>` in the file of
 * its concern (hooks_alloc.c, hooks_array.c, hooks_vmm.c, hooks_query.c, hooks_ctx.c,
 * procaddress.c, stream_order.c, stream_syncs.c, stream_alloc.c, capture.c, pool_view.c,
 * hooks_pool.c, graph_charge.c);
 * a missing body is a link error.
 *
 * X(name, params, args): params as declared in cuda.h (with
 * __CUDA_API_VERSION_INTERNAL, see cuda_api.h), args the same names. */
#ifndef VS_HOOK_LIST_H
#define VS_HOOK_LIST_H

#include "hook_list_ptds.h"

#define VS_HOOKS(X)                                                                                   \
  /* allocation and free: classic, pitch, managed */                                                 \
  X(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize))                           \
  X(cuMemAlloc, (CUdeviceptr_v1 * dptr, unsigned int bytesize), (dptr, bytesize))                     \
  X(cuMemAllocPitch_v2,                                                                               \
    (CUdeviceptr * dptr, size_t * pPitch, size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes), \
    (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                           \
  X(cuMemAllocPitch,                                                                                  \
    (CUdeviceptr_v1 * dptr, unsigned int *pPitch, unsigned int WidthInBytes, unsigned int Height,    \
     unsigned int ElementSizeBytes),                                                                  \
    (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                           \
  X(cuMemAllocManaged, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags), (dptr, bytesize, flags)) \
  /* CUDA arrays: device memory held by handle (hooks_array.c) */                                    \
  X(cuArrayCreate_v2, (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray), (pHandle, pAllocateArray)) \
  X(cuArrayCreate, (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray), (pHandle, pAllocateArray)) \
  X(cuArray3DCreate_v2, (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray),           \
    (pHandle, pAllocateArray))                                                                        \
  X(cuArray3DCreate, (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray),           \
    (pHandle, pAllocateArray))                                                                        \
  X(cuMipmappedArrayCreate,                                                                           \
    (CUmipmappedArray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc, unsigned int numMipmapLevels), \
    (pHandle, pMipmappedArrayDesc, numMipmapLevels))                                                  \
  X(cuArrayDestroy, (CUarray hArray), (hArray))                                                       \
  X(cuMipmappedArrayDestroy, (CUmipmappedArray hMipmappedArray), (hMipmappedArray))                   \
  X(cuMemFree_v2, (CUdeviceptr dptr), (dptr))                                                         \
  X(cuMemFree, (CUdeviceptr_v1 dptr), (dptr))                                                         \
  /* stream-ordered allocation (legacy stream and per-thread stream) */                              \
  X(cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream)) \
  X(cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream)) \
  X(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))                            \
  X(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))                       \
  X(cuMemAllocFromPoolAsync, (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream), \
    (dptr, bytesize, pool, hStream))                                                                  \
  X(cuMemAllocFromPoolAsync_ptsz,                                                                     \
    (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream), (dptr, bytesize, pool, hStream)) \
  /* virtual memory management */                                                                     \
  X(cuMemCreate,                                                                                      \
    (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop, unsigned long long flags), \
    (handle, size, prop, flags))                                                                      \
  X(cuMemRelease, (CUmemGenericAllocationHandle handle), (handle))                                    \
  X(cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags), \
    (ptr, size, offset, handle, flags))                                                               \
  X(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size))                                          \
  X(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle * handle, void *addr), (handle, addr))   \
  X(cuMemGetAccess, (unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr),       \
    (flags, location, ptr))                                                                           \
  X(cuMemAddressReserve, (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags), \
    (ptr, size, alignment, addr, flags))                                                              \
  X(cuMemAddressFree, (CUdeviceptr ptr, size_t size), (ptr, size))                                    \
  /* inter-process memory */                                                                          \
  X(cuIpcGetMemHandle, (CUipcMemHandle * pHandle, CUdeviceptr dptr), (pHandle, dptr))                 \
  X(cuIpcOpenMemHandle_v2, (CUdeviceptr * pdptr, CUipcMemHandle handle, unsigned int Flags), (pdptr, handle, Flags)) \
  X(cuIpcOpenMemHandle, (CUdeviceptr * pdptr, CUipcMemHandle handle, unsigned int Flags), (pdptr, handle, Flags)) \
  X(cuIpcCloseMemHandle, (CUdeviceptr dptr), (dptr))                                                  \
  /* queries the quota view and the arena will answer */                                              \
  X(cuMemGetInfo_v2, (size_t * free, size_t * total), (free, total))                                  \
  X(cuMemGetInfo, (unsigned int *free, unsigned int *total), (free, total))                           \
  X(cuDeviceTotalMem_v2, (size_t * bytes, CUdevice dev), (bytes, dev))                                \
  X(cuDeviceTotalMem, (unsigned int *bytes, CUdevice dev), (bytes, dev))                              \
  X(cuMemGetAddressRange_v2, (CUdeviceptr * pbase, size_t * psize, CUdeviceptr dptr), (pbase, psize, dptr)) \
  X(cuMemGetAddressRange, (CUdeviceptr_v1 * pbase, unsigned int *psize, CUdeviceptr_v1 dptr), (pbase, psize, dptr)) \
  X(cuPointerGetAttribute, (void *data, CUpointer_attribute attribute, CUdeviceptr ptr), (data, attribute, ptr)) \
  X(cuPointerSetAttribute, (const void *value, CUpointer_attribute attribute, CUdeviceptr ptr),       \
    (value, attribute, ptr))                                                                          \
  X(cuPointerGetAttributes, (unsigned int numAttributes, CUpointer_attribute *attributes, void **data, CUdeviceptr ptr), \
    (numAttributes, attributes, data, ptr))                                                           \
  /* contexts: memory belongs to the context it was allocated in and ends with it (hooks_ctx.c) */  \
  X(cuCtxCreate_v4, (CUcontext * pctx, CUctxCreateParams * ctxCreateParams, unsigned int flags, CUdevice dev), \
    (pctx, ctxCreateParams, flags, dev))                                                              \
  X(cuCtxCreate_v3,                                                                                   \
    (CUcontext * pctx, CUexecAffinityParam * paramsArray, int numParams, unsigned int flags, CUdevice dev), \
    (pctx, paramsArray, numParams, flags, dev))                                                       \
  X(cuCtxCreate_v2, (CUcontext * pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev))         \
  X(cuCtxCreate, (CUcontext * pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev))            \
  X(cuCtxDestroy_v2, (CUcontext ctx), (ctx))                                                          \
  X(cuCtxDestroy, (CUcontext ctx), (ctx))                                                             \
  X(cuCtxAttach, (CUcontext * pctx, unsigned int flags), (pctx, flags))                               \
  X(cuCtxDetach, (CUcontext ctx), (ctx))                                                              \
  X(cuCtxEnablePeerAccess, (CUcontext peerContext, unsigned int Flags), (peerContext, Flags))        \
  X(cuCtxDisablePeerAccess, (CUcontext peerContext), (peerContext))                                   \
  X(cuDevicePrimaryCtxRetain, (CUcontext * pctx, CUdevice dev), (pctx, dev))                          \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice dev), (dev))                                              \
  X(cuDevicePrimaryCtxRelease, (CUdevice dev), (dev))                                                 \
  X(cuDevicePrimaryCtxReset_v2, (CUdevice dev), (dev))                                                \
  X(cuDevicePrimaryCtxReset, (CUdevice dev), (dev))                                                   \
  /* streams: the first one ends stream order (stream_order.c) */                                     \
  X(cuStreamCreate, (CUstream * phStream, unsigned int Flags), (phStream, Flags))                     \
  X(cuStreamCreateWithPriority, (CUstream * phStream, unsigned int flags, int priority),              \
    (phStream, flags, priority))                                                                      \
  X(cuGreenCtxCreate, (CUgreenCtx * phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags), \
    (phCtx, desc, dev, flags))                                                                        \
  X(cuGreenCtxStreamCreate, (CUstream * phStream, CUgreenCtx greenCtx, unsigned int flags, int priority), \
    (phStream, greenCtx, flags, priority))                                                            \
  /* stream-ordered allocation: a capture or a pool of the program's own; graph capture holds the     \
   * arenas (stream_alloc.c) */                                                                       \
  X(cuStreamBeginCapture, (CUstream hStream), (hStream))                                              \
  X(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))           \
  X(cuStreamBeginCaptureToGraph,                                                                      \
    (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData, \
     size_t numDependencies, CUstreamCaptureMode mode),                                               \
    (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))                           \
  X(cuStreamBeginCapture_ptsz, (CUstream hStream), (hStream))                                         \
  X(cuStreamBeginCapture_v2_ptsz, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))      \
  X(cuStreamBeginCaptureToGraph_ptsz,                                                                 \
    (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData, \
     size_t numDependencies, CUstreamCaptureMode mode),                                               \
    (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))                           \
  X(cuStreamEndCapture, (CUstream hStream, CUgraph * phGraph), (hStream, phGraph))                    \
  X(cuStreamEndCapture_ptsz, (CUstream hStream, CUgraph * phGraph), (hStream, phGraph))               \
  X(cuDeviceSetMemPool, (CUdevice dev, CUmemoryPool pool), (dev, pool))                               \
  X(cuMemSetMemPool, (CUmemLocation * location, CUmemAllocationType type, CUmemoryPool pool),         \
    (location, type, pool))                                                                           \
  X(cuMemPoolSetAccess, (CUmemoryPool pool, const CUmemAccessDesc *map, size_t count), (pool, map, count)) \
  /* the default pool's statistics and trim count the arena's stream-ordered blocks (pool_view.c) */ \
  X(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value), (pool, attr, value)) \
  X(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value), (pool, attr, value)) \
  X(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep), (pool, minBytesToKeep))              \
  /* driver pools charged by what they reserve (pool_charge.c, hooks_pool.c) */                      \
  X(cuMemPoolCreate, (CUmemoryPool * pool, const CUmemPoolProps *poolProps), (pool, poolProps))       \
  X(cuMemPoolDestroy, (CUmemoryPool pool), (pool))                                                    \
  X(cuMemPoolImportFromShareableHandle,                                                               \
    (CUmemoryPool * pool_out, void *handle, CUmemAllocationHandleType handleType, unsigned long long flags), \
    (pool_out, handle, handleType, flags))                                                            \
  /* graphs' memory nodes: the device's graph pool charged by what it reserves (graph_charge.c) */  \
  X(cuGraphAddMemAllocNode,                                                                           \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, size_t numDependencies, \
     CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams),                                                         \
    (phGraphNode, hGraph, dependencies, numDependencies, nodeParams))                                 \
  X(cuGraphAddNode,                                                                                   \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, size_t numDependencies, \
     CUgraphNodeParams *nodeParams),                                                                  \
    (phGraphNode, hGraph, dependencies, numDependencies, nodeParams))                                 \
  X(cuGraphAddNode_v2,                                                                                \
    (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,                       \
     const CUgraphEdgeData *dependencyData, size_t numDependencies, CUgraphNodeParams *nodeParams),    \
    (phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams))                 \
  X(cuGraphDestroy, (CUgraph hGraph), (hGraph))                                                       \
  X(cuGraphInstantiateWithFlags, (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags), \
    (phGraphExec, hGraph, flags))                                                                     \
  X(cuGraphInstantiate_v2,                                                                            \
    (CUgraphExec * phGraphExec, CUgraph hGraph, CUgraphNode * phErrorNode, char *logBuffer, size_t bufferSize), \
    (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize))                                        \
  X(cuGraphInstantiate,                                                                               \
    (CUgraphExec * phGraphExec, CUgraph hGraph, CUgraphNode * phErrorNode, char *logBuffer, size_t bufferSize), \
    (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize))                                        \
  X(cuGraphInstantiateWithParams,                                                                     \
    (CUgraphExec * phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS * instantiateParams),    \
    (phGraphExec, hGraph, instantiateParams))                                                         \
  X(cuGraphInstantiateWithParams_ptsz,                                                                \
    (CUgraphExec * phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS * instantiateParams),    \
    (phGraphExec, hGraph, instantiateParams))                                                         \
  X(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))                 \
  X(cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))            \
  X(cuGraphUpload, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))                 \
  X(cuGraphUpload_ptsz, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))            \
  X(cuGraphExecDestroy, (CUgraphExec hGraphExec), (hGraphExec))                                       \
  X(cuDeviceGraphMemTrim, (CUdevice device), (device))                                                \
  /* the program's own synchronisations, counted as the arena's (stream_syncs.c) */                  \
  X(cuCtxSynchronize, (void), ())                                                                     \
  X(cuCtxSynchronize_v2, (CUcontext ctx), (ctx))                                                      \
  X(cuStreamSynchronize, (CUstream hStream), (hStream))                                               \
  X(cuStreamQuery, (CUstream hStream), (hStream))                                                     \
  X(cuStreamDestroy_v2, (CUstream hStream), (hStream))                                                \
  X(cuStreamDestroy, (CUstream hStream), (hStream))                                                   \
  X(cuEventCreate, (CUevent * phEvent, unsigned int Flags), (phEvent, Flags))                         \
  X(cuEventRecord, (CUevent hEvent, CUstream hStream), (hEvent, hStream))                             \
  X(cuEventRecordWithFlags, (CUevent hEvent, CUstream hStream, unsigned int flags), (hEvent, hStream, flags)) \
  X(cuEventSynchronize, (CUevent hEvent), (hEvent))                                                   \
  X(cuEventQuery, (CUevent hEvent), (hEvent))                                                         \
  X(cuEventDestroy_v2, (CUevent hEvent), (hEvent))                                                    \
  X(cuEventDestroy, (CUevent hEvent), (hEvent))                                                       \
  /* the lookup path itself */                                                                        \
  X(cuGetProcAddress_v2,                                                                              \
    (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus), \
    (symbol, pfn, cudaVersion, flags, symbolStatus))                                                  \
  X(cuGetProcAddress, (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags), (symbol, pfn, cudaVersion, flags)) \
  /* every other per-thread default stream variant: a call ends stream order (hook_list_ptds.h) */   \
  VS_PTDS_HOOKS(X)

/* Driver functions the shim calls for itself but does not hook. */
#define VS_DRIVER_EXTRAS(X)                                                                        \
  /* graph_charge.c: what the device's graph pool reserves and uses */                             \
  X(cuDeviceGetGraphMemAttribute, (CUdevice device, CUgraphMem_attribute attr, void *value), (device, attr, value)) \
  /* graph_charge.c: the memory nodes of a graph made by stream capture */                         \
  X(cuGraphGetNodes, (CUgraph hGraph, CUgraphNode * nodes, size_t * numNodes), (hGraph, nodes, numNodes)) \
  X(cuGraphNodeGetType, (CUgraphNode hNode, CUgraphNodeType * type), (hNode, type))               \
  X(cuGraphMemAllocNodeGetParams, (CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS * params_out),    \
    (hNode, params_out))                                                                           \
  X(cuGraphChildGraphNodeGetGraph, (CUgraphNode hNode, CUgraph * phGraph), (hNode, phGraph))      \
  X(cuCtxGetDevice, (CUdevice * device), (device))                                                 \
  /* contexts (contexts.c, hooks_ctx.c): who owns a request; has a primary context ended */        \
  X(cuCtxGetCurrent, (CUcontext * pctx), (pctx))                                                   \
  X(cuDevicePrimaryCtxGetState, (CUdevice dev, unsigned int *flags, int *active), (dev, flags, active)) \
  /* an arena's sync in its own context, from a thread where another is current */                 \
  X(cuCtxPushCurrent_v2, (CUcontext ctx), (ctx))                                                   \
  X(cuCtxPopCurrent_v2, (CUcontext * pctx), (pctx))                                                \
  /* (the arena's backend syncs with cuCtxSynchronize, a hook: hook_list above) */                 \
  /* stream_syncs.c: an event recorded during stream capture does not count */                     \
  X(cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus *captureStatus), (hStream, captureStatus)) \
  X(cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice dev), (pi, attrib, dev))   \
  /* arena_backend.c: a stream ordered after the arena's lane */                                    \
  X(cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags), (hStream, hEvent, Flags)) \
  /* hooks_query.c: the pool of an arena block served for cuMemAllocAsync; SYNC_MEMOPS set on a  \
   * VMM block as its context's flag */                                                            \
  X(cuDeviceGetDefaultMemPool, (CUmemoryPool * pool_out, CUdevice dev), (pool_out, dev))           \
  X(cuCtxGetFlags, (unsigned int *flags), (flags))                                                 \
  X(cuCtxSetFlags, (unsigned int flags), (flags))                                                  \
  /* pool_charge.c: the pool cuMemAllocAsync takes */                                              \
  X(cuDeviceGetMemPool, (CUmemoryPool * pool, CUdevice dev), (pool, dev))                          \
  X(cuMemGetAllocationGranularity,                                                                 \
    (size_t * granularity, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags option), \
    (granularity, prop, option))                                                                   \
  X(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count),     \
    (ptr, size, desc, count))                                                                      \
  /* tenant quotas (quota.c): the card's identity for its ledger */                                \
  X(cuDeviceGet, (CUdevice * device, int ordinal), (device, ordinal))                              \
  /* nvml_cards.c: NVML's cards by UUID, in a process that never called cuInit too */              \
  X(cuInit, (unsigned int Flags), (Flags))                                                         \
  X(cuDeviceGetCount, (int *count), (count))                                                       \
  X(cuDeviceGetUuid_v2, (CUuuid * uuid, CUdevice dev), (uuid, dev))                                \
  X(cuDeviceGetUuid, (CUuuid * uuid, CUdevice dev), (uuid, dev))                                  \
  /* on_limit = spill (spill.c): pinned host memory mapped for the device */                       \
  X(cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags), (pp, bytesize, Flags))       \
  X(cuMemHostGetDevicePointer_v2, (CUdeviceptr * pdptr, void *p, unsigned int Flags), (pdptr, p, Flags)) \
  X(cuMemFreeHost, (void *p), (p))                                                                 \
  /* IPC of VMM arena blocks (ipc_vmm.c): physical memory as POSIX fds */                        \
  X(cuMemExportToShareableHandle,                                                                  \
    (void *shareableHandle, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType handleType, \
     unsigned long long flags),                                                                    \
    (shareableHandle, handle, handleType, flags))                                                  \
  X(cuMemImportFromShareableHandle,                                                                \
    (CUmemGenericAllocationHandle * handle, void *osHandle, CUmemAllocationHandleType shHandleType), \
    (handle, osHandle, shHandleType))

#endif

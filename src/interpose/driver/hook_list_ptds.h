/* The per-thread default stream variants (_ptsz, _ptds) of the Driver API
 * that cuda.h declares, other than the stream-ordered allocations of
 * hook_list.h: one row each, in hook_list.h's X(name, params, args) form,
 * generated from cuda.h (CUDA 13.0) by its own macros (`#define NAME
 * __CUDA_API_PTDS(BASE)` / `__CUDA_API_PTSZ(BASE)` and the explicit _ptsz
 * declarations of older ABI versions).
 *
 * Why: the CUDA runtime looks up these variants at initialisation whether
 * or not the program uses the per-thread default stream
 * (../shared/data/cudart13-getprocaddress.txt: 74 requests with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM from a plain cudaMalloc
 * program), so a lookup says nothing; a CALL of one does. Each hook ends
 * stream order (stream_order.h) and forwards the call unchanged
 * (stream_order.c). cuGraphLaunch_ptsz, cuGraphUpload_ptsz and
 * cuGraphInstantiateWithParams_ptsz are in hook_list.h (graph_charge.c), which ends stream order the same way. */
#ifndef VS_HOOK_LIST_PTDS_H
#define VS_HOOK_LIST_PTDS_H

#define VS_PTDS_HOOKS(X) \
  X(cuMemPrefetchAsync_v2_ptsz, (CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream), (devPtr, count, location, flags, hStream)) \
  X(cuMemPrefetchBatchAsync_ptsz, (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream)) \
  X(cuMemDiscardBatchAsync_ptsz, (CUdeviceptr *dptrs, size_t *sizes, size_t count, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, flags, hStream)) \
  X(cuMemDiscardAndPrefetchBatchAsync_ptsz, (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream), (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream)) \
  X(cuMemcpyHtoD_v2_ptds, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), (dstDevice, srcHost, ByteCount)) \
  X(cuMemcpyDtoH_v2_ptds, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), (dstHost, srcDevice, ByteCount)) \
  X(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount), (dstDevice, srcDevice, ByteCount)) \
  X(cuMemcpyDtoA_v2_ptds, (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount), (dstArray, dstOffset, srcDevice, ByteCount)) \
  X(cuMemcpyAtoD_v2_ptds, (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstDevice, srcArray, srcOffset, ByteCount)) \
  X(cuMemcpyHtoA_v2_ptds, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount), (dstArray, dstOffset, srcHost, ByteCount)) \
  X(cuMemcpyAtoH_v2_ptds, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstHost, srcArray, srcOffset, ByteCount)) \
  X(cuMemcpyAtoA_v2_ptds, (CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount), (dstArray, dstOffset, srcArray, srcOffset, ByteCount)) \
  X(cuMemcpyHtoAAsync_v2_ptsz, (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream), (dstArray, dstOffset, srcHost, ByteCount, hStream)) \
  X(cuMemcpyAtoHAsync_v2_ptsz, (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream), (dstHost, srcArray, srcOffset, ByteCount, hStream)) \
  X(cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *pCopy), (pCopy)) \
  X(cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *pCopy), (pCopy)) \
  X(cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *pCopy), (pCopy)) \
  X(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream), (dstDevice, srcHost, ByteCount, hStream)) \
  X(cuMemcpyDtoHAsync_v2_ptsz, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), (dstHost, srcDevice, ByteCount, hStream)) \
  X(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream), (dstDevice, srcDevice, ByteCount, hStream)) \
  X(cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *pCopy, CUstream hStream), (pCopy, hStream)) \
  X(cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *pCopy, CUstream hStream), (pCopy, hStream)) \
  X(cuMemcpyBatchAsync_v2_ptsz, (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream)) \
  X(cuMemcpy3DBatchAsync_v2_ptsz, (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags, CUstream hStream), (numOps, opList, flags, hStream)) \
  X(cuMemsetD8_v2_ptds, (CUdeviceptr dstDevice, unsigned char uc, size_t N), (dstDevice, uc, N)) \
  X(cuMemsetD16_v2_ptds, (CUdeviceptr dstDevice, unsigned short us, size_t N), (dstDevice, us, N)) \
  X(cuMemsetD32_v2_ptds, (CUdeviceptr dstDevice, unsigned int ui, size_t N), (dstDevice, ui, N)) \
  X(cuMemsetD2D8_v2_ptds, (CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height), (dstDevice, dstPitch, uc, Width, Height)) \
  X(cuMemsetD2D16_v2_ptds, (CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height), (dstDevice, dstPitch, us, Width, Height)) \
  X(cuMemsetD2D32_v2_ptds, (CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height), (dstDevice, dstPitch, ui, Width, Height)) \
  X(cuStreamWriteValue32_v2_ptsz, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags)) \
  X(cuStreamWaitValue32_v2_ptsz, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags)) \
  X(cuStreamWriteValue64_v2_ptsz, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags)) \
  X(cuStreamWaitValue64_v2_ptsz, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags)) \
  X(cuStreamBatchMemOp_v2_ptsz, (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray, unsigned int flags), (stream, count, paramArray, flags)) \
  X(cuStreamGetCaptureInfo_v3_ptsz, (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out), (hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out)) \
  X(cuStreamUpdateCaptureDependencies_v2_ptsz, (CUstream hStream, CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData, size_t numDependencies, unsigned int flags), (hStream, dependencies, dependencyData, numDependencies, flags)) \
  X(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), (dst, src, ByteCount)) \
  X(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream), (dst, src, ByteCount, hStream)) \
  X(cuMemcpyPeer_ptds, (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount), (dstDevice, dstContext, srcDevice, srcContext, ByteCount)) \
  X(cuMemcpyPeerAsync_ptsz, (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream), (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream)) \
  X(cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy)) \
  X(cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream)) \
  X(cuMemsetD8Async_ptsz, (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream), (dstDevice, uc, N, hStream)) \
  X(cuMemsetD16Async_ptsz, (CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream), (dstDevice, us, N, hStream)) \
  X(cuMemsetD32Async_ptsz, (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream), (dstDevice, ui, N, hStream)) \
  X(cuMemsetD2D8Async_ptsz, (CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch, uc, Width, Height, hStream)) \
  X(cuMemsetD2D16Async_ptsz, (CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch, us, Width, Height, hStream)) \
  X(cuMemsetD2D32Async_ptsz, (CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height, CUstream hStream), (dstDevice, dstPitch, ui, Width, Height, hStream)) \
  X(cuStreamGetPriority_ptsz, (CUstream hStream, int *priority), (hStream, priority)) \
  X(cuStreamGetId_ptsz, (CUstream hStream, unsigned long long *streamId), (hStream, streamId)) \
  X(cuStreamGetFlags_ptsz, (CUstream hStream, unsigned int *flags), (hStream, flags)) \
  X(cuStreamGetDevice_ptsz, (CUstream hStream, CUdevice *device), (hStream, device)) \
  X(cuStreamGetCtx_ptsz, (CUstream hStream, CUcontext *pctx), (hStream, pctx)) \
  X(cuStreamGetCtx_v2_ptsz, (CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx), (hStream, pCtx, pGreenCtx)) \
  X(cuStreamWaitEvent_ptsz, (CUstream hStream, CUevent hEvent, unsigned int Flags), (hStream, hEvent, Flags)) \
  X(cuStreamIsCapturing_ptsz, (CUstream hStream, CUstreamCaptureStatus *captureStatus), (hStream, captureStatus)) \
  X(cuStreamAddCallback_ptsz, (CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags), (hStream, callback, userData, flags)) \
  X(cuStreamAttachMemAsync_ptsz, (CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags), (hStream, dptr, length, flags)) \
  X(cuStreamQuery_ptsz, (CUstream hStream), (hStream)) \
  X(cuStreamSynchronize_ptsz, (CUstream hStream), (hStream)) \
  X(cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream), (hEvent, hStream)) \
  X(cuEventRecordWithFlags_ptsz, (CUevent hEvent, CUstream hStream, unsigned int flags), (hEvent, hStream, flags)) \
  X(cuLaunchKernel_ptsz, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra), (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra)) \
  X(cuLaunchKernelEx_ptsz, (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra), (config, f, kernelParams, extra)) \
  X(cuLaunchHostFunc_ptsz, (CUstream hStream, CUhostFn fn, void *userData), (hStream, fn, userData)) \
  X(cuGraphicsMapResources_ptsz, (unsigned int count, CUgraphicsResource *resources, CUstream hStream), (count, resources, hStream)) \
  X(cuGraphicsUnmapResources_ptsz, (unsigned int count, CUgraphicsResource *resources, CUstream hStream), (count, resources, hStream)) \
  X(cuLaunchCooperativeKernel_ptsz, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void **kernelParams), (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams)) \
  X(cuSignalExternalSemaphoresAsync_ptsz, (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray, unsigned int numExtSems, CUstream stream), (extSemArray, paramsArray, numExtSems, stream)) \
  X(cuWaitExternalSemaphoresAsync_ptsz, (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray, unsigned int numExtSems, CUstream stream), (extSemArray, paramsArray, numExtSems, stream)) \
  X(cuStreamCopyAttributes_ptsz, (CUstream dst, CUstream src), (dst, src)) \
  X(cuStreamGetAttribute_ptsz, (CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value_out), (hStream, attr, value_out)) \
  X(cuStreamSetAttribute_ptsz, (CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue *value), (hStream, attr, value)) \
  X(cuMemMapArrayAsync_ptsz, (CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream), (mapInfoList, count, hStream)) \
  X(cuMemBatchDecompressAsync_ptsz, (CUmemDecompressParams *paramsArray, size_t count, unsigned int flags, size_t *errorIndex, CUstream stream), (paramsArray, count, flags, errorIndex, stream)) \
  X(cuMemcpyBatchAsync_ptsz, (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx, CUstream hStream), (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream)) \
  X(cuMemcpy3DBatchAsync_ptsz, (size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx, unsigned long long flags, CUstream hStream), (numOps, opList, failIdx, flags, hStream)) \
  X(cuStreamWriteValue32_ptsz, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags)) \
  X(cuStreamWaitValue32_ptsz, (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags), (stream, addr, value, flags)) \
  X(cuStreamWriteValue64_ptsz, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags)) \
  X(cuStreamWaitValue64_ptsz, (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags), (stream, addr, value, flags)) \
  X(cuStreamBatchMemOp_ptsz, (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray, unsigned int flags), (stream, count, paramArray, flags)) \
  X(cuMemPrefetchAsync_ptsz, (CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream), (devPtr, count, dstDevice, hStream)) \
  X(cuStreamGetCaptureInfo_ptsz, (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out), (hStream, captureStatus_out, id_out)) \
  X(cuStreamGetCaptureInfo_v2_ptsz, (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out, size_t *numDependencies_out), (hStream, captureStatus_out, id_out, graph_out, dependencies_out, numDependencies_out)) \
  X(cuStreamUpdateCaptureDependencies_ptsz, (CUstream hStream, CUgraphNode *dependencies, size_t numDependencies, unsigned int flags), (hStream, dependencies, numDependencies, flags))


#endif

/* cuGetProcAddress / cuGetProcAddress_v2 over one table.
 *
 * Each row: (symbol, version it appeared in, default-stream variant,
 * per-thread-default-stream variant or NULL). A request (symbol,
 * cudaVersion, flags) takes the newest row of that symbol whose version is
 * <= cudaVersion, like the driver; with CU_GET_PROC_ADDRESS_PER_THREAD_
 * DEFAULT_STREAM at cudaVersion >= 7000 it takes the _ptds/_ptsz variant
 * when the row has one. A known symbol asked for at too old a version is
 * VERSION_NOT_SUFFICIENT; anything else unknown is SYMBOL_NOT_FOUND, both
 * with CUDA_ERROR_NOT_FOUND and *pfn = NULL. */
#include "sim_internal.h"
#include <stdlib.h>
#include <string.h>

struct proc_row {
    const char *sym;
    int version;
    void *fn;
    void *fn_pt;
};

#define R(s, v, f) {#s, v, (void *)f, NULL},
#define RP(s, v, f, p) {#s, v, (void *)f, (void *)p},

static const struct proc_row rows[] = {
    /* initialisation, errors, lookup */
    R(cuInit, 2000, cuInit)
    R(cuDriverGetVersion, 2020, cuDriverGetVersion)
    R(cuGetErrorString, 6000, cuGetErrorString)
    R(cuGetErrorName, 6000, cuGetErrorName)
    R(cuGetExportTable, 3000, cuGetExportTable)
    R(cuGetProcAddress, 11030, cuGetProcAddress)
    R(cuGetProcAddress, 12000, cuGetProcAddress_v2)
    /* devices */
    R(cuDeviceGetCount, 2000, cuDeviceGetCount)
    R(cuDeviceGet, 2000, cuDeviceGet)
    R(cuDeviceGetName, 2000, cuDeviceGetName)
    R(cuDeviceGetUuid, 9020, cuDeviceGetUuid)
    R(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2)
    R(cuDeviceGetLuid, 10000, cuDeviceGetLuid)
    R(cuDeviceTotalMem, 2000, cuDeviceTotalMem)
    R(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2)
    R(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute)
    R(cuDeviceComputeCapability, 2000, cuDeviceComputeCapability)
    R(cuDeviceGetPCIBusId, 4010, cuDeviceGetPCIBusId)
    R(cuDeviceGetByPCIBusId, 4010, cuDeviceGetByPCIBusId)
    R(cuDeviceCanAccessPeer, 4000, cuDeviceCanAccessPeer)
    R(cuCtxEnablePeerAccess, 4000, cuCtxEnablePeerAccess)
    R(cuCtxDisablePeerAccess, 4000, cuCtxDisablePeerAccess)
    /* contexts */
    R(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain)
    R(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease)
    R(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2)
    R(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState)
    R(cuDevicePrimaryCtxSetFlags, 7000, cuDevicePrimaryCtxSetFlags)
    R(cuDevicePrimaryCtxSetFlags, 11000, cuDevicePrimaryCtxSetFlags_v2)
    R(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset)
    R(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2)
    R(cuCtxCreate, 2000, cuCtxCreate)
    R(cuCtxCreate, 3020, cuCtxCreate_v2)
    R(cuCtxCreate, 11040, cuCtxCreate_v3)
    R(cuCtxCreate, 12050, cuCtxCreate_v4)
    R(cuCtxDestroy, 2000, cuCtxDestroy)
    R(cuCtxDestroy, 4000, cuCtxDestroy_v2)
    R(cuCtxGetCurrent, 4000, cuCtxGetCurrent)
    R(cuCtxSetCurrent, 4000, cuCtxSetCurrent)
    R(cuCtxPushCurrent, 2000, cuCtxPushCurrent)
    R(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2)
    R(cuCtxPopCurrent, 2000, cuCtxPopCurrent)
    R(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2)
    R(cuCtxGetDevice, 2000, cuCtxGetDevice)
    R(cuCtxGetDevice, 13000, cuCtxGetDevice_v2)
    R(cuCtxGetFlags, 7000, cuCtxGetFlags)
    R(cuCtxSetFlags, 12010, cuCtxSetFlags)
    R(cuCtxGetApiVersion, 3020, cuCtxGetApiVersion)
    R(cuCtxSynchronize, 2000, cuCtxSynchronize)
    R(cuCtxSynchronize, 13000, cuCtxSynchronize_v2)
    R(cuCtxGetStreamPriorityRange, 5050, cuCtxGetStreamPriorityRange)
    R(cuCtxGetLimit, 3010, cuCtxGetLimit)
    R(cuCtxSetLimit, 3010, cuCtxSetLimit)
    /* memory */
    R(cuMemAlloc, 2000, cuMemAlloc)
    R(cuMemAlloc, 3020, cuMemAlloc_v2)
    R(cuMemAllocPitch, 2000, cuMemAllocPitch)
    R(cuMemAllocPitch, 3020, cuMemAllocPitch_v2)
    R(cuMemAllocManaged, 6000, cuMemAllocManaged)
    R(cuArrayCreate, 3020, cuArrayCreate_v2)
    R(cuArray3DCreate, 3020, cuArray3DCreate_v2)
    R(cuArrayDestroy, 2000, cuArrayDestroy)
    R(cuArrayGetDescriptor, 3020, cuArrayGetDescriptor_v2)
    R(cuArray3DGetDescriptor, 3020, cuArray3DGetDescriptor_v2)
    R(cuMipmappedArrayCreate, 5000, cuMipmappedArrayCreate)
    R(cuMipmappedArrayDestroy, 5000, cuMipmappedArrayDestroy)
    R(cuMemFree, 2000, cuMemFree)
    R(cuMemFree, 3020, cuMemFree_v2)
    R(cuMemGetInfo, 2000, cuMemGetInfo)
    R(cuMemGetInfo, 3020, cuMemGetInfo_v2)
    R(cuMemGetAddressRange, 2000, cuMemGetAddressRange)
    R(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2)
    R(cuMemAllocHost, 2000, cuMemAllocHost)
    R(cuMemAllocHost, 3020, cuMemAllocHost_v2)
    R(cuMemHostAlloc, 2020, cuMemHostAlloc)
    R(cuMemFreeHost, 2000, cuMemFreeHost)
    R(cuMemHostGetDevicePointer, 2020, cuMemHostGetDevicePointer)
    R(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2)
    R(cuMemHostGetFlags, 2030, cuMemHostGetFlags)
    R(cuPointerSetAttribute, 6000, cuPointerSetAttribute)
    R(cuPointerGetAttribute, 4000, cuPointerGetAttribute)
    R(cuPointerGetAttributes, 7000, cuPointerGetAttributes)
    /* copies and sets */
    R(cuMemcpyHtoD, 2000, cuMemcpyHtoD)
    RP(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds)
    R(cuMemcpyDtoH, 2000, cuMemcpyDtoH)
    RP(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds)
    R(cuMemcpyDtoD, 2000, cuMemcpyDtoD)
    RP(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds)
    R(cuMemcpyHtoDAsync, 2000, cuMemcpyHtoDAsync)
    RP(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz)
    R(cuMemcpyDtoHAsync, 2000, cuMemcpyDtoHAsync)
    RP(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz)
    R(cuMemcpyDtoDAsync, 3000, cuMemcpyDtoDAsync)
    RP(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz)
    RP(cuMemcpy, 4000, cuMemcpy, cuMemcpy_ptds)
    RP(cuMemcpyAsync, 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz)
    R(cuMemsetD8, 2000, cuMemsetD8)
    RP(cuMemsetD8, 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds)
    R(cuMemsetD16, 2000, cuMemsetD16)
    RP(cuMemsetD16, 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds)
    R(cuMemsetD32, 2000, cuMemsetD32)
    RP(cuMemsetD32, 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds)
    RP(cuMemsetD8Async, 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz)
    RP(cuMemsetD16Async, 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz)
    RP(cuMemsetD32Async, 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz)
    /* streams and events */
    R(cuStreamCreate, 2000, cuStreamCreate)
    R(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority)
    R(cuStreamDestroy, 2000, cuStreamDestroy)
    R(cuStreamDestroy, 4000, cuStreamDestroy_v2)
    RP(cuStreamSynchronize, 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz)
    RP(cuStreamQuery, 2000, cuStreamQuery, cuStreamQuery_ptsz)
    RP(cuStreamWaitEvent, 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz)
    RP(cuStreamGetPriority, 5050, cuStreamGetPriority, cuStreamGetPriority_ptsz)
    RP(cuStreamGetFlags, 5050, cuStreamGetFlags, cuStreamGetFlags_ptsz)
    RP(cuStreamGetCtx, 9020, cuStreamGetCtx, cuStreamGetCtx_ptsz)
    RP(cuStreamGetCtx, 12050, cuStreamGetCtx_v2, cuStreamGetCtx_v2_ptsz)
    RP(cuStreamIsCapturing, 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz)
    RP(cuStreamBeginCapture, 10000, cuStreamBeginCapture, cuStreamBeginCapture_ptsz)
    RP(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz)
    RP(cuStreamEndCapture, 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz)
    RP(cuStreamAddCallback, 5000, cuStreamAddCallback, cuStreamAddCallback_ptsz)
    RP(cuLaunchHostFunc, 10000, cuLaunchHostFunc, cuLaunchHostFunc_ptsz)
    R(cuEventCreate, 2000, cuEventCreate)
    RP(cuEventRecord, 2000, cuEventRecord, cuEventRecord_ptsz)
    RP(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz)
    R(cuEventQuery, 2000, cuEventQuery)
    R(cuEventSynchronize, 2000, cuEventSynchronize)
    R(cuEventDestroy, 2000, cuEventDestroy)
    R(cuEventDestroy, 4000, cuEventDestroy_v2)
    R(cuEventElapsedTime, 2000, cuEventElapsedTime)
    R(cuEventElapsedTime, 12080, cuEventElapsedTime_v2)
    /* stream-ordered allocation and pools */
    RP(cuMemAllocAsync, 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz)
    RP(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz)
    RP(cuMemFreeAsync, 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz)
    R(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool)
    R(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool)
    R(cuDeviceSetMemPool, 11020, cuDeviceSetMemPool)
    R(cuMemPoolCreate, 11020, cuMemPoolCreate)
    R(cuMemPoolDestroy, 11020, cuMemPoolDestroy)
    R(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo)
    R(cuMemPoolSetAttribute, 11020, cuMemPoolSetAttribute)
    R(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute)
    R(cuMemPoolSetAccess, 11020, cuMemPoolSetAccess)
    R(cuMemPoolGetAccess, 11020, cuMemPoolGetAccess)
    R(cuMemPoolExportToShareableHandle, 11020, cuMemPoolExportToShareableHandle)
    R(cuMemPoolImportFromShareableHandle, 11020, cuMemPoolImportFromShareableHandle)
    R(cuMemPoolExportPointer, 11020, cuMemPoolExportPointer)
    R(cuMemPoolImportPointer, 11020, cuMemPoolImportPointer)
    /* graphs: their memory nodes (graph.c); "cuGraphInstantiate" is the
     * flags signature from CUDA 12 on, as cuda.h maps it */
    R(cuGraphCreate, 10000, cuGraphCreate)
    R(cuGraphDestroy, 10000, cuGraphDestroy)
    R(cuGraphAddMemAllocNode, 11040, cuGraphAddMemAllocNode)
    R(cuGraphAddMemFreeNode, 11040, cuGraphAddMemFreeNode)
    R(cuGraphAddNode, 12020, cuGraphAddNode)
    R(cuGraphAddNode, 12030, cuGraphAddNode_v2)
    R(cuGraphInstantiate, 10000, cuGraphInstantiate)
    R(cuGraphInstantiate, 11000, cuGraphInstantiate_v2)
    R(cuGraphInstantiate, 12000, cuGraphInstantiateWithFlags)
    R(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags)
    RP(cuGraphInstantiateWithParams, 12000, cuGraphInstantiateWithParams, cuGraphInstantiateWithParams_ptsz)
    RP(cuGraphLaunch, 10000, cuGraphLaunch, cuGraphLaunch_ptsz)
    RP(cuGraphUpload, 11010, cuGraphUpload, cuGraphUpload_ptsz)
    R(cuGraphExecDestroy, 10000, cuGraphExecDestroy)
    R(cuGraphGetNodes, 10000, cuGraphGetNodes)
    R(cuGraphNodeGetType, 10000, cuGraphNodeGetType)
    R(cuGraphMemAllocNodeGetParams, 11040, cuGraphMemAllocNodeGetParams)
    R(cuDeviceGraphMemTrim, 11040, cuDeviceGraphMemTrim)
    R(cuDeviceGetGraphMemAttribute, 11040, cuDeviceGetGraphMemAttribute)
    R(cuDeviceSetGraphMemAttribute, 11040, cuDeviceSetGraphMemAttribute)
    /* virtual memory management */
    R(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity)
    R(cuMemAddressReserve, 10020, cuMemAddressReserve)
    R(cuMemAddressFree, 10020, cuMemAddressFree)
    R(cuMemCreate, 10020, cuMemCreate)
    R(cuMemRelease, 10020, cuMemRelease)
    R(cuMemMap, 10020, cuMemMap)
    R(cuMemUnmap, 10020, cuMemUnmap)
    R(cuMemSetAccess, 10020, cuMemSetAccess)
    R(cuMemGetAccess, 10020, cuMemGetAccess)
    R(cuMemGetAllocationPropertiesFromHandle, 10020, cuMemGetAllocationPropertiesFromHandle)
    R(cuMemRetainAllocationHandle, 11000, cuMemRetainAllocationHandle)
    R(cuMemExportToShareableHandle, 10020, cuMemExportToShareableHandle)
    R(cuMemImportFromShareableHandle, 10020, cuMemImportFromShareableHandle)
    /* IPC */
    R(cuIpcGetMemHandle, 4010, cuIpcGetMemHandle)
    R(cuIpcOpenMemHandle, 4010, cuIpcOpenMemHandle)
    R(cuIpcOpenMemHandle, 11000, cuIpcOpenMemHandle_v2)
    R(cuIpcCloseMemHandle, 4010, cuIpcCloseMemHandle)
};

/* ---- stubs: what cuda.h declares and the sim does not model ----
 * (sim_stubs.c, generated by gen_stubs.sh). A symbol no row knows is
 * answered from them, at any version: the per-thread variant when asked
 * for one and it exists, otherwise the newest _vN variant, otherwise the
 * plain name. They all return CUDA_ERROR_NOT_SUPPORTED. */
_Static_assert(CUDA_ERROR_NOT_SUPPORTED == 801, "the stubs' return value");

/* Length of name's base (without _vN and _ptds/_ptsz); *v = N (1 for none), *pt = per-thread. */
static size_t stub_base(const char *name, int *v, int *pt)
{
    size_t n = strlen(name);
    *pt = n > 5 && (!strcmp(name + n - 5, "_ptds") || !strcmp(name + n - 5, "_ptsz"));
    if (*pt) n -= 5;
    *v = 1;
    size_t d = n;
    while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9') d--;
    if (d < n && d >= 2 && name[d - 1] == 'v' && name[d - 2] == '_') {
        *v = atoi(name + d);
        n = d - 2;
    }
    return n;
}

static void *stub_lookup(const char *symbol, int per_thread)
{
    void *best = NULL, *best_pt = NULL;
    int best_v = 0, best_pt_v = 0;
    size_t len = strlen(symbol);
    for (unsigned i = 0; i < sim_stub_count; i++) {
        int v, pt;
        size_t n = stub_base(sim_stub_names[i], &v, &pt);
        if (n != len || strncmp(sim_stub_names[i], symbol, len) != 0) continue;
        if (pt && v > best_pt_v) {
            best_pt = sim_stub_fns[i];
            best_pt_v = v;
        } else if (!pt && v > best_v) {
            best = sim_stub_fns[i];
            best_v = v;
        }
    }
    return per_thread && best_pt ? best_pt : best ? best : best_pt;
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    const struct proc_row *best = NULL;
    if (symbol) {
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            if (strcmp(rows[i].sym, symbol) != 0) continue;
            st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
            if (rows[i].version <= version && (!best || rows[i].version > best->version))
                best = &rows[i];
        }
    }
    int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
                     !(flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM) && version >= 7000;
    void *stub = !best && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && symbol ? stub_lookup(symbol, per_thread) : NULL;
    if (stub) {
        *pfn = stub;
        if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    if (!best) {
        *pfn = NULL;
        if (status) *status = st;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = per_thread && best->fn_pt ? best->fn_pt : best->fn;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    SIM_COUNT(cuGetProcAddress_v2);
    if (!symbol || !pfn || (flags & ~(cuuint64_t)3)) {
        if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_INVALID_VALUE;
    }
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* What cuda.h names cuGetProcAddress_v2 under per-thread default streams:
 * the same lookup. */
SIM_API CUresult cuGetProcAddress_v2_ptsz(const char *symbol, void **pfn, int cudaVersion,
                                          cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    SIM_COUNT(cuGetProcAddress_v2_ptsz);
    if (!symbol || !pfn || (flags & ~(cuuint64_t)3)) {
        if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_INVALID_VALUE;
    }
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

SIM_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    SIM_COUNT(cuGetProcAddress);
    if (!symbol || !pfn || (flags & ~(cuuint64_t)3)) return CUDA_ERROR_INVALID_VALUE;
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

/* Hooks of the allocation and free paths: classic, pitch, managed and
 * stream-ordered (legacy and per-thread stream). Each calls exactly the
 * driver variant the program called, through the memory service. */
#include "hook_common.h"

#include "stream_alloc.h"
#include "stream_order.h"

#define CARD vs_driver_current_card(real)

/* ---- cuMemAlloc --------------------------------------------------------- */
#define DRIVER_ARGS (dptr, bytesize)
CUresult vs_hook_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  ALLOC_BODY(cuMemAlloc_v2, VS_MEM_DEVICE, VRAMSHIM_CALL_MEM_ALLOC, dptr, CUdeviceptr, bytesize, CARD,
             real->cuMemAlloc_v2(dptr, bytesize));
}
CUresult vs_hook_cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
  ALLOC_BODY(cuMemAlloc, VS_MEM_DEVICE_V1, VRAMSHIM_CALL_MEM_ALLOC, dptr, CUdeviceptr_v1, bytesize, CARD,
             real->cuMemAlloc(dptr, bytesize));
}
#undef DRIVER_ARGS

/* ---- cuMemAllocManaged -------------------------------------------------- */
#define DRIVER_ARGS (dptr, bytesize, flags)
CUresult vs_hook_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  ALLOC_BODY(cuMemAllocManaged, VS_MEM_MANAGED, VRAMSHIM_CALL_MEM_ALLOC_MANAGED, dptr, CUdeviceptr, bytesize,
             CARD, real->cuMemAllocManaged(dptr, bytesize, flags));
}
#undef DRIVER_ARGS

/* ---- cuMemAllocAsync / cuMemAllocFromPoolAsync -------------------------- */
/* On a stream capturing a graph: a node of the graph, no memory yet
 * (per_thread: the hook is a _ptsz one). */
#undef ALLOC_UNACCOUNTED
#define ALLOC_UNACCOUNTED vs_stream_alloc_captured(real, hStream, per_thread)
#define DRIVER_ARGS (dptr, bytesize, hStream)
/* Served by the arena where stream_alloc.h says so (the legacy stream: its lane). */
#define STREAM_BEGIN(ptsz) \
  vs_mem_alloc_stream_begin(&op, CARD, bytesize, VRAMSHIM_CALL_MEM_ALLOC_ASYNC,                      \
                            vs_stream_alloc_route(real, hStream, ptsz), hStream)
CUresult vs_hook_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  VS_STREAM_SEEN(hStream, 0);
  const int per_thread = 0;
  ALLOC_BODY_BEGIN(cuMemAllocAsync, STREAM_BEGIN(0), dptr, CUdeviceptr, real->cuMemAllocAsync(dptr, bytesize, hStream));
}
CUresult vs_hook_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  VS_STREAM_SEEN(hStream, 1);
  const int per_thread = 1;
  ALLOC_BODY_BEGIN(cuMemAllocAsync_ptsz, STREAM_BEGIN(1), dptr, CUdeviceptr,
                   real->cuMemAllocAsync_ptsz(dptr, bytesize, hStream));
}
#undef STREAM_BEGIN
#undef DRIVER_ARGS
#define DRIVER_ARGS (dptr, bytesize, pool, hStream)
/* Charged by what the pool grows (pool_charge.h). */
#define POOL_BEGIN vs_mem_alloc_pool_begin(&op, CARD, bytesize, VRAMSHIM_CALL_MEM_ALLOC_ASYNC, pool)
CUresult vs_hook_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  VS_STREAM_SEEN(hStream, 0);
  const int per_thread = 0;
  ALLOC_BODY_BEGIN(cuMemAllocFromPoolAsync, POOL_BEGIN, dptr, CUdeviceptr,
                   real->cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream));
}
CUresult vs_hook_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream) {
  VS_STREAM_SEEN(hStream, 1);
  const int per_thread = 1;
  ALLOC_BODY_BEGIN(cuMemAllocFromPoolAsync_ptsz, POOL_BEGIN, dptr, CUdeviceptr,
                   real->cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream));
}
#undef POOL_BEGIN
#undef DRIVER_ARGS
#undef ALLOC_UNACCOUNTED
#define ALLOC_UNACCOUNTED 0

/* ---- cuMemAllocPitch: the size is known after the call ------------------ */
/* The service never serves a pitch request itself (it would have to choose
 * the pitch); VS_MEM_DONE here can only be a refusal. Arguments the driver
 * refuses (cuda.h: the element size is 4, 8 or 16 bytes; an empty extent)
 * go to it unaccounted, for its own error. */
static int pitch_args_ok(uint64_t width, uint64_t height, unsigned elem) {
  return width && height && (elem == 4 || elem == 8 || elem == 16);
}

/* What the driver will take, charged before it is asked: rows padded to 512
 * bytes, the pitch cards have given since Kepler (and the sim's). Charging
 * the bare width let a narrow allocation take up to twice its charge past
 * the limit; a driver padding further still gets the rest charged after. */
#define VS_PITCH_ALIGN 512u
static uint64_t pitch_estimate(uint64_t width, uint64_t height) {
  return (width + VS_PITCH_ALIGN - 1) / VS_PITCH_ALIGN * VS_PITCH_ALIGN * height;
}

#define PITCH_BODY(name)                                                                      \
  VS_HOOK_ENTER(name, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));                \
  if (!dptr || !pPitch || !pitch_args_ok(WidthInBytes, Height, ElementSizeBytes))             \
    VS_FORWARD(name, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));                 \
  vs_guard_enter();                                                                           \
  vs_mem_op op;                                                                               \
  CUresult r;                                                                                 \
  uint64_t estimate = pitch_estimate(WidthInBytes, Height);                                   \
  if (vs_mem_alloc_begin(&op, VS_MEM_PITCH, CARD, estimate, VRAMSHIM_CALL_MEM_ALLOC) == VS_MEM_DONE) { \
    r = op.result;                                                                            \
  } else {                                                                                    \
    r = real->name(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);                     \
    if (vs_mem_retry_refused(&op, r)) r = real->name(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); \
    r = vs_mem_alloc_end_sized(&op, r, r == CUDA_SUCCESS ? (uint64_t)*dptr : 0,               \
                               r == CUDA_SUCCESS ? (uint64_t)*pPitch * (uint64_t)Height : 0);  \
  }                                                                                           \
  vs_guard_leave();                                                                           \
  return r

CUresult vs_hook_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes) {
  PITCH_BODY(cuMemAllocPitch_v2);
}
CUresult vs_hook_cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                 unsigned int Height, unsigned int ElementSizeBytes) {
  PITCH_BODY(cuMemAllocPitch);
}

/* ---- frees ------------------------------------------------------------- */
#define DRIVER_ARGS (dptr)
CUresult vs_hook_cuMemFree_v2(CUdeviceptr dptr) {
  FREE_BODY(cuMemFree_v2, VS_SPACE_DEVPTR, VS_FREE_MEM_FREE, VRAMSHIM_CALL_MEM_FREE, (uint64_t)dptr, real->cuMemFree_v2(dptr));
}
CUresult vs_hook_cuMemFree(CUdeviceptr_v1 dptr) {
  FREE_BODY(cuMemFree, VS_SPACE_DEVPTR, VS_FREE_MEM_FREE, VRAMSHIM_CALL_MEM_FREE, (uint64_t)dptr, real->cuMemFree(dptr));
}
#undef DRIVER_ARGS
#define DRIVER_ARGS (dptr, hStream)
/* An arena block goes back on the lane from the legacy stream (stream_alloc.h). */
#define STREAM_FREE(ptsz) \
  vs_mem_free_stream_begin(&op, (uint64_t)dptr, VRAMSHIM_CALL_MEM_FREE_ASYNC, vs_stream_free_route(real, hStream, ptsz))
CUresult vs_hook_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  VS_STREAM_SEEN(hStream, 0);
  FREE_BODY_BEGIN(cuMemFreeAsync, STREAM_FREE(0), real->cuMemFreeAsync(dptr, hStream));
}
CUresult vs_hook_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  VS_STREAM_SEEN(hStream, 1);
  FREE_BODY_BEGIN(cuMemFreeAsync_ptsz, STREAM_FREE(1), real->cuMemFreeAsync_ptsz(dptr, hStream));
}
#undef STREAM_FREE
#undef DRIVER_ARGS

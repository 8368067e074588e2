/* A driver that does nothing: each entry point returns at once (device
 * "addresses" from a counter). Under vramshim-bench --driver it leaves the
 * shim's own cost per call alone in the numbers, without the simulated
 * driver's system calls and their noise. Not a CUDA driver for anything else. */
#include <cuda.h>
#include <string.h>

#define NULL_API __attribute__((visibility("default")))

static CUdeviceptr g_next = 0x100000000ULL;

NULL_API CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }
NULL_API CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  (void)dev;
  *ctx = (CUcontext)&g_next;
  return CUDA_SUCCESS;
}
NULL_API CUresult cuCtxSetCurrent(CUcontext ctx) { (void)ctx; return CUDA_SUCCESS; }
/* The shim asks whose context a request is in (its arenas are per context). */
NULL_API CUresult cuCtxGetCurrent(CUcontext *ctx) {
  *ctx = (CUcontext)&g_next;
  return CUDA_SUCCESS;
}
NULL_API CUresult cuCtxGetDevice(CUdevice *dev) {
  *dev = 0;
  return CUDA_SUCCESS;
}
NULL_API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  *p = __atomic_fetch_add(&g_next, (n + 511) & ~(size_t)511, __ATOMIC_RELAXED);
  return CUDA_SUCCESS;
}
NULL_API CUresult cuMemFree_v2(CUdeviceptr p) { return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
/* What the arena asks for itself: no VMM here, so it runs in chunks mode. */
NULL_API CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
NULL_API CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  (void)a;
  (void)d;
  *v = 0;
  return CUDA_SUCCESS;
}
NULL_API CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) {
  (void)d;
  *b = 2ULL << 30;
  return CUDA_SUCCESS;
}
NULL_API CUresult cuMemGetInfo_v2(size_t *f, size_t *t) {
  *f = 1ULL << 30;
  *t = 1ULL << 31;
  return CUDA_SUCCESS;
}
NULL_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p) {
  (void)a;
  (void)p;
  *(unsigned *)data = CU_MEMORYTYPE_DEVICE;
  return CUDA_SUCCESS;
}
NULL_API CUresult cuPointerGetAttributes(unsigned n, CUpointer_attribute *a, void **data, CUdeviceptr p) {
  (void)a;
  (void)p;
  for (unsigned i = 0; i < n; i++) *(unsigned *)data[i] = CU_MEMORYTYPE_DEVICE;
  return CUDA_SUCCESS;
}
NULL_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  if (base) *base = p;
  if (size) *size = 1;
  return CUDA_SUCCESS;
}
NULL_API CUresult cuGetProcAddress_v2(const char *sym, void **fn, int v, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult *st) {
  (void)v;
  (void)flags;
  *fn = !strcmp(sym, "cuMemAlloc") ? (void *)cuMemAlloc_v2 : !strcmp(sym, "cuMemFree") ? (void *)cuMemFree_v2 : NULL;
  if (st) *st = *fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

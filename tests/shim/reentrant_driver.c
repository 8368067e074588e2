/* A stand-in driver whose cuMemAllocManaged is built on its own exported
 * cuMemAlloc_v2, called through the PLT, as a driver may do. With the shim
 * preloaded that inner call lands on the shim's hook: the guard must pass it
 * straight through, so one program request is accounted once. */
#include <cuda.h>
#include <string.h>

#define API __attribute__((visibility("default")))

static CUdeviceptr g_next = 0x200000000ULL;

API CUresult cuCtxGetDevice(CUdevice *dev) {
  *dev = 1;
  return CUDA_SUCCESS;
}
API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  if (!p || !n) return CUDA_ERROR_INVALID_VALUE;
  *p = __atomic_fetch_add(&g_next, (n + 511) & ~(size_t)511, __ATOMIC_RELAXED);
  return CUDA_SUCCESS;
}
API CUresult cuMemFree_v2(CUdeviceptr p) { return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
/* The inner call goes through the PLT (default visibility, no -Bsymbolic). */
API CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int flags) {
  (void)flags;
  return cuMemAlloc_v2(p, n);
}

/* Its cuGetProcAddress answers with functions it does not export, as a
 * driver is free to: the shim cannot match them by address and must still
 * hand out its hooks (test "unexported"). */
static CUresult internal_alloc(CUdeviceptr *p, size_t n) { return cuMemAlloc_v2(p, n); }
static CUresult internal_free(CUdeviceptr p) { return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
static CUresult internal_ctx_get_device(CUdevice *dev) { return cuCtxGetDevice(dev); }

API CUresult cuGetProcAddress_v2(const char *sym, void **fn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status) {
  (void)flags;
  *fn = NULL;
  if (sym && version >= 3020 && !strcmp(sym, "cuMemAlloc")) *fn = (void *)internal_alloc;
  if (sym && version >= 3020 && !strcmp(sym, "cuMemFree")) *fn = (void *)internal_free;
  if (sym && !strcmp(sym, "cuCtxGetDevice")) *fn = (void *)internal_ctx_get_device;
  if (status) *status = *fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

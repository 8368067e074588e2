/* A probe, not a requirement: does the driver honour cuMemMap's `offset`?
 *
 * The CUDA 13 header describes mapping `size` bytes of a physical handle
 * from byte `offset` (a multiple of the granularity), but its parameter
 * note still says "currently must be zero". If drivers honour it, the VMM
 * arena could map the free granules of a handle that also backs live
 * blocks somewhere else (docs/arena.md, "what limits them"). The arena does
 * not rely on it; this program finds out, on the sim and, through
 * scripts/gpu-validate, on a real driver.
 *
 * One handle of 4 granules, mapped whole at A and, from granule 2 on, at B
 * (offset = 2 granules, size = 2 granules). If the driver accepts the
 * second mapping, bytes written through B must read back through A + 2
 * granules and the other way round, or the test fails; if it refuses, the
 * refusal is printed and the test passes (the driver simply lacks it). */
#include "shim_test.h"

#pragma weak cuMemCreate
#pragma weak cuMemRelease
#pragma weak cuMemMap
#pragma weak cuMemUnmap
#pragma weak cuMemSetAccess
#pragma weak cuMemAddressReserve
#pragma weak cuMemAddressFree
#pragma weak cuMemGetAllocationGranularity

static void fill(CUdeviceptr p, size_t n, unsigned char seed) {
  unsigned char *buf = malloc(n);
  T_CHECK(buf != NULL, "host memory");
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(seed + i * 13);
  T_CU(cuMemcpyHtoD(p, buf, n));
  free(buf);
}

static void expect(CUdeviceptr p, size_t n, unsigned char seed, const char *what) {
  unsigned char *buf = malloc(n);
  T_CHECK(buf != NULL, "host memory");
  T_CU(cuMemcpyDtoH(buf, p, n));
  for (size_t i = 0; i < n; i++)
    T_CHECK(buf[i] == (unsigned char)(seed + i * 13), "%s: byte %zu differs", what, i);
  free(buf);
}

int main(void) {
  CUcontext ctx = t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  (void)ctx;
  CUmemAllocationProp prop = t_device_prop(0);
  size_t g = 0;
  if (!cuMemGetAllocationGranularity ||
      cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !g) {
    T_SAY("SKIP: the driver has no VMM granularity");
    return 77;
  }
  CUmemGenericAllocationHandle h;
  CUresult r = cuMemCreate(&h, 4 * g, &prop, 0);
  if (r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_NOT_SUPPORTED) {
    T_SAY("SKIP: the driver lacks cuMemCreate (%d)", (int)r);
    return 77;
  }
  T_CHECK(r == CUDA_SUCCESS, "cuMemCreate: %d", (int)r);
  CUdeviceptr a, b;
  T_CU(cuMemAddressReserve(&a, 4 * g, 0, 0, 0));
  T_CU(cuMemAddressReserve(&b, 2 * g, 0, 0, 0));
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  T_CU(cuMemMap(a, 4 * g, 0, h, 0));
  T_CU(cuMemSetAccess(a, 4 * g, &acc, 1));
  fill(a, 4 * g, 1);

  r = cuMemMap(b, 2 * g, 2 * g, h, 0);
  if (r != CUDA_SUCCESS) {
    const char *name = NULL;
    cuGetErrorName(r, &name);
    T_SAY("cuMemMap with offset %zu: refused, %s (%d) -- the driver maps handles from offset 0 only", 2 * g,
          name ? name : "?", (int)r);
  } else {
    T_CU(cuMemSetAccess(b, 2 * g, &acc, 1));
    expect(b, 2 * g, (unsigned char)(1 + (2 * g) * 13), "the alias shows the handle's second half");
    fill(b, 2 * g, 7);
    expect(a + 2 * g, 2 * g, 7, "writes through the alias land in the handle");
    expect(b, 2 * g, 7, "the alias reads its own writes");
    T_CU(cuMemUnmap(b, 2 * g));
    T_SAY("cuMemMap with offset %zu: honoured -- the same bytes at both addresses", 2 * g);
  }
  T_CU(cuMemUnmap(a, 4 * g));
  T_CU(cuMemRelease(h));
  T_CU(cuMemAddressFree(b, 2 * g));
  T_CU(cuMemAddressFree(a, 4 * g));
  T_SAY("PASS");
  return 0;
}

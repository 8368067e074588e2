/* A program linked with the driver's import library: nvcuda.dll is in its
 * import table, resolved by the loader before the shim is injected, so
 * only the import-table patch puts the shim on this path. */
#include <cuda.h>
#include <stdio.h>
#include <windows.h>

#include "interposed.h"

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  int fails = 0;
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr p = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
      cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    printf("client_import: FAIL: cuInit/cuDeviceGet/cuDevicePrimaryCtxRetain/cuCtxSetCurrent\n");
    fails++;
  }
  CUresult r = cuMemAlloc(&p, 1 << 20);   /* cuda.h maps it to cuMemAlloc_v2 */
  if (r != CUDA_SUCCESS || !p) {
    printf("client_import: FAIL: cuMemAlloc = %d\n", (int)r);
    fails++;
  } else if (cuMemFree(p) != CUDA_SUCCESS) {
    printf("client_import: FAIL: cuMemFree\n");
    fails++;
  }
  return interposed("client_import", fails, NULL, 0);
}

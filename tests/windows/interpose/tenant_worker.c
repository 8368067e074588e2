/* A tenant's process for the three-tenant test (three_tenants.c), run under
 * `vramshim.exe run --tenant T --config F`: it loads the driver by its plain
 * name and obeys one command per line on stdin, answering one line on
 * stdout that starts with "@ " (the shim's own messages go to stderr):
 *   alloc MIB  cuMemAlloc_v2 of MIB MiB   -> "@ ok SLOT" or "@ err CODE"
 *   free SLOT  cuMemFree_v2 of that block  -> "@ freed" or "@ err CODE"
 *   info       cuMemGetInfo_v2            -> "@ info FREE TOTAL" (bytes)
 *   quit       frees nothing, exits 0 (the shim gives back at exit)
 * The first line is "@ ready pid=N shim=yes|no". */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*dev_get_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_ctx_fn)(CUcontext);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*info_fn)(size_t *, size_t *);

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  HMODULE drv = LoadLibraryA("nvcuda.dll");
  init_fn cu_init = drv ? (init_fn)(void *)GetProcAddress(drv, "cuInit") : NULL;
  dev_get_fn dev_get = drv ? (dev_get_fn)(void *)GetProcAddress(drv, "cuDeviceGet") : NULL;
  retain_fn retain = drv ? (retain_fn)(void *)GetProcAddress(drv, "cuDevicePrimaryCtxRetain") : NULL;
  set_ctx_fn set_ctx = drv ? (set_ctx_fn)(void *)GetProcAddress(drv, "cuCtxSetCurrent") : NULL;
  alloc_fn alloc = drv ? (alloc_fn)(void *)GetProcAddress(drv, "cuMemAlloc_v2") : NULL;
  free_fn release = drv ? (free_fn)(void *)GetProcAddress(drv, "cuMemFree_v2") : NULL;
  info_fn info = drv ? (info_fn)(void *)GetProcAddress(drv, "cuMemGetInfo_v2") : NULL;
  CUdevice dev;
  CUcontext ctx;
  if (!cu_init || !dev_get || !retain || !set_ctx || !alloc || !release || !info || cu_init(0) != CUDA_SUCCESS ||
      dev_get(&dev, 0) != CUDA_SUCCESS || retain(&ctx, dev) != CUDA_SUCCESS || set_ctx(ctx) != CUDA_SUCCESS) {
    printf("@ fail the driver did not start\n");
    return 1;
  }
  printf("@ ready pid=%lu shim=%s\n", (unsigned long)GetCurrentProcessId(),
         GetModuleHandleW(L"vramshim.dll") ? "yes" : "no");
  CUdeviceptr slots[64] = {0};
  char line[128];
  while (fgets(line, sizeof line, stdin)) {
    unsigned long n = 0;
    if (sscanf(line, "alloc %lu", &n) == 1) {
      int s = 0;
      while (s < 64 && slots[s]) s++;
      CUdeviceptr p = 0;
      CUresult r = s < 64 ? alloc(&p, (size_t)n << 20) : CUDA_ERROR_INVALID_VALUE;
      if (r == CUDA_SUCCESS) {
        slots[s] = p;
        printf("@ ok %d\n", s);
      } else {
        printf("@ err %d\n", (int)r);
      }
    } else if (sscanf(line, "free %lu", &n) == 1) {
      CUresult r = n < 64 && slots[n] ? release(slots[n]) : CUDA_ERROR_INVALID_VALUE;
      if (r == CUDA_SUCCESS) slots[n] = 0;
      printf(r == CUDA_SUCCESS ? "@ freed\n" : "@ err %d\n", (int)r);
    } else if (!strncmp(line, "info", 4)) {
      size_t f = 0, t = 0;
      CUresult r = info(&f, &t);
      if (r == CUDA_SUCCESS) printf("@ info %llu %llu\n", (unsigned long long)f, (unsigned long long)t);
      else printf("@ err %d\n", (int)r);
    } else if (!strncmp(line, "quit", 4)) {
      return 0;
    } else {
      printf("@ err unknown command\n");
    }
  }
  return 0;
}

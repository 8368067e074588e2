/* A runtime-like DLL: like the CUDA runtime, it loads the driver only when
 * first asked, by its absolute System32 path, and finds every function
 * with cuGetProcAddress_v2 (itself found with GetProcAddress). */
#include <cuda.h>
#include <string.h>
#include <wchar.h>
#include <windows.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void *get(gpa_fn gpa, const char *name) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  return gpa(name, &fn, 12000, 0, &st) == CUDA_SUCCESS ? fn : NULL;
}

__declspec(dllexport) int fake_runtime_alloc_free(void) {
  wchar_t path[MAX_PATH];
  UINT n = GetSystemDirectoryW(path, MAX_PATH - 16);
  wcscpy(path + n, L"\\nvcuda.dll");
  HMODULE drv = LoadLibraryExW(path, NULL, 0);
  gpa_fn gpa = drv ? (gpa_fn)(void *)GetProcAddress(drv, "cuGetProcAddress_v2") : NULL;
  if (!gpa) return -1;
  CUresult (*init)(unsigned) = (CUresult(*)(unsigned))get(gpa, "cuInit");
  CUresult (*dev_get)(CUdevice *, int) = (CUresult(*)(CUdevice *, int))get(gpa, "cuDeviceGet");
  CUresult (*retain)(CUcontext *, CUdevice) = (CUresult(*)(CUcontext *, CUdevice))get(gpa, "cuDevicePrimaryCtxRetain");
  CUresult (*set_ctx)(CUcontext) = (CUresult(*)(CUcontext))get(gpa, "cuCtxSetCurrent");
  CUresult (*alloc)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))get(gpa, "cuMemAlloc");
  CUresult (*release)(CUdeviceptr) = (CUresult(*)(CUdeviceptr))get(gpa, "cuMemFree");
  if (!init || !dev_get || !retain || !set_ctx || !alloc || !release) return -2;
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr p = 0;
  if (init(0) || dev_get(&dev, 0) || retain(&ctx, dev) || set_ctx(ctx)) return -3;
  if (alloc(&p, 1 << 20) || !p) return -4;
  return release(p) == CUDA_SUCCESS ? 0 : -5;
}

/* What every client test program shares (client.c): the driver functions
 * it calls, however it found them, and the one line it prints.
 *
 * Each program reaches nvcuda.dll one way (README.md), fills a struct
 * client_drv and calls client_run, which prints
 *
 *   vramshim-client: way=WAY driver=PATH version=V total=T free=F limit=L
 *     alloc_over_limit=RESULT array_over_limit=RESULT copy=ok|bad interposed=yes|no
 *
 * on one line: T and F from cuMemGetInfo, RESULT what allocating L + 2 MiB
 * gave (CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY, ...), with cuMemAlloc and
 * as a CUDA array (float4, 8192 texels wide), copy whether 16 MiB
 * allocated, set and copied back read right. interposed=yes when the view
 * is the shim's for a tenant limited to L: total == L and the allocation
 * over it fails with CUDA_ERROR_OUT_OF_MEMORY (docs/config.md). Exit code
 * 0 when the driver answered and the copy was right, 1 otherwise. */
#ifndef VS_CLIENT_H
#define VS_CLIENT_H
#include <cuda.h>
#include <stddef.h>

struct client_drv {
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*Array3DCreate)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
    CUresult (*ArrayDestroy)(CUarray);
};

/* The functions client_drv holds: the name to ask GetProcAddress for (as a
 * CUDA 10.2 runtime does: the _v2 ABI names), and the name and version to
 * ask cuGetProcAddress for (as CUDA 11.3 and later do). */
struct client_fn {
    const char *export_name;
    const char *symbol;
    int version;
    size_t offset;   /* in struct client_drv */
};
extern const struct client_fn client_fns[];
extern const unsigned client_nfns;

/* Every function by GetProcAddress on mod (an HMODULE); 0, or -1 naming
 * the one missing. */
int client_fill_getprocaddress(struct client_drv *d, void *mod);
/* Every function through gpa, the driver's cuGetProcAddress (v1: 4
 * arguments) or cuGetProcAddress_v2 (5 arguments). */
int client_fill_procaddr(struct client_drv *d, void *gpa, int v2);
/* --limit SIZE (bytes, or with MiB/GiB), default 1 GiB. */
size_t client_limit(int argc, char **argv);
/* The checks and the line; returns the exit code. */
int client_run(const char *way, const struct client_drv *d, size_t limit);
/* The full path of the loaded system32 driver: GetSystemDirectoryW + nvcuda.dll */
void client_system32_path(wchar_t *out, size_t n);
#endif

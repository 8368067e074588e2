/* The client test programs' shared part (client.h). */
#include "client.h"
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define F(exp, sym, ver, field) {exp, sym, ver, offsetof(struct client_drv, field)}
const struct client_fn client_fns[] = {
    F("cuInit", "cuInit", 2000, Init),
    F("cuDriverGetVersion", "cuDriverGetVersion", 2020, DriverGetVersion),
    F("cuDeviceGet", "cuDeviceGet", 2000, DeviceGet),
    F("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, DevicePrimaryCtxRetain),
    F("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease", 7000, DevicePrimaryCtxRelease),
    F("cuCtxSetCurrent", "cuCtxSetCurrent", 4000, CtxSetCurrent),
    F("cuMemGetInfo_v2", "cuMemGetInfo", 3020, MemGetInfo),
    F("cuMemAlloc_v2", "cuMemAlloc", 3020, MemAlloc),
    F("cuMemFree_v2", "cuMemFree", 3020, MemFree),
    F("cuMemsetD8_v2", "cuMemsetD8", 3020, MemsetD8),
    F("cuMemcpyHtoD_v2", "cuMemcpyHtoD", 3020, MemcpyHtoD),
    F("cuMemcpyDtoH_v2", "cuMemcpyDtoH", 3020, MemcpyDtoH),
    F("cuArray3DCreate_v2", "cuArray3DCreate", 3020, Array3DCreate),
    F("cuArrayDestroy", "cuArrayDestroy", 2000, ArrayDestroy),
};
const unsigned client_nfns = sizeof client_fns / sizeof client_fns[0];

static void **slot(struct client_drv *d, const struct client_fn *f) { return (void **)((char *)d + f->offset); }

int client_fill_getprocaddress(struct client_drv *d, void *mod)
{
    for (unsigned i = 0; i < client_nfns; i++) {
        FARPROC p = GetProcAddress((HMODULE)mod, client_fns[i].export_name);
        if (!p) {
            printf("vramshim-client: GetProcAddress(%s) failed\n", client_fns[i].export_name);
            return -1;
        }
        memcpy(slot(d, &client_fns[i]), &p, sizeof p);
    }
    return 0;
}

typedef CUresult (*gpa_v1)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa_v2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

int client_fill_procaddr(struct client_drv *d, void *gpa, int v2)
{
    for (unsigned i = 0; i < client_nfns; i++) {
        void *p = NULL;
        CUresult r;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
        if (v2) r = ((gpa_v2)gpa)(client_fns[i].symbol, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st);
        else r = ((gpa_v1)gpa)(client_fns[i].symbol, &p, 11030, CU_GET_PROC_ADDRESS_DEFAULT);
        if (r != CUDA_SUCCESS || !p) {
            printf("vramshim-client: cuGetProcAddress%s(%s) gave %d\n", v2 ? "_v2" : "", client_fns[i].symbol, (int)r);
            return -1;
        }
        *slot(d, &client_fns[i]) = p;
    }
    return 0;
}

size_t client_limit(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--limit") != 0) continue;
        char *end;
        double v = strtod(argv[i + 1], &end);
        if (strcmp(end, "GiB") == 0) v *= 1 << 30;
        else if (strcmp(end, "MiB") == 0) v *= 1 << 20;
        return (size_t)v;
    }
    return (size_t)1 << 30;
}

void client_system32_path(wchar_t *out, size_t n)
{
    wchar_t dir[MAX_PATH];
    UINT l = GetSystemDirectoryW(dir, MAX_PATH);
    if (l == 0 || l >= MAX_PATH) wcscpy(dir, L"C:\\windows\\system32");
    swprintf(out, n, L"%ls\\nvcuda.dll", dir);
}

static const char *result_name(CUresult r, char *buf, size_t n)
{
    switch (r) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    default: snprintf(buf, n, "CUresult_%d", (int)r); return buf;
    }
}

int client_run(const char *way, const struct client_drv *d, size_t limit)
{
    char path[MAX_PATH] = "none", rbuf[32];
    HMODULE m = GetModuleHandleW(L"nvcuda.dll");
    if (m) GetModuleFileNameA(m, path, sizeof path);
    int version = 0;
    size_t fr = 0, total = 0;
    CUdevice dev = 0;
    CUcontext ctx = NULL;
    CUresult r = d->Init(0);
    if (r == CUDA_SUCCESS) r = d->DriverGetVersion(&version);
    if (r == CUDA_SUCCESS) r = d->DeviceGet(&dev, 0);
    if (r == CUDA_SUCCESS) r = d->DevicePrimaryCtxRetain(&ctx, dev);
    if (r == CUDA_SUCCESS) r = d->CtxSetCurrent(ctx);
    if (r == CUDA_SUCCESS) r = d->MemGetInfo(&fr, &total);
    if (r != CUDA_SUCCESS) {
        printf("vramshim-client: way=%s driver=%s error=%s\n", way, path, result_name(r, rbuf, sizeof rbuf));
        fflush(stdout);
        return 1;
    }
    /* 16 MiB set and read back: the driver really serves memory */
    const size_t n = 16u << 20;
    int copy_ok = 0;
    CUdeviceptr p = 0;
    unsigned char *h = malloc(n);
    if (h && d->MemAlloc(&p, n) == CUDA_SUCCESS) {
        for (size_t i = 0; i < n; i++) h[i] = (unsigned char)i;
        copy_ok = d->MemcpyHtoD(p, h, n) == CUDA_SUCCESS && d->MemsetD8(p + 4096, 0xab, 16) == CUDA_SUCCESS;
        memset(h, 0, n);
        copy_ok = copy_ok && d->MemcpyDtoH(h, p, n) == CUDA_SUCCESS && h[4095] == 0xff && h[4096] == 0xab &&
                  h[4111] == 0xab && h[4112] == 0x10 && h[n - 1] == 0xff;
        d->MemFree(p);
    }
    free(h);
    CUdeviceptr big = 0;
    CUresult over = d->MemAlloc(&big, limit + (2u << 20));
    if (over == CUDA_SUCCESS) d->MemFree(big);
    /* the same bytes as a CUDA array: rows of 8192 float4 texels (128 KiB) */
    const size_t row = 8192 * 16;
    CUDA_ARRAY3D_DESCRIPTOR ad = {8192, (limit + (2u << 20)) / row + 1, 0, CU_AD_FORMAT_FLOAT, 4, 0};
    CUarray arr = NULL;
    CUresult aover = d->Array3DCreate(&arr, &ad);
    if (aover == CUDA_SUCCESS) d->ArrayDestroy(arr);
    char abuf[32];
    int interposed = total == limit && over == CUDA_ERROR_OUT_OF_MEMORY;
    printf("vramshim-client: way=%s driver=%s version=%d total=%zu free=%zu limit=%zu alloc_over_limit=%s "
           "array_over_limit=%s copy=%s interposed=%s\n",
           way, path, version, total, fr, limit, result_name(over, rbuf, sizeof rbuf),
           result_name(aover, abuf, sizeof abuf), copy_ok ? "ok" : "bad", interposed ? "yes" : "no");
    fflush(stdout);
    d->DevicePrimaryCtxRelease(dev);
    return copy_ok ? 0 : 1;
}

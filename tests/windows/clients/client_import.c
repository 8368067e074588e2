/* Linked against nvcuda (its import library): the loader resolves the
 * cu* functions in the import table before main runs. */
#include "client.h"

static CUresult init(unsigned f) { return cuInit(f); }
static CUresult ver(int *v) { return cuDriverGetVersion(v); }
static CUresult dget(CUdevice *d, int o) { return cuDeviceGet(d, o); }
static CUresult retain(CUcontext *c, CUdevice d) { return cuDevicePrimaryCtxRetain(c, d); }
static CUresult release(CUdevice d) { return cuDevicePrimaryCtxRelease(d); }
static CUresult setcur(CUcontext c) { return cuCtxSetCurrent(c); }
static CUresult info(size_t *f, size_t *t) { return cuMemGetInfo(f, t); }
static CUresult alloc(CUdeviceptr *p, size_t n) { return cuMemAlloc(p, n); }
static CUresult mfree(CUdeviceptr p) { return cuMemFree(p); }
static CUresult set8(CUdeviceptr p, unsigned char v, size_t n) { return cuMemsetD8(p, v, n); }
static CUresult htod(CUdeviceptr p, const void *h, size_t n) { return cuMemcpyHtoD(p, h, n); }
static CUresult dtoh(void *h, CUdeviceptr p, size_t n) { return cuMemcpyDtoH(h, p, n); }
static CUresult arr3d(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d) { return cuArray3DCreate(a, d); }
static CUresult arrfree(CUarray a) { return cuArrayDestroy(a); }

int main(int argc, char **argv)
{
    struct client_drv d = {init, ver, dget, retain, release, setcur, info, alloc, mfree, set8, htod, dtoh, arr3d, arrfree};
    return client_run("import", &d, client_limit(argc, argv));
}

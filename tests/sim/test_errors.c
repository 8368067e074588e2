/* Error codes of the simulated driver: before cuInit, without a context,
 * NULL out-parameters, unknown and double-freed pointers, plus the queries
 * of a single allocation (address range, pointer attributes). */
#include "sim_test.h"
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void before_init(void **state)
{
    (void)state;
    CUdeviceptr p;
    size_t f, t;
    int n, v;
    CU_ERR(cuMemAlloc(&p, 4096), CUDA_ERROR_NOT_INITIALIZED);
    CU_ERR(cuMemGetInfo(&f, &t), CUDA_ERROR_NOT_INITIALIZED);
    CU_ERR(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CU_ERR(cuMemFree(0x1000), CUDA_ERROR_NOT_INITIALIZED);
    /* these work without cuInit */
    CU_OK(cuDriverGetVersion(&v));
    assert_int_equal(v, 13000);
    const char *s;
    CU_OK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
    CU_OK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
    assert_string_equal(s, "invalid argument");
    CU_ERR(cuGetErrorName((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

static void devices(void **state)
{
    (void)state;
    CU_OK(cuInit(0));
    int n, v;
    CU_OK(cuDeviceGetCount(&n));
    assert_int_equal(n, 2);   /* VRAMSIM_CARDS=3GiB,24GiB */
    CU_ERR(cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE);
    CUdevice d;
    CU_ERR(cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
    CU_OK(cuDeviceGet(&d, 1));
    size_t total;
    CU_OK(cuDeviceTotalMem(&total, 0));
    assert_int_equal(total, 3 * GiB);
    CU_OK(cuDeviceTotalMem(&total, 1));
    assert_int_equal(total, 24 * GiB);
    CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    assert_int_equal(v, 1);
    CU_OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    assert_int_equal(v, 9);
    CU_ERR(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);
    char name[64], bus[32];
    CU_OK(cuDeviceGetName(name, sizeof name, 0));
    assert_non_null(strstr(name, "3 GiB"));
    CU_OK(cuDeviceGetPCIBusId(bus, sizeof bus, 1));
    CU_OK(cuDeviceGetByPCIBusId(&d, bus));
    assert_int_equal(d, 1);
    CUuuid u0, u1;
    CU_OK(cuDeviceGetUuid(&u0, 0));
    CU_OK(cuDeviceGetUuid(&u1, 1));
    assert_memory_not_equal(u0.bytes, u1.bytes, 16);
    const void *table = (const void *)1;
    CUuuid id = {{0}};
    assert_int_not_equal(cuGetExportTable(&table, &id), CUDA_SUCCESS);
    assert_null(table);
}

static void no_context(void **state)
{
    (void)state;
    CU_OK(cuInit(0));
    CUdeviceptr p;
    size_t f, t;
    CU_OK(cuCtxSetCurrent(NULL));
    CUcontext cur = (CUcontext)1;
    CU_OK(cuCtxGetCurrent(&cur));
    assert_null(cur);
    CU_ERR(cuMemAlloc(&p, 4096), CUDA_ERROR_INVALID_CONTEXT);
    CU_ERR(cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    CUdevice d;
    CU_ERR(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    CU_ERR(cuCtxPopCurrent(&cur), CUDA_ERROR_INVALID_CONTEXT);
}

static void bad_pointers(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUdeviceptr p;
    CU_ERR(cuMemAlloc(NULL, 4096), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuMemGetInfo(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    size_t one = 0;   /* one output alone is valid, as on the real driver */
    CU_OK(cuMemGetInfo(&one, NULL));
    assert_true(one > 0);
    one = 0;
    CU_OK(cuMemGetInfo(NULL, &one));
    assert_true(one > 0);
    CU_OK(cuMemAlloc(&p, 1000));
    assert_int_equal(p % 512, 0);
    CU_ERR(cuMemFree(p + 8), CUDA_ERROR_INVALID_VALUE);          /* interior pointer */
    CU_ERR(cuMemFree((CUdeviceptr)(uintptr_t)&p), CUDA_ERROR_INVALID_VALUE);   /* host */
    CU_OK(cuMemFree(p));
    CU_ERR(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);              /* double free */
    CU_OK(cuMemFree(0));
    char buf[16];
    CU_ERR(cuMemcpyDtoH(buf, p, sizeof buf), CUDA_ERROR_INVALID_VALUE);   /* freed */
    CU_ERR(cuMemsetD8(p, 1, 16), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(vramsim_live_count(0), 0);
}

static void ranges_and_attributes(void **state)
{
    (void)state;
    CUcontext ctx = sim_test_setup(0);
    CUdeviceptr p, base;
    size_t size;
    CU_OK(cuMemAlloc(&p, 5000));
    CU_OK(cuMemGetAddressRange(&base, &size, p + 4999));
    assert_int_equal(base, p);
    assert_int_equal(size, 5000);
    CU_ERR(cuMemGetAddressRange(&base, &size, p + 5000 + 8192), CUDA_ERROR_NOT_FOUND);
    /* writes past the requested size are refused */
    char buf[64];
    CU_ERR(cuMemcpyHtoD(p + 4990, buf, 20), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuMemcpy(p + 4990, (CUdeviceptr)(uintptr_t)buf, 20), CUDA_ERROR_INVALID_VALUE);
    char other[64];
    memset(buf, 9, sizeof buf);
    CU_OK(cuMemcpy((CUdeviceptr)(uintptr_t)other, (CUdeviceptr)(uintptr_t)buf, sizeof buf));   /* host to host */
    assert_int_equal(other[63], 9);
    CU_OK(cuMemcpy(p + 10, (CUdeviceptr)(uintptr_t)buf, sizeof buf));

    unsigned mt = 0;
    CUcontext c = NULL;
    int ord = -1;
    CUdeviceptr start = 0;
    unsigned long long id = 0;
    bool managed = true;
    CU_OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 100));
    assert_int_equal(mt, CU_MEMORYTYPE_DEVICE);
    CU_OK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    assert_ptr_equal(c, ctx);
    CU_ERR(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)buf),
           CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CUDA_ERROR_INVALID_VALUE);

    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *data[] = {&ord, &start, &size, &id, &managed};
    CU_OK(cuPointerGetAttributes(5, attrs, data, p + 7));
    assert_int_equal(ord, 0);
    assert_int_equal(start, p);
    assert_int_equal(size, 5000);
    assert_true(id != 0);
    assert_false(managed);
    /* unknown pointers read as zero values here, not as an error */
    CU_OK(cuPointerGetAttributes(5, attrs, data, (CUdeviceptr)(uintptr_t)buf));
    assert_int_equal(start, 0);
    CU_OK(cuMemFree(p));

    CU_OK(cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_GLOBAL));
    CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
    assert_true(managed);
    CU_ERR(cuMemAllocManaged(&base, 4096, 7), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(p));

    size_t pitch = 0;
    CU_OK(cuMemAllocPitch(&p, &pitch, 1000, 10, 4));
    assert_true(pitch >= 1000 && pitch % 512 == 0);
    assert_int_equal(vramsim_live_bytes(0), pitch * 10);
    CU_ERR(cuMemAllocPitch(&base, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(p));

    void *h;
    CU_OK(cuMemHostAlloc(&h, 10000, CU_MEMHOSTALLOC_PORTABLE));
    CU_OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)h));
    assert_int_equal(mt, CU_MEMORYTYPE_HOST);
    unsigned fl;
    CU_OK(cuMemHostGetFlags(&fl, h));
    assert_int_equal(fl, CU_MEMHOSTALLOC_PORTABLE);
    CU_ERR(cuMemFree((CUdeviceptr)(uintptr_t)h), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFreeHost(h));
    CU_ERR(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(vramsim_live_count(0), 0);
}

/* Pinned host memory mapped for the device (what on_limit = spill serves,
 * issue 13): a device pointer for it, copies and memsets through that
 * pointer, host pointer attributes, not charged to the card, no IPC. */
static void mapped_host_memory(void **state)
{
    (void)state;
    sim_test_setup(0);
    size_t f0, t0, f1, t1;
    CU_OK(cuMemGetInfo(&f0, &t0));
    uint64_t used0 = vramsim_card_used(0);
    const size_t n = 3 * MiB + 100;
    void *h;
    CU_OK(cuMemHostAlloc(&h, n, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    CUdeviceptr d = 0;
    CU_ERR(cuMemHostGetDevicePointer(&d, h, 1), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemHostGetDevicePointer(&d, h, 0));
    assert_true(d == (CUdeviceptr)(uintptr_t)h);   /* unified addressing */
    CU_OK(cuMemGetInfo(&f1, &t1));
    assert_int_equal(f1, f0);
    assert_int_equal(vramsim_card_used(0), used0);
    assert_int_equal(vramsim_live_count(0), 0);

    /* memsets and copies through the device pointer */
    CU_OK(cuMemsetD8(d, 0x5a, n));
    assert_int_equal(((unsigned char *)h)[0], 0x5a);
    assert_int_equal(((unsigned char *)h)[n - 1], 0x5a);
    CU_OK(cuMemsetD32(d + 4096, 0x01020304u, 1024));
    assert_int_equal(((uint32_t *)h)[1024], 0x01020304u);
    CU_ERR(cuMemsetD8(d + 1, 0, n), CUDA_ERROR_INVALID_VALUE);   /* past its end */
    CUdeviceptr dev;
    CU_OK(cuMemAlloc(&dev, n));
    CU_OK(cuMemcpyDtoD(dev, d, n));
    CU_OK(cuMemsetD8(d, 0, n));
    CU_OK(cuMemcpyDtoD(d, dev, n));
    assert_int_equal(((unsigned char *)h)[n / 2], 0x5a);
    char buf[64] = {0};
    CU_OK(cuMemcpyHtoD(d + 10, "mapped", 7));
    CU_OK(cuMemcpyDtoH(buf, d + 10, 7));
    assert_string_equal(buf, "mapped");

    /* attributes: host memory, known to the driver over its whole range */
    unsigned mt = 0;
    CU_OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 100));
    assert_int_equal(mt, CU_MEMORYTYPE_HOST);
    CUdeviceptr dp = 0, start = 0;
    void *hp = NULL;
    size_t rsize = 0;
    bool ipc = true, managed = true, mapped = false;
    CU_OK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, d + 100));
    assert_true(dp == d + 100);
    CU_OK(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d + 100));
    assert_ptr_equal(hp, (char *)h + 100);
    CU_OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 100));
    CU_OK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 100));
    assert_true(start == d);
    assert_int_equal(rsize, n);
    CU_OK(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, d));
    CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
    CU_OK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, d));
    assert_false(ipc);
    assert_false(managed);
    assert_true(mapped);
    CUipcMemHandle ih;
    CU_ERR(cuIpcGetMemHandle(&ih, d), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);   /* not device memory */
    CU_OK(cuMemFree(dev));
    CU_OK(cuMemFreeHost(h));
    CU_ERR(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuMemHostGetDevicePointer(&d, h, 0), CUDA_ERROR_INVALID_VALUE);
}

static void contexts(void **state)
{
    (void)state;
    CUcontext prim = sim_test_setup(0), c1, cur;
    unsigned flags;
    int active;
    CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 1);
    CU_OK(cuCtxCreate(&c1, NULL, 0, 1));
    CU_OK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, c1);
    CUdevice d;
    CU_OK(cuCtxGetDevice(&d));
    assert_int_equal(d, 1);
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 3 * MiB));
    assert_int_equal(vramsim_live_bytes(1), 3 * MiB);
    /* destroying a context frees what was allocated in it */
    CU_OK(cuCtxDestroy(c1));
    assert_int_equal(vramsim_live_bytes(1), 0);
    assert_int_equal(vramsim_card_used(1), 0);
    CU_ERR(cuCtxPushCurrent(c1), CUDA_ERROR_INVALID_CONTEXT);
    CU_ERR(cuCtxDestroy(prim), CUDA_ERROR_INVALID_CONTEXT);
    CU_OK(cuCtxPushCurrent(prim));
    CU_OK(cuCtxPopCurrent(&cur));
    assert_ptr_equal(cur, prim);
}

static int child_status(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

/* Configuration is read at cuInit; a forked child starts clean, so it can
 * try other settings against the same state file. */
static void configuration(void **state)
{
    (void)state;
    sim_test_setup(0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("VRAMSIM_CARDS", "lots", 1);
        _exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
    }
    assert_int_equal(child_status(pid), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* the state file is in use by this test: its cards win */
        setenv("VRAMSIM_CARDS", "5GiB", 1);
        int n = 0;
        size_t t = 0;
        if (cuInit(0) || cuDeviceGetCount(&n) || cuDeviceTotalMem(&t, 0)) _exit(2);
        _exit(n == 2 && t == 3 * GiB ? 0 : 3);
    }
    assert_int_equal(child_status(pid), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(before_init), cmocka_unit_test(devices), cmocka_unit_test(no_context),
        cmocka_unit_test(bad_pointers), cmocka_unit_test(ranges_and_attributes), cmocka_unit_test(contexts),
        cmocka_unit_test(configuration), cmocka_unit_test(mapped_host_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

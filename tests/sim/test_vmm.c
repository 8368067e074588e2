/* The VMM API really stitches: physical chunks mapped side by side behave
 * as one range, a chunk mapped at two addresses shows the same bytes, and
 * physical memory lives (and is charged) until released and unmapped. */
#include "sim_test.h"
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static CUmemAllocationProp prop_on(int dev)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    return p;
}

static void rw(CUdeviceptr p, size_t n)
{
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = 0;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_OK(cuMemSetAccess(p, n, &d, 1));
}

static void granularity_and_errors(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUmemAllocationProp prop = prop_on(0);
    size_t g = 0;
    CU_OK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    assert_int_equal(g, 2 * MiB);
    CUmemGenericAllocationHandle h;
    CU_ERR(cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuMemCreate(NULL, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    prop.location.id = 9;
    CU_ERR(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
    CUdeviceptr va;
    CU_ERR(cuMemAddressReserve(&va, 3 * MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    prop = prop_on(0);
    CU_ERR(cuMemCreate(&h, 8 * GiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);   /* 4GiB card */
}

static void stitching(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUmemAllocationProp prop = prop_on(0);
    const size_t G = 2 * MiB;
    CUdeviceptr va, va2;
    CUmemGenericAllocationHandle h[3];
    CU_OK(cuMemAddressReserve(&va, 3 * G, 0, 0, 0));
    assert_int_equal(va % G, 0);
    for (int i = 0; i < 3; i++) CU_OK(cuMemCreate(&h[i], G, &prop, 0));
    assert_int_equal(vramsim_live_bytes(0), 3 * G);
    assert_int_equal(vramsim_live_count(0), 3);
    assert_int_equal(vramsim_card_used(0), 3 * G);
    /* chunks mapped out of order still read as one range */
    CU_OK(cuMemMap(va + 2 * G, G, 0, h[0], 0));
    CU_OK(cuMemMap(va, G, 0, h[1], 0));
    CU_OK(cuMemMap(va + G, G, 0, h[2], 0));
    CU_ERR(cuMemMap(va, G, 0, h[0], 0), CUDA_ERROR_ALREADY_MAPPED);
    char b[16];
    CU_ERR(cuMemcpyDtoH(b, va, sizeof b), CUDA_ERROR_INVALID_VALUE);   /* no access yet */
    rw(va, 3 * G);
    /* one memset and one copy across both chunk boundaries */
    CU_OK(cuMemsetD8(va, 0x11, 3 * G));
    CU_OK(cuMemsetD8(va + G - 100, 0x77, 2 * G - 200 + 200));
    unsigned char *buf = malloc(3 * G);
    assert_non_null(buf);
    CU_OK(cuMemcpyDtoH(buf, va, 3 * G));
    assert_int_equal(buf[G - 101], 0x11);
    assert_int_equal(buf[G - 100], 0x77);
    assert_int_equal(buf[3 * G - 101], 0x77);
    /* the same physical chunk at a second address shows the same bytes */
    CU_OK(cuMemAddressReserve(&va2, G, 0, 0, 0));
    CU_OK(cuMemMap(va2, G, 0, h[2], 0));
    rw(va2, G);
    CU_OK(cuMemsetD32(va2 + 4096, 0xDEADBEEFu, 4));
    uint32_t w = 0;
    CU_OK(cuMemcpyDtoH(&w, va + G + 4096, 4));
    assert_int_equal(w, 0xDEADBEEFu);
    /* pointer queries see the mapping */
    int ord = -1;
    CU_OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + G + 5));
    assert_int_equal(ord, 0);
    unsigned long long fl = 0;
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CU_OK(cuMemGetAccess(&fl, &loc, va));
    assert_int_equal(fl, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    /* released but still mapped: alive and charged until unmapped */
    for (int i = 0; i < 3; i++) CU_OK(cuMemRelease(h[i]));
    CU_ERR(cuMemRelease(h[0]), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(vramsim_live_count(0), 3);
    CU_OK(cuMemcpyDtoH(&w, va2 + 4096, 4));
    assert_int_equal(w, 0xDEADBEEFu);
    CU_ERR(cuMemUnmap(va, G + G / 2), CUDA_ERROR_INVALID_VALUE);   /* part of a mapping */
    CU_OK(cuMemUnmap(va, 3 * G));
    assert_int_equal(vramsim_live_count(0), 1);                  /* h[2] still at va2 */
    assert_int_equal(vramsim_card_used(0), G);
    CU_OK(cuMemUnmap(va2, G));
    assert_int_equal(vramsim_live_count(0), 0);
    assert_int_equal(vramsim_card_used(0), 0);
    CU_OK(cuMemAddressFree(va, 3 * G));
    CU_OK(cuMemAddressFree(va2, G));
    CU_ERR(cuMemAddressFree(va2, G), CUDA_ERROR_INVALID_VALUE);
    free(buf);
}

/* cuMemRetainAllocationHandle: one more reference to the same handle, each
 * given back by a cuMemRelease; the memory lives while a reference or a
 * mapping does (NCCL frees its buffers so: retain, release, unmap, release). */
static void retained_handles(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUmemAllocationProp prop = prop_on(0);
    const size_t G = 2 * MiB;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h, r1, r2;
    CU_OK(cuMemAddressReserve(&va, 2 * G, 0, 0, 0));
    CU_OK(cuMemCreate(&h, 2 * G, &prop, 0));
    CU_OK(cuMemMap(va, 2 * G, 0, h, 0));
    CU_ERR(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)(va + 4 * G)), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)(va + G + 5)));
    assert_true(r1 == h);   /* the same handle value, one more reference */
    CU_OK(cuMemRetainAllocationHandle(&r2, (void *)(uintptr_t)va));
    CU_OK(cuMemRelease(r2));
    CU_OK(cuMemRelease(r1));
    assert_int_equal(vramsim_card_used(0), 2 * G);
    CU_OK(cuMemUnmap(va, 2 * G));
    assert_int_equal(vramsim_card_used(0), 2 * G);   /* the creator's reference */
    CU_OK(cuMemRelease(h));
    assert_int_equal(vramsim_card_used(0), 0);
    CU_ERR(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemAddressFree(va, 2 * G));
}

/* Physical memory shared as a POSIX file descriptor: a forked child (which
 * starts clean and inherits the descriptor) imports it and sees the bytes. */
static void shareable_handles(void **state)
{
    (void)state;
    sim_test_setup(0);
    const size_t G = 2 * MiB;
    CUmemAllocationProp prop = prop_on(0);
    CUmemGenericAllocationHandle h, plain;
    int fd = -1;
    CU_OK(cuMemCreate(&plain, G, &prop, 0));
    CU_ERR(cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           CUDA_ERROR_INVALID_VALUE);   /* not created exportable */
    CU_OK(cuMemRelease(plain));
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CU_OK(cuMemCreate(&h, G, &prop, 0));
    CUdeviceptr va;
    CU_OK(cuMemAddressReserve(&va, G, 0, 0, 0));
    CU_OK(cuMemMap(va, G, 0, h, 0));
    rw(va, G);
    CU_OK(cuMemsetD32(va, 0x600DF00Du, G / 4));
    CU_OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    assert_true(fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        CUcontext c;
        CUmemGenericAllocationHandle imp;
        CUdeviceptr cva;
        uint32_t w = 0;
        CUmemAccessDesc d;
        memset(&d, 0, sizeof d);
        d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c)) _exit(2);
        if (cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
            _exit(3);
        if (vramsim_live_count(0) != 0) _exit(4);   /* the exporter's memory */
        if (cuMemAddressReserve(&cva, G, 0, 0, 0) || cuMemMap(cva, G, 0, imp, 0) || cuMemSetAccess(cva, G, &d, 1))
            _exit(5);
        if (cuMemcpyDtoH(&w, cva + G - 4, 4) || w != 0x600DF00Du) _exit(6);
        if (cuMemsetD32(cva + 64, 0xFEEDFACEu, 1)) _exit(7);
        if (cuMemUnmap(cva, G) || cuMemRelease(imp) || cuMemAddressFree(cva, G)) _exit(8);
        if (vramsim_card_used(0) != G) _exit(9);    /* still the exporter's charge */
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    uint32_t w = 0;
    CU_OK(cuMemcpyDtoH(&w, va + 64, 4));
    assert_int_equal(w, 0xFEEDFACEu);
    close(fd);
    CU_OK(cuMemUnmap(va, G));
    CU_OK(cuMemRelease(h));
    CU_OK(cuMemAddressFree(va, G));
    assert_int_equal(vramsim_card_used(0), 0);
}

/* SYNC_MEMOPS: settable on memory the driver allocated whole, refused on
 * a VMM mapping (CUDA_ERROR_NOT_SUPPORTED), where the context's
 * CU_CTX_SYNC_MEMOPS (cuCtxSetFlags) is the way. */
static void sync_memops(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, MiB));
    unsigned one = 1, zero = 0;
    unsigned char v = 7;
    CU_OK(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
    assert_int_equal(v, 0);
    CU_OK(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p + 100));
    CU_OK(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
    assert_int_equal(v, 1);
    CU_OK(cuPointerSetAttribute(&zero, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
    CU_OK(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
    assert_int_equal(v, 0);
    CU_ERR(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_BUFFER_ID, p), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuPointerSetAttribute(NULL, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, 0x10), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(p));
    CUmemAllocationProp pr = prop_on(0);
    size_t G = 0;
    CU_OK(cuMemGetAllocationGranularity(&G, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CU_OK(cuMemCreate(&h, G, &pr, 0));
    CU_OK(cuMemAddressReserve(&va, G, 0, 0, 0));
    CU_OK(cuMemMap(va, G, 0, h, 0));
    CU_ERR(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, va), CUDA_ERROR_NOT_SUPPORTED);
    unsigned flags = 0;
    CU_OK(cuCtxGetFlags(&flags));
    CU_OK(cuCtxSetFlags(flags | CU_CTX_SYNC_MEMOPS));
    CU_OK(cuCtxGetFlags(&flags));
    assert_true(flags & CU_CTX_SYNC_MEMOPS);
    CU_ERR(cuCtxSetFlags(0x8000), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuCtxSetFlags(flags & ~(unsigned)CU_CTX_SYNC_MEMOPS));
    CU_OK(cuMemUnmap(va, G));
    CU_OK(cuMemRelease(h));
    CU_OK(cuMemAddressFree(va, G));
}

static void vmm_disabled(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {   /* a forked child starts clean, so it can re-read the env */
        setenv("VRAMSIM_VMM", "0", 1);
        CUcontext c;
        int v = 1;
        size_t g;
        CUmemAllocationProp prop = prop_on(0);
        if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c)) _exit(2);
        if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0) || v != 0) _exit(3);
        if (cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_ERROR_NOT_SUPPORTED)
            _exit(4);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* Host locations (CUDA 12.2+ drivers): host memory mapped for the device,
 * never charged to the card, larger than the card if need be; bad ids and
 * HOST_NUMA_CURRENT refused as cuda.h says. Card: 4GiB. */
static void host_locations(void **state)
{
    (void)state;
    sim_test_setup(0);
    int numa_vmm = -1;
    CU_OK(cuDeviceGetAttribute(&numa_vmm, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    assert_int_equal(numa_vmm, 1);
    CUmemAllocationProp prop = prop_on(0);
    CUmemGenericAllocationHandle h, n;
    uint64_t used = vramsim_card_used(0), live = vramsim_live_bytes(0);
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    prop.location.id = 77;   /* ignored for HOST */
    size_t g = 0;
    CU_OK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    assert_int_equal(g, 2 * MiB);
    CU_OK(cuMemCreate(&h, 6 * GiB, &prop, 0));   /* above the card: host memory */
    assert_int_equal(vramsim_card_used(0), used);
    assert_int_equal(vramsim_live_bytes(0), live);
    CUmemAllocationProp got;
    CU_OK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    assert_int_equal(got.location.type, CU_MEM_LOCATION_TYPE_HOST);
    CUdeviceptr va;
    CU_OK(cuMemAddressReserve(&va, 2 * MiB, 0, 0, 0));
    CU_OK(cuMemMap(va, 2 * MiB, 0, h, 0));
    rw(va, 2 * MiB);
    CU_OK(cuMemsetD8(va, 0x33, 2 * MiB));
    CU_OK(cuMemUnmap(va, 2 * MiB));
    CU_OK(cuMemAddressFree(va, 2 * MiB));
    CU_OK(cuMemRelease(h));
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;   /* HOST is not IPC capable */
    CU_ERR(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = 1;   /* no NUMA here: only node 0 */
    CU_ERR(cuMemCreate(&n, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    prop.location.id = 0;
    CU_OK(cuMemCreate(&n, 4 * MiB, &prop, 0));
    assert_int_equal(vramsim_card_used(0), used);
    CU_OK(cuMemRelease(n));
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
    CU_ERR(cuMemCreate(&n, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(vramsim_card_used(0), used);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(granularity_and_errors), cmocka_unit_test(stitching), cmocka_unit_test(retained_handles),
        cmocka_unit_test(shareable_handles), cmocka_unit_test(sync_memops),
        cmocka_unit_test(vmm_disabled), cmocka_unit_test(host_locations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

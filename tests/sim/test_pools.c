/* Stream-ordered allocation: default and created pools, frees that happen
 * in stream order, reuse of freed blocks, release threshold and trimming,
 * and the pool giving cached memory back before failing; access for the
 * other card; exportable pools shared with another process (POSIX file
 * descriptors); host-located pools. Cards: 1GiB, 1GiB. */
#include "sim_test.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void default_pool_alloc_free(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUstream s;
    CUdeviceptr p;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuMemAllocAsync(&p, MiB + 3, s));
    assert_int_equal(vramsim_live_bytes(0), MiB + 3);
    assert_int_equal(vramsim_live_count(0), 1);
    CU_OK(cuMemsetD8Async(p, 0x42, MiB + 3, s));
    CU_OK(cuMemFreeAsync(p, s));
    CU_ERR(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);   /* already queued */
    CU_ERR(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(vramsim_live_count(0), 0);
    assert_int_equal(vramsim_live_bytes(0), 0);
    /* threshold 0: synchronising gave the memory back to the card */
    assert_int_equal(vramsim_card_used(0), 0);
    CU_ERR(cuMemAllocAsync(&p, 0, s), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuMemAllocAsync(&p, 64, (CUstream)(uintptr_t)0x99), CUDA_ERROR_INVALID_HANDLE);
    CU_ERR(cuMemFreeAsync(0x1000, s), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuStreamDestroy(s));
}

static void reuse_threshold_trim(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUmemoryPool pool, cur;
    CU_OK(cuDeviceGetDefaultMemPool(&pool, 0));
    CU_OK(cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(pool, cur);
    cuuint64_t keep = UINT64_MAX, v = 0;
    CU_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    CUstream s;
    CUdeviceptr a, b;
    CU_OK(cuStreamCreate(&s, 0));
    CU_OK(cuMemAllocAsync(&a, 4 * MiB, s));
    CU_OK(cuMemFreeAsync(a, s));
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(vramsim_card_used(0), 4 * MiB);      /* kept by the pool */
    CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    assert_int_equal(v, 4 * MiB);
    CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
    assert_int_equal(v, 0);
    CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &v));
    assert_int_equal(v, 4 * MiB);
    /* the same block comes back */
    CU_OK(cuMemAllocAsync(&b, 4 * MiB - 100, s));
    assert_int_equal(b, a);
    assert_int_equal(vramsim_live_bytes(0), 4 * MiB - 100);
    CU_OK(cuMemFreeAsync(b, s));
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuMemPoolTrimTo(pool, 0));
    assert_int_equal(vramsim_card_used(0), 0);
    /* the pool gives its cache back before failing */
    CU_OK(cuMemAllocAsync(&a, 768 * MiB, s));
    CU_OK(cuMemFreeAsync(a, s));
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(vramsim_card_used(0), 768 * MiB);
    CU_OK(cuMemAllocAsync(&b, 300 * MiB, s));
    assert_int_equal(vramsim_card_used(0), 300 * MiB);
    CU_OK(cuMemFreeAsync(b, s));
    keep = 0;
    CU_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(vramsim_card_used(0), 0);
    CU_OK(cuStreamDestroy(s));
}

static void created_pool(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool, got, def;
    CU_OK(cuMemPoolCreate(&pool, &props));
    CU_ERR(cuMemPoolCreate(&pool, NULL), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemPoolCreate(&pool, &props));
    CUdeviceptr p, q;
    CU_OK(cuMemAllocFromPoolAsync(&p, 12345, pool, 0));
    CU_OK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
    assert_ptr_equal(got, pool);
    /* a device's current pool serves cuMemAllocAsync */
    CU_OK(cuDeviceSetMemPool(0, pool));
    CU_OK(cuMemAllocAsync(&q, 100, 0));
    CU_OK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, q));
    assert_ptr_equal(got, pool);
    CU_OK(cuDeviceGetDefaultMemPool(&def, 0));
    CU_ERR(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    /* destroyed with a live block: it is released when freed */
    CU_OK(cuMemFreeAsync(q, 0));
    CU_OK(cuMemPoolDestroy(pool));
    CU_OK(cuDeviceGetMemPool(&got, 0));
    assert_ptr_equal(got, def);
    CU_ERR(cuMemAllocFromPoolAsync(&q, 100, pool, 0), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuStreamSynchronize(0));
    assert_int_equal(vramsim_live_bytes(0), 12345);
    CU_OK(cuMemFree(p));   /* synchronous free of pool memory */
    CU_OK(cuCtxSynchronize());
    assert_int_equal(vramsim_live_count(0), 0);
    assert_int_equal(vramsim_card_used(0), 0);
}

/* cuMemPoolSetAccess / GetAccess: another card's access is recorded and
 * answered; the owner keeps read-write; bad locations are refused. */
static void pool_access(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUmemoryPool pool;
    CU_OK(cuDeviceGetDefaultMemPool(&pool, 0));
    CUmemLocation own = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}, peer = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1};
    CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CU_OK(cuMemPoolGetAccess(&f, pool, &own));
    assert_int_equal(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CU_OK(cuMemPoolGetAccess(&f, pool, &peer));
    assert_int_equal(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    CUmemAccessDesc d = {.location = peer, .flags = CU_MEM_ACCESS_FLAGS_PROT_READ};
    CU_OK(cuMemPoolSetAccess(pool, &d, 1));
    CU_OK(cuMemPoolGetAccess(&f, pool, &peer));
    assert_int_equal(f, CU_MEM_ACCESS_FLAGS_PROT_READ);
    d.location = own;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CU_ERR(cuMemPoolSetAccess(pool, &d, 1), CUDA_ERROR_INVALID_DEVICE);
    d.location.id = 7;
    CU_ERR(cuMemPoolSetAccess(pool, &d, 1), CUDA_ERROR_INVALID_DEVICE);
    CU_ERR(cuMemPoolSetAccess(pool, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemPoolSetAccess(pool, NULL, 0));
    CU_ERR(cuMemPoolGetAccess(NULL, pool, &peer), CUDA_ERROR_INVALID_VALUE);
}

/* The importer (a fork child, clean for the sim: it calls cuInit again and
 * gets the descriptor by inheritance, as by SCM_RIGHTS): 0 when every
 * check passed, else the failing step. */
static int pool_importer(int fd, CUmemPoolPtrExportData data, size_t n)
{
    CUcontext c;
    CUmemoryPool pool;
    CUdeviceptr p, q;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c)) return 10;
    if (cuMemPoolImportFromShareableHandle(&pool, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_NONE, 0) !=
        CUDA_ERROR_INVALID_VALUE)
        return 11;
    if (cuMemPoolImportFromShareableHandle(&pool, (void *)(intptr_t)0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) !=
        CUDA_ERROR_INVALID_VALUE)
        return 12;
    if (cuMemPoolImportFromShareableHandle(&pool, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0))
        return 13;
    /* cuda.h: an imported pool makes no new allocations */
    if (cuMemAllocFromPoolAsync(&q, 4096, pool, 0) != CUDA_ERROR_INVALID_VALUE) return 14;
    if (cuDeviceSetMemPool(0, pool) != CUDA_ERROR_INVALID_VALUE) return 15;
    CUmemPoolPtrExportData bad = data;
    bad.reserved[0] ^= 0xff;
    if (cuMemPoolImportPointer(&p, pool, &bad) != CUDA_ERROR_INVALID_VALUE) return 16;
    if (cuMemPoolImportPointer(&p, pool, &data)) return 17;
    uint8_t *buf = malloc(n);
    if (!buf || cuMemcpyDtoH(buf, p, n)) return 18;
    for (size_t i = 0; i < n; i++)
        if (buf[i] != 0x5a) return 19;
    if (cuMemsetD8(p, 0xa5, 4096)) return 20;
    /* the memory is the exporter's: nothing counted here */
    if (vramsim_live_bytes(0) != 0) return 21;
    cuuint64_t reserved = 1;
    if (cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) || reserved != 0) return 22;
    if (cuIpcCloseMemHandle(p) != CUDA_ERROR_INVALID_VALUE) return 23;
    if (cuMemFree(p) || cuMemFree(p) != CUDA_ERROR_INVALID_VALUE) return 24;
    if (cuMemPoolDestroy(pool)) return 25;
    free(buf);
    return 0;
}

static void exportable_pool(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool pool, plain, def;
    CU_OK(cuMemPoolCreate(&pool, &props));
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    CU_OK(cuMemPoolCreate(&plain, &props));
    CU_OK(cuDeviceGetDefaultMemPool(&def, 0));
    int fd = -1;
    /* only a pool made with a POSIX descriptor handle type exports */
    CU_ERR(cuMemPoolExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuMemPoolExportToShareableHandle(&fd, def, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1),
           CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    assert_true(fd >= 0);
    const size_t n = 3 * MiB + 5;
    CUdeviceptr p, q;
    CU_OK(cuMemAllocFromPoolAsync(&p, n, pool, 0));
    CU_OK(cuMemAllocFromPoolAsync(&q, 4096, plain, 0));
    CU_OK(cuMemsetD8(p, 0x5a, n));
    CUmemPoolPtrExportData data;
    CU_ERR(cuMemPoolExportPointer(&data, q), CUDA_ERROR_INVALID_VALUE);   /* its pool does not export */
    CU_ERR(cuMemPoolExportPointer(&data, p + 1), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemPoolExportPointer(&data, p));
    uint64_t used = vramsim_card_used(0);
    pid_t pid = fork();
    if (pid == 0) {
        /* fork + exec, as a real importer is another program (and a threaded
         * process may not go on after fork under ThreadSanitizer). dup2 drops
         * FD_CLOEXEC on the copy the importer is given. */
        char hex[2 * sizeof data + 1], nb[32];
        const unsigned char *raw = (const unsigned char *)&data;
        for (size_t i = 0; i < sizeof data; i++) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
        snprintf(nb, sizeof nb, "%zu", n);
        if (dup2(fd, 100) != 100) _exit(98);
        execl(SIM_TEST_EXE, SIM_TEST_EXE, "pool-import", "100", hex, nb, (char *)NULL);
        _exit(99);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* the importer's write is seen here; the card holds what it held */
    uint8_t b[2];
    CU_OK(cuMemcpyDtoH(b, p + 4095, 2));
    assert_int_equal(b[0], 0xa5);
    assert_int_equal(b[1], 0x5a);
    assert_int_equal(vramsim_card_used(0), used);
    close(fd);
    CU_OK(cuMemFreeAsync(p, 0));
    CU_OK(cuMemFreeAsync(q, 0));
    CU_OK(cuStreamSynchronize(0));
    CU_OK(cuMemPoolDestroy(pool));
    CU_OK(cuMemPoolDestroy(plain));
    assert_int_equal(vramsim_card_used(0), 0);
}

/* Host-located pools (CUDA 12.2+): host memory, on no card's charge; the
 * pool counts it as reserved and keeps it as any pool; bad host ids are
 * refused as cuMemCreate refuses them. */
static void host_pool(void **state)
{
    (void)state;
    sim_test_setup(1);
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = 0}};
    CUmemoryPool numa, host, bad;
    CU_OK(cuMemPoolCreate(&numa, &props));
    props.location.type = CU_MEM_LOCATION_TYPE_HOST;
    props.location.id = 3;   /* ignored */
    CU_OK(cuMemPoolCreate(&host, &props));
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CU_ERR(cuMemPoolCreate(&bad, &props), CUDA_ERROR_INVALID_VALUE);
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    props.location.id = 1;
    CU_ERR(cuMemPoolCreate(&bad, &props), CUDA_ERROR_INVALID_VALUE);
    props.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
    props.location.id = 0;
    CU_ERR(cuMemPoolCreate(&bad, &props), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuDeviceSetMemPool(0, host), CUDA_ERROR_INVALID_VALUE);   /* not a device's pool */
    cuuint64_t keep = UINT64_MAX;
    CU_OK(cuMemPoolSetAttribute(numa, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    CUdeviceptr a, b;
    CU_OK(cuMemAllocFromPoolAsync(&a, 1536 * MiB, numa, 0));   /* more than the card */
    CU_OK(cuMemAllocFromPoolAsync(&b, 4 * MiB, host, 0));
    CU_OK(cuMemsetD8Async(b, 7, 4 * MiB, 0));
    assert_int_equal(vramsim_card_used(0), 0);
    assert_int_equal(vramsim_card_used(1), 0);
    assert_int_equal(vramsim_live_bytes(1), 0);
    CU_OK(cuMemFreeAsync(a, 0));
    CU_OK(cuMemFreeAsync(b, 0));
    CU_OK(cuStreamSynchronize(0));
    cuuint64_t v = 0;
    CU_OK(cuMemPoolGetAttribute(numa, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    assert_int_equal(v, 1536 * MiB);   /* kept (threshold) */
    CU_OK(cuMemPoolTrimTo(numa, 0));
    CU_OK(cuMemPoolGetAttribute(numa, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    assert_int_equal(v, 0);
    CU_OK(cuMemPoolDestroy(numa));
    CU_OK(cuMemPoolDestroy(host));
    assert_int_equal(vramsim_card_used(1), 0);
}

/* The importer, run as its own program: pool-import FD HEX(export data) BYTES. */
static int importer_main(char **argv)
{
    CUmemPoolPtrExportData data;
    unsigned char *raw = (unsigned char *)&data;
    if (strlen(argv[3]) != 2 * sizeof data) return 97;
    for (size_t i = 0; i < sizeof data; i++) {
        unsigned v;
        if (sscanf(argv[3] + 2 * i, "%2x", &v) != 1) return 97;
        raw[i] = (unsigned char)v;
    }
    return pool_importer(atoi(argv[2]), data, (size_t)strtoull(argv[4], NULL, 10));
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "pool-import")) return importer_main(argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_pool_alloc_free), cmocka_unit_test(reuse_threshold_trim),
        cmocka_unit_test(created_pool), cmocka_unit_test(pool_access),
        cmocka_unit_test(exportable_pool), cmocka_unit_test(host_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

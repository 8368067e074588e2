/* The sim's NVML (libnvidia-ml.so.1) over the shared state: cards by
 * physical index, UUID and PCI bus id agreeing with CUDA's; each context's
 * overhead (VRAMSIM_CONTEXT_OVERHEAD=256MiB here) in free memory and in
 * the process's used memory, never in an allocation; the processes with a
 * context listed through every struct version with NVML's sizing protocol;
 * an NVML-only process that is not listed; the rest NOT_SUPPORTED.
 * Cards: 4GiB,3GiB. */
#include "sim_test.h"
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define OVERHEAD (256 * MiB)
#define NV_OK(call) assert_int_equal((int)(call), (int)NVML_SUCCESS)

static nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d;
    NV_OK(nvmlDeviceGetHandleByIndex_v2(i, &d));
    return d;
}

static unsigned long long nvml_free(unsigned i)
{
    nvmlMemory_t m;
    NV_OK(nvmlDeviceGetMemoryInfo(dev(i), &m));
    assert_int_equal(m.total, m.free + m.used);
    return m.free;
}

static void cards_agree_with_cuda(void **state)
{
    (void)state;
    NV_OK(nvmlInit_v2());
    CU_OK(cuInit(0));
    unsigned n = 0;
    NV_OK(nvmlDeviceGetCount_v2(&n));
    assert_int_equal(n, 2);
    for (unsigned i = 0; i < n; i++) {
        nvmlDevice_t d = dev(i), by;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], cname[96], pci[32];
        NV_OK(nvmlDeviceGetUUID(d, uuid, sizeof uuid));
        NV_OK(nvmlDeviceGetName(d, name, sizeof name));
        CU_OK(cuDeviceGetName(cname, sizeof cname, (CUdevice)i));
        assert_string_equal(name, cname);
        CUuuid cu;
        CU_OK(cuDeviceGetUuid_v2(&cu, (CUdevice)i));
        const unsigned char *b = (const unsigned char *)cu.bytes;
        char want[64];
        snprintf(want, sizeof want, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        assert_string_equal(uuid, want);
        NV_OK(nvmlDeviceGetHandleByUUID(uuid, &by));
        assert_ptr_equal(by, d);
        CU_OK(cuDeviceGetPCIBusId(pci, sizeof pci, (CUdevice)i));
        NV_OK(nvmlDeviceGetHandleByPciBusId_v2(pci, &by));
        assert_ptr_equal(by, d);
        unsigned idx = 99;
        NV_OK(nvmlDeviceGetIndex(d, &idx));
        assert_int_equal(idx, i);
        /* a buffer too small for the UUID: INSUFFICIENT_SIZE, as NVML says */
        assert_int_equal(nvmlDeviceGetUUID(d, uuid, 8), NVML_ERROR_INSUFFICIENT_SIZE);
    }
    nvmlDevice_t none;
    assert_int_equal(nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &none), NVML_ERROR_NOT_FOUND);
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(2, &none), NVML_ERROR_INVALID_ARGUMENT);
    int v = 0;
    NV_OK(nvmlSystemGetCudaDriverVersion_v2(&v));
    int cv = 0;
    CU_OK(cuDriverGetVersion(&cv));
    assert_int_equal(v, cv);
    char dv[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    NV_OK(nvmlSystemGetDriverVersion(dv, sizeof dv));
    assert_true(strlen(dv) > 0);
    /* a function the sim does not model: what a card without it answers */
    unsigned fan = 0;
    assert_int_equal(nvmlDeviceGetFanSpeed(dev(0), &fan), NVML_ERROR_NOT_SUPPORTED);
    assert_string_equal(nvmlErrorString(NVML_ERROR_NOT_SUPPORTED), "Not Supported");
    NV_OK(nvmlShutdown());
}

/* A child with a context on card 0 and `bytes` allocated, until the pipe closes. */
static pid_t child_with_context(size_t bytes, int *release)
{
    int go[2], done[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        CUcontext c;
        CUdeviceptr p = 0;
        int ok = cuInit(0) == 0 && cuCtxCreate(&c, NULL, 0, 0) == 0 && (!bytes || cuMemAlloc(&p, bytes) == 0);
        char b = ok ? 'y' : 'n';
        close(done[1]);   /* EOF on done[0] when the parent lets go */
        if (write(go[1], &b, 1) != 1) _exit(2);
        if (read(done[0], &b, 1) < 0) _exit(3);
        _exit(ok ? 0 : 1);
    }
    char b = 0;
    assert_int_equal(read(go[0], &b, 1), 1);
    assert_int_equal(b, 'y');
    close(go[0]);
    close(go[1]);
    close(done[0]);
    *release = done[1];
    return pid;
}

static void overhead_and_processes(void **state)
{
    (void)state;
    NV_OK(nvmlInit_v2());
    CU_OK(cuInit(0));
    nvmlDevice_t d = dev(0);
    unsigned n = 0;
    /* this process only reads: no context, not listed, nothing used */
    NV_OK(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL));
    assert_int_equal(n, 0);
    assert_int_equal(nvml_free(0), 4 * GiB);
    int r1, r2;
    pid_t a = child_with_context(0, &r1);
    pid_t b = child_with_context(100 * MiB, &r2);
    /* free memory drops by two overheads and the allocation */
    assert_int_equal(nvml_free(0), 4 * GiB - 2 * OVERHEAD - 100 * MiB);
    assert_int_equal(nvml_free(1), 3 * GiB);
    nvmlMemory_v2_t m2;
    memset(&m2, 0, sizeof m2);
    m2.version = nvmlMemory_v2;
    NV_OK(nvmlDeviceGetMemoryInfo_v2(d, &m2));
    assert_int_equal(m2.reserved, 0);
    assert_int_equal(m2.used, 2 * OVERHEAD + 100 * MiB);
    m2.version = 1;
    assert_int_equal(nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    /* sizing: no room says how many; too little room too */
    n = 0;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    nvmlProcessInfo_t v3[4];
    n = 1;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, v3), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    n = 4;
    NV_OK(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, v3));
    assert_int_equal(n, 2);
    nvmlProcessInfo_v2_t v2[4];
    nvmlProcessInfo_v1_t v1[4];
    unsigned n2 = 4, n1 = 4;
    NV_OK(nvmlDeviceGetComputeRunningProcesses_v2(d, &n2, v2));
    NV_OK(nvmlDeviceGetComputeRunningProcesses(d, &n1, v1));
    assert_int_equal(n2, 2);
    assert_int_equal(n1, 2);
    for (unsigned i = 0; i < 2; i++) {
        unsigned long long want = v3[i].pid == (unsigned)a ? OVERHEAD : OVERHEAD + 100 * MiB;
        assert_true(v3[i].pid == (unsigned)a || v3[i].pid == (unsigned)b);
        assert_int_equal(v3[i].usedGpuMemory, want);
        assert_int_equal(v3[i].gpuInstanceId, 0xFFFFFFFFu);
        assert_int_equal(v2[i].pid, v3[i].pid);
        assert_int_equal(v2[i].usedGpuMemory, want);
        assert_int_equal(v1[i].pid, v3[i].pid);
        assert_int_equal(v1[i].usedGpuMemory, want);
    }
    /* the overhead is no allocation: this process's own context adds its
     * overhead to free memory's drop, and no live bytes */
    CUcontext c;
    CU_OK(cuCtxCreate(&c, NULL, 0, 0));
    assert_int_equal(vramsim_live_bytes(0), 0);
    assert_int_equal(nvml_free(0), 4 * GiB - 3 * OVERHEAD - 100 * MiB);
    size_t f, t;
    CU_OK(cuMemGetInfo(&f, &t));
    assert_int_equal(f, 4 * GiB - 3 * OVERHEAD - 100 * MiB);
    CU_OK(cuCtxDestroy(c));
    /* the children end: their overhead and memory come back */
    close(r1);
    close(r2);
    int st;
    assert_int_equal(waitpid(a, &st, 0), a);
    assert_int_equal(waitpid(b, &st, 0), b);
    assert_int_equal(nvml_free(0), 4 * GiB);
    n = 0;
    NV_OK(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL));
    assert_int_equal(n, 0);
    NV_OK(nvmlShutdown());
}

/* A full card refuses a context, as a real one does. */
static void full_card_refuses_a_context(void **state)
{
    (void)state;
    CU_OK(cuInit(0));
    CUcontext c, c2;
    CU_OK(cuCtxCreate(&c, NULL, 0, 1));
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 3 * GiB - OVERHEAD - 100 * MiB));
    CU_ERR(cuCtxCreate(&c2, NULL, 0, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemFree(p));
    CU_OK(cuCtxCreate(&c2, NULL, 0, 1));
    CU_OK(cuCtxDestroy(c2));
    CU_OK(cuCtxDestroy(c));
    assert_int_equal(vramsim_card_used(1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cards_agree_with_cuda),
        cmocka_unit_test(overhead_and_processes),
        cmocka_unit_test(full_card_refuses_a_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

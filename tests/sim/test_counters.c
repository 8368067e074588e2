/* The extension API: per-process call counters, live bytes and counts over
 * every allocation path, and the card-wide charge. */
#include "sim_test.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static void call_counters(void **state)
{
    (void)state;
    sim_test_setup(0);
    vramsim_reset_calls();
    assert_int_equal(vramsim_calls("cuMemAlloc_v2"), 0);
    CUdeviceptr p;
    CU_OK(cuMemAlloc_v2(&p, 100));
    CU_ERR(cuMemAlloc_v2(NULL, 100), CUDA_ERROR_INVALID_VALUE);   /* failed calls count too */
    assert_int_equal(vramsim_calls("cuMemAlloc_v2"), 2);
    /* the legacy 32-bit entry point (cuda.h maps the name to _v2) */
    CUresult (*legacy)(unsigned int *, unsigned int) =
        (CUresult(*)(unsigned int *, unsigned int))dlsym(RTLD_DEFAULT, "cuMemAlloc");
    assert_non_null(legacy);
    unsigned int p32;
    assert_int_not_equal(legacy(&p32, 100), CUDA_SUCCESS);   /* 32-bit pointers: refused */
    assert_int_equal(vramsim_calls("cuMemAlloc"), 1);
    CU_OK(cuMemFree(p));
    assert_int_equal(vramsim_calls("cuMemFree_v2"), 1);
    assert_int_equal(vramsim_calls("cuMemFree"), 0);
    assert_int_equal(vramsim_calls("cuNoSuchFunction"), 0);
    assert_int_equal(vramsim_calls(NULL), 0);
    void *fn;
    CU_OK(cuGetProcAddress("cuMemAlloc", &fn, 3020, 0, NULL));
    assert_int_equal(vramsim_calls("cuGetProcAddress_v2"), 1);
    vramsim_reset_calls();
    assert_int_equal(vramsim_calls("cuMemFree_v2"), 0);
    /* reachable by name, as tests of the shim find them */
    uint64_t (*calls)(const char *) = (uint64_t(*)(const char *))dlsym(RTLD_DEFAULT, "vramsim_calls");
    assert_ptr_equal(calls, vramsim_calls);
}

static void live_bytes_every_path(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUdeviceptr a, b, c, d;
    size_t pitch;
    CU_OK(cuMemAlloc(&a, 1000));
    CU_OK(cuMemAllocPitch(&b, &pitch, 700, 3, 4));
    CU_OK(cuMemAllocManaged(&c, 5000, CU_MEM_ATTACH_GLOBAL));
    CU_OK(cuMemAllocAsync(&d, 777, 0));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    CU_OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    uint64_t want = 1000 + pitch * 3 + 5000 + 777 + 2 * MiB;
    assert_int_equal(vramsim_live_bytes(0), want);
    assert_int_equal(vramsim_live_count(0), 5);
    /* charged: cuMemAlloc paths in 512 B units, physical memory exactly */
    uint64_t charged = 1024 + pitch * 3 + 5120 + 1024 + 2 * MiB;
    assert_int_equal(vramsim_card_used(0), charged);
    assert_int_equal(vramsim_live_bytes(1), 0);
    assert_int_equal(vramsim_live_bytes(-1), 0);
    assert_int_equal(vramsim_card_used(99), 0);
    CU_OK(cuMemFree(a));
    CU_OK(cuMemFree(b));
    CU_OK(cuMemFree(c));
    CU_OK(cuMemFreeAsync(d, 0));
    CU_OK(cuMemRelease(h));
    CU_OK(cuStreamSynchronize(0));
    assert_int_equal(vramsim_live_bytes(0), 0);
    assert_int_equal(vramsim_live_count(0), 0);
    assert_int_equal(vramsim_card_used(0), 0);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* VRAMSIM_ALLOC_LATENCY_US slows cuMemAlloc and cuMemFree (a lower bound
 * only: a slow machine cannot fail it). A forked child starts clean, so it
 * reads the variable at its own cuInit. */
static void alloc_latency(void **state)
{
    (void)state;
    sim_test_setup(0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("VRAMSIM_ALLOC_LATENCY_US", "20000", 1);
        CUcontext c;
        CUdeviceptr p;
        if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c)) _exit(2);
        double t0 = now_ms();
        if (cuMemAlloc(&p, 4096)) _exit(3);
        double t1 = now_ms();
        if (cuMemFree(p)) _exit(4);
        double t2 = now_ms();
        _exit(t1 - t0 >= 19.0 && t2 - t1 >= 19.0 ? 0 : 5);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(call_counters), cmocka_unit_test(live_bytes_every_path),
                                       cmocka_unit_test(alloc_latency)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Streams really run later (VRAMSIM_ASYNC_DELAY_US=20000 per op), in
 * order, on another thread; events order work across streams; a block
 * reused before its pending work ran shows corrupted bytes. Device pointers
 * are host addresses, so the test reads "device" bytes directly. */
#include "sim_test.h"
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* cuda.h declares the per-thread variants only under CUDA_API_PER_THREAD_DEFAULT_STREAM */
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char uc, size_t n, CUstream s);
CUresult cuStreamSynchronize_ptsz(CUstream s);

/* Touching device bytes while a stream may be writing them is the point of
 * these checks; keep ThreadSanitizer from reporting that intended race. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NO_TSAN __attribute__((no_sanitize("thread")))
#endif
#endif
#ifndef NO_TSAN
#ifdef __SANITIZE_THREAD__
#define NO_TSAN __attribute__((no_sanitize_thread))
#else
#define NO_TSAN
#endif
#endif
NO_TSAN static unsigned char peek(CUdeviceptr p) { return *(volatile unsigned char *)(uintptr_t)p; }
NO_TSAN static void poke(CUdeviceptr p, unsigned char v, size_t n)
{
    for (size_t i = 0; i < n; i++) ((volatile unsigned char *)(uintptr_t)p)[i] = v;
}

static void async_runs_later(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUstream s;
    CUdeviceptr p;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuMemAlloc(&p, 4096));
    volatile unsigned char *host = (volatile unsigned char *)(uintptr_t)p;
    host[0] = 0;
    CU_OK(cuMemsetD8Async(p, 0xAA, 4096, s));
    assert_int_equal(peek(p), 0);
    CU_ERR(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(host[0], 0xAA);
    assert_int_equal(host[4095], 0xAA);
    CU_OK(cuStreamQuery(s));
    /* in order: a later copy sees the earlier memset */
    unsigned char out[16];
    memset(out, 0, sizeof out);
    CU_OK(cuMemsetD8Async(p, 0x3C, 16, s));
    CU_OK(cuMemcpyDtoHAsync(out, p, 16, s));
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(out[15], 0x3C);
    /* default-stream variants, legacy and per-thread */
    CU_OK(cuMemsetD8Async(p, 0x01, 1, 0));
    CU_OK(cuStreamSynchronize(0));
    assert_int_equal(host[0], 0x01);
    CU_OK(cuMemsetD8Async_ptsz(p, 0x02, 1, 0));
    CU_OK(cuStreamSynchronize_ptsz(0));
    assert_int_equal(host[0], 0x02);
    CU_ERR(cuStreamSynchronize((CUstream)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
    CU_ERR(cuMemsetD8Async(p, 0, 1, (CUstream)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuStreamDestroy(s));
    CU_ERR(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuMemFree(p));
}

/* A synchronous copy waits for blocking streams, like the legacy stream. */
static void legacy_sync_waits_for_blocking_streams(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUstream s;
    CUdeviceptr p;
    CU_OK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    CU_OK(cuMemAlloc(&p, 64));
    CU_OK(cuMemsetD8Async(p, 0x5A, 64, s));
    unsigned char b = 0;
    CU_OK(cuMemcpyDtoH(&b, p + 63, 1));
    assert_int_equal(b, 0x5A);
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuMemFree(p));
}

struct host_arg { atomic_int ran; pthread_t thread; };
static void host_fn(void *u)
{
    struct host_arg *a = u;
    a->thread = pthread_self();
    atomic_store(&a->ran, 1);
}

static void host_functions_run_on_the_worker(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUstream s;
    CU_OK(cuStreamCreate(&s, 0));
    struct host_arg a = {0};
    CU_OK(cuLaunchHostFunc(s, host_fn, &a));
    assert_int_equal(atomic_load(&a.ran), 0);
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(atomic_load(&a.ran), 1);
    assert_false(pthread_equal(a.thread, pthread_self()));
    /* destroying a stream returns at once; its work still completes */
    struct host_arg b = {0};
    CU_OK(cuLaunchHostFunc(s, host_fn, &b));
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuCtxSynchronize());
    assert_int_equal(atomic_load(&b.ran), 1);
}

static void events(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUstream s1, s2;
    CUevent start, stop, mid, nt;
    CUdeviceptr p, q;
    CU_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&start, 0));
    CU_OK(cuEventCreate(&stop, 0));
    CU_OK(cuEventCreate(&mid, 0));
    CU_OK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    CU_OK(cuEventQuery(mid));   /* never recorded: complete */
    CU_OK(cuMemAlloc(&p, 4096));
    CU_OK(cuMemAlloc(&q, 4096));
    CU_OK(cuMemsetD8(p, 0, 4096));
    CU_OK(cuEventRecord(start, s1));
    CU_OK(cuMemsetD8Async(p, 0x77, 4096, s1));
    CU_OK(cuEventRecord(mid, s1));
    CU_ERR(cuEventQuery(mid), CUDA_ERROR_NOT_READY);
    /* s2 copies p to q only after s1's memset */
    CU_OK(cuStreamWaitEvent(s2, mid, 0));
    CU_OK(cuMemcpyDtoDAsync(q, p, 4096, s2));
    CU_OK(cuEventRecord(stop, s2));
    CU_OK(cuEventSynchronize(stop));
    assert_int_equal(((unsigned char *)(uintptr_t)q)[4095], 0x77);
    CU_OK(cuEventQuery(mid));
    float ms = 0;
    CU_OK(cuEventElapsedTime(&ms, start, stop));
    assert_true(ms >= 40.0f);   /* at least two delayed ops between them */
    CU_OK(cuEventRecord(nt, s1));
    CU_OK(cuStreamSynchronize(s1));
    CU_ERR(cuEventElapsedTime(&ms, start, nt), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuEventDestroy(nt));
    CU_ERR(cuEventQuery(nt), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuEventDestroy(start));
    CU_OK(cuEventDestroy(stop));
    CU_OK(cuEventDestroy(mid));
    CU_OK(cuStreamDestroy(s1));
    CU_OK(cuStreamDestroy(s2));
    CU_OK(cuMemFree(p));
    CU_OK(cuMemFree(q));
}

/* The hazard the shim's arena must avoid, made visible: memory written by
 * the host while a stream's write to it is still pending gets clobbered. */
static void early_reuse_is_observable(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUstream s;
    CUdeviceptr p;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuMemAlloc(&p, 256));
    unsigned char *host = (unsigned char *)(uintptr_t)p;
    CU_OK(cuMemsetD8Async(p, 0xEE, 256, s));
    poke(p, 0x11, 256);                 /* "reused" before the stream ran */
    CU_OK(cuStreamSynchronize(s));
    assert_int_equal(host[0], 0xEE);    /* the new owner's bytes are gone */
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuMemFree(p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(async_runs_later), cmocka_unit_test(legacy_sync_waits_for_blocking_streams),
        cmocka_unit_test(host_functions_run_on_the_worker), cmocka_unit_test(events),
        cmocka_unit_test(early_reuse_is_observable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Cards of a set capacity shared by processes: OOM at the limit, another
 * process's use visible through cuMemGetInfo, a killed process's usage
 * reclaimed (even one killed while holding the state lock), a forked
 * child that starts clean, and where allocations start. Cards: 3GiB,1GiB. */
#include "sim_test.h"
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static size_t free_on(int dev)
{
    CUcontext c;
    size_t f = 0, t = 0;
    CU_OK(cuDevicePrimaryCtxRetain(&c, dev));
    CU_OK(cuCtxPushCurrent(c));
    CU_OK(cuMemGetInfo(&f, &t));
    CU_OK(cuCtxPopCurrent(&c));
    CU_OK(cuDevicePrimaryCtxRelease(dev));
    return f;
}

/* In a child: cuInit, a context on dev, allocate n bytes; 0 on success. */
static int child_alloc(int dev, size_t n, CUdeviceptr *p)
{
    CUcontext c;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, dev) || cuCtxSetCurrent(c)) return 1;
    return cuMemAlloc(p, n) != CUDA_SUCCESS;
}

static void capacity_and_oom(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUdeviceptr p[4];
    size_t f, t;
    CU_OK(cuMemGetInfo(&f, &t));
    assert_int_equal(t, 3 * GiB);
    assert_int_equal(f, 3 * GiB);
    CU_ERR(cuMemAlloc(&p[0], 3 * GiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
    for (int i = 0; i < 3; i++) CU_OK(cuMemAlloc(&p[i], GiB));
    CU_ERR(cuMemAlloc(&p[3], 1), CUDA_ERROR_OUT_OF_MEMORY);
    CU_OK(cuMemGetInfo(&f, &t));
    assert_int_equal(f, 0);
    assert_int_equal(vramsim_card_used(0), 3 * GiB);
    CU_OK(cuMemFree(p[1]));
    CU_OK(cuMemGetInfo(&f, &t));
    assert_int_equal(f, GiB);
    CU_OK(cuMemFree(p[0]));
    CU_OK(cuMemFree(p[2]));
    /* cuMemAlloc is charged in 512-byte units */
    CU_OK(cuMemAlloc(&p[0], 1));
    assert_int_equal(vramsim_card_used(0), 512);
    assert_int_equal(vramsim_live_bytes(0), 1);
    CU_OK(cuMemFree(p[0]));
    assert_int_equal(vramsim_card_used(0), 0);
    /* the second card is separate */
    assert_int_equal(free_on(1), GiB);
}

/* Allocations of 2 MiB or more start on 2 MiB, as the real driver places
 * them (docs/sim.md), whatever the host's mmap did just before; smaller
 * ones on at least 512 B. The memory is usable to its last byte. */
static void large_allocations_on_2mib(void **state)
{
    (void)state;
    sim_test_setup(0);
    static const size_t sizes[] = {2 * MiB, 3 * MiB + 4096, 4096, 100 * MiB + 512, 2 * MiB - 4096, 64 * MiB, 1};
    enum { N = sizeof sizes / sizeof sizes[0] };
    CUdeviceptr p[2][N];
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) {
            CU_OK(cuMemAlloc(&p[round][i], sizes[i]));
            assert_int_equal(p[round][i] % (sizes[i] >= 2 * MiB ? 2 * MiB : 512), 0);
            unsigned char *b = (unsigned char *)(uintptr_t)p[round][i];
            b[0] = 1;
            b[sizes[i] - 1] = 2;
            assert_int_equal(b[sizes[i] - 1], 2);
            assert_int_equal(b[0], sizes[i] == 1 ? 2 : 1);
        }
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) CU_OK(cuMemFree(p[round][i]));
    assert_int_equal(vramsim_card_used(0), 0);
}

static void two_processes_share_a_card(void **state)
{
    (void)state;
    sim_test_setup(0);
    int up[2], down[2];
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        CUdeviceptr p;
        char c = child_alloc(0, 512 * MiB, &p) ? 'E' : 'A';
        if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1) _exit(2);
        _exit(cuMemFree(p) == CUDA_SUCCESS ? 0 : 3);
    }
    char c;
    assert_int_equal(read(up[0], &c, 1), 1);
    assert_int_equal(c, 'A');
    assert_int_equal(free_on(0), 3 * GiB - 512 * MiB);
    assert_int_equal(vramsim_card_used(0), 512 * MiB);
    assert_int_equal(vramsim_live_bytes(0), 0);   /* per process */
    CUdeviceptr mine;
    CU_ERR(cuMemAlloc(&mine, 2 * GiB + 512 * MiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(write(down[1], "x", 1), 1);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(free_on(0), 3 * GiB);
    close(up[0]); close(up[1]); close(down[0]); close(down[1]);
}

static void killed_process_is_reclaimed(void **state)
{
    (void)state;
    sim_test_setup(0);
    int up[2];
    assert_int_equal(pipe(up), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        CUdeviceptr p;
        char c = child_alloc(0, 2 * GiB, &p) ? 'E' : 'A';
        if (write(up[1], &c, 1) != 1) _exit(2);
        for (;;) pause();
    }
    char c;
    assert_int_equal(read(up[0], &c, 1), 1);
    assert_int_equal(c, 'A');
    assert_int_equal(free_on(0), GiB);
    kill(pid, SIGKILL);
    /* dead but not reaped yet (a zombie): its memory is back already */
    siginfo_t info;
    assert_int_equal(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT), 0);
    assert_int_equal(free_on(0), 3 * GiB);
    waitpid(pid, NULL, 0);
    assert_int_equal(free_on(0), 3 * GiB);
    close(up[0]); close(up[1]);
}

/* Children hammer the state lock and are killed at random points; the
 * parent must never block on a lock a dead process held, and the usage
 * must come back exactly. */
static void killed_while_holding_the_lock(void **state)
{
    (void)state;
    sim_test_setup(0);
    srand((unsigned)time(NULL));
    for (int round = 0; round < 12; round++) {
        int up[2];
        assert_int_equal(pipe(up), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            CUdeviceptr p;
            if (child_alloc(0, 4096, &p)) _exit(2);
            if (write(up[1], "A", 1) != 1) _exit(2);
            for (;;) {
                /* cuMemGetInfo holds the lock while it checks other
                 * processes: a kill lands inside it most of the time */
                CUdeviceptr q;
                size_t f, t;
                cuMemGetInfo(&f, &t);
                if (cuMemAlloc(&q, 1 * MiB) == CUDA_SUCCESS) cuMemFree(q);
            }
        }
        char c;
        assert_int_equal(read(up[0], &c, 1), 1);
        struct timespec ts = {0, (long)(rand() % 3000) * 1000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        alarm(10);   /* a deadlock fails the test instead of hanging it */
        CUdeviceptr p;
        CU_OK(cuMemAlloc(&p, GiB));
        assert_int_equal(vramsim_card_used(0), GiB);
        CU_OK(cuMemFree(p));
        alarm(0);
        close(up[0]); close(up[1]);
    }
}

static void forked_child_starts_clean(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 64 * MiB));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        CUdeviceptr q;
        int bad = 0;
        bad |= cuMemAlloc(&q, 4096) != CUDA_ERROR_NOT_INITIALIZED;
        bad |= (vramsim_live_count(0) != 0) << 1;
        bad |= (cuInit(0) != CUDA_SUCCESS) << 2;
        bad |= (cuMemAlloc(&q, 4096) != CUDA_ERROR_INVALID_CONTEXT) << 3;   /* no context yet */
        bad |= (cuMemFree(p) != CUDA_ERROR_INVALID_VALUE) << 4;             /* the parent's */
        bad |= (vramsim_card_used(0) != 64 * MiB) << 5;
        _exit(bad);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(vramsim_live_bytes(0), 64 * MiB);
    CU_OK(cuMemFree(p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(capacity_and_oom),
        cmocka_unit_test(large_allocations_on_2mib),
        cmocka_unit_test(two_processes_share_a_card),
        cmocka_unit_test(killed_process_is_reclaimed),
        cmocka_unit_test(killed_while_holding_the_lock),
        cmocka_unit_test(forked_child_starts_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* CUDA_VISIBLE_DEVICES as the driver reads it: indexes, GPU UUIDs with or
 * without "GPU-", unique prefixes of one; the first entry that names no card
 * (or one already listed) ends the list; none left: CUDA_ERROR_NO_DEVICE.
 * A card's UUID and charges are the physical card's, whatever ordinal a
 * process gives it. Cards: 1GiB, 2GiB, 3GiB (physical 0, 1, 2). Each case
 * runs in a fork child (the parent never calls cuInit, so each child reads
 * the variable afresh). */
#include "sim_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void uuid_str(CUdevice d, char out[41])
{
    CUuuid u;
    if (cuDeviceGetUuid_v2(&u, d) != CUDA_SUCCESS) {
        out[0] = 0;
        return;
    }
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(out, 41, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* In a fresh child: CUDA_VISIBLE_DEVICES = cvd (NULL: unset); the cards it
 * sees, as their capacities in GiB ("3,1"), or the cuInit error ("e100"). */
static void seen(const char *cvd, char *out, size_t n)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        if (cvd) setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
        else unsetenv("CUDA_VISIBLE_DEVICES");
        char buf[128] = "";
        CUresult r = cuInit(0);
        int count = -1;
        if (r != CUDA_SUCCESS) {
            snprintf(buf, sizeof buf, "e%d/%d", (int)r, (int)cuDeviceGetCount(&count));
        } else {
            cuDeviceGetCount(&count);
            for (int d = 0; d < count; d++) {
                size_t total = 0;
                cuDeviceTotalMem(&total, d);
                snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%zu", d ? "," : "", total >> 30);
            }
        }
        if (write(fd[1], buf, strlen(buf) + 1) < 0) _exit(2);
        _exit(0);
    }
    close(fd[1]);
    ssize_t k = read(fd[0], out, n - 1);
    out[k > 0 ? k : 0] = 0;
    close(fd[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
}

static void visible_devices(void **state)
{
    (void)state;
    char got[128];
    seen(NULL, got, sizeof got);
    assert_string_equal(got, "1,2,3");
    seen("2,0", got, sizeof got);
    assert_string_equal(got, "3,1");
    seen(" 1 , 0", got, sizeof got);
    assert_string_equal(got, "2,1");
    seen("1,x,0", got, sizeof got);   /* an invalid entry ends the list */
    assert_string_equal(got, "2");
    seen("1,7,0", got, sizeof got);
    assert_string_equal(got, "2");
    seen("1,1,0", got, sizeof got);   /* so does one already listed */
    assert_string_equal(got, "2");
    seen("", got, sizeof got);
    assert_string_equal(got, "e100/3");   /* CUDA_ERROR_NO_DEVICE; not initialised */
    seen("5", got, sizeof got);
    assert_string_equal(got, "e100/3");
    /* UUIDs: whole, without "GPU-", a unique prefix; an ambiguous one ends the list */
    char u[3][41];
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("CUDA_VISIBLE_DEVICES");
        if (cuInit(0)) _exit(1);
        for (int d = 0; d < 3; d++) uuid_str(d, u[d]);
        if (write(fd[1], u, sizeof u) != (ssize_t)sizeof u) _exit(2);
        _exit(0);
    }
    close(fd[1]);
    assert_int_equal(read(fd[0], u, sizeof u), (ssize_t)sizeof u);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    assert_true(strcmp(u[0], u[1]) && strcmp(u[1], u[2]));
    char cvd[160];
    snprintf(cvd, sizeof cvd, "%s,0", u[2]);
    seen(cvd, got, sizeof got);
    assert_string_equal(got, "3,1");
    snprintf(cvd, sizeof cvd, "%s", u[1] + 4);   /* without "GPU-" */
    seen(cvd, got, sizeof got);
    assert_string_equal(got, "2");
    snprintf(cvd, sizeof cvd, "%.*s", (int)strlen(u[2]) - 2, u[2]);   /* a unique prefix */
    seen(cvd, got, sizeof got);
    assert_string_equal(got, "3");
    seen("GPU-5653494d,0", got, sizeof got);   /* a prefix of every card: ends the list */
    assert_string_equal(got, "e100/3");
}

/* A card's UUID and its charges are the physical card's: a process that
 * sees card 2 as its ordinal 0 charges card 2, as another sees it. */
static void one_card_two_ordinals(void **state)
{
    (void)state;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("CUDA_VISIBLE_DEVICES", "2", 1);
        CUcontext c;
        CUdeviceptr p;
        char mine[41];
        if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c) || cuMemAlloc(&p, 100 * MiB)) _exit(10);
        uuid_str(0, mine);
        if (vramsim_card_used(0) != 100 * MiB) _exit(11);
        int fd[2];
        if (pipe(fd)) _exit(12);
        pid_t g = fork();   /* a fresh process for the sim: reads the variable again */
        if (g == 0) {
            unsetenv("CUDA_VISIBLE_DEVICES");
            char other[41];
            if (cuInit(0)) _exit(20);
            uuid_str(2, other);
            if (strcmp(mine, other)) _exit(21);           /* the same UUID */
            if (vramsim_card_used(2) != 100 * MiB) _exit(22);   /* the same charge */
            if (vramsim_card_used(0) != 0) _exit(23);
            _exit(0);
        }
        int st;
        if (waitpid(g, &st, 0) != g || !WIFEXITED(st)) _exit(13);
        _exit(WEXITSTATUS(st));
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(visible_devices),
        cmocka_unit_test(one_card_two_ordinals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

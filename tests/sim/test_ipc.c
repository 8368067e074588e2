/* IPC handles between two processes: the exporter's bytes are visible to
 * an importer started with fork+exec (no inherited mappings), and the
 * importer's writes come back to the exporter. */
#include "sim_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (8 * MiB)

static void to_hex(const CUipcMemHandle *h, char *out)
{
    for (int i = 0; i < CU_IPC_HANDLE_SIZE; i++) sprintf(out + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

static int from_hex(const char *s, CUipcMemHandle *h)
{
    if (strlen(s) != 2 * CU_IPC_HANDLE_SIZE) return -1;
    for (int i = 0; i < CU_IPC_HANDLE_SIZE; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
        h->reserved[i] = (char)v;
    }
    return 0;
}

/* The importer: exit 0 when every check passed, else the failing step. */
static int child_main(const char *mode, const char *hex)
{
    CUipcMemHandle h;
    CUcontext c;
    CUdeviceptr p, p2;
    if (from_hex(hex, &h) || cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c)) return 10;
    if (strcmp(mode, "stale") == 0) return cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ==
                                           CUDA_ERROR_INVALID_HANDLE ? 0 : 11;
    if (cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) return 12;
    uint32_t *buf = malloc(SIZE);
    if (!buf || cuMemcpyDtoH(buf, p, SIZE)) return 13;
    for (size_t i = 0; i < SIZE / 4; i++)
        if (buf[i] != 0xC0FFEE00u + (uint32_t)(i % 251)) return 14;
    /* opening again gives the same mapping, reference counted */
    if (cuIpcOpenMemHandle(&p2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) || p2 != p) return 15;
    if (cuMemsetD32(p + SIZE / 2, 0xAB12CD34u, 1024)) return 16;
    size_t psize;
    CUdeviceptr base;
    if (cuMemGetAddressRange(&base, &psize, p + 100) || base != p || psize != SIZE) return 17;
    /* imported memory is the exporter's: not charged or counted here */
    if (vramsim_live_bytes(0) != 0) return 18;
    if (cuIpcCloseMemHandle(p) || cuIpcCloseMemHandle(p)) return 19;
    if (cuIpcCloseMemHandle(p) != CUDA_ERROR_INVALID_VALUE) return 20;
    free(buf);
    return 0;
}

static int run_child(const char *mode, const char *hex)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(SIM_TEST_EXE, SIM_TEST_EXE, mode, hex, (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static void ipc_across_processes(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, SIZE));
    uint32_t *buf = malloc(SIZE);
    assert_non_null(buf);
    for (size_t i = 0; i < SIZE / 4; i++) buf[i] = 0xC0FFEE00u + (uint32_t)(i % 251);
    CU_OK(cuMemcpyHtoD(p, buf, SIZE));
    CUipcMemHandle h;
    CU_ERR(cuIpcGetMemHandle(NULL, p), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuIpcGetMemHandle(&h, p + 512), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuIpcGetMemHandle(&h, p));
    CUdeviceptr self;
    CU_ERR(cuIpcOpenMemHandle(&self, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_CONTEXT);
    char hex[2 * CU_IPC_HANDLE_SIZE + 1];
    to_hex(&h, hex);
    assert_int_equal(run_child("open", hex), 0);
    /* the importer's memset landed in our allocation */
    CU_OK(cuMemcpyDtoH(buf, p, SIZE));
    assert_int_equal(buf[SIZE / 8], 0xAB12CD34u);
    assert_int_equal(buf[SIZE / 8 + 1023], 0xAB12CD34u);
    assert_int_equal(buf[SIZE / 8 + 1024], 0xC0FFEE00u + (uint32_t)((SIZE / 8 + 1024) % 251));
    assert_int_equal(buf[0], 0xC0FFEE00u);
    CU_OK(cuMemFree(p));
    /* a handle to freed memory no longer opens */
    assert_int_equal(run_child("stale", hex), 0);
    CUipcMemHandle junk;
    memset(&junk, 0x5a, sizeof junk);
    CU_ERR(cuIpcOpenMemHandle(&self, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_VALUE);
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc == 3) return child_main(argv[1], argv[2]);
    const struct CMUnitTest tests[] = {cmocka_unit_test(ipc_across_processes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

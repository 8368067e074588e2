/* cuGetProcAddress over every request the CUDA 13 runtime makes
 * (../shared/data/cudart13-getprocaddress.txt): each gets a sensible answer,
 * the right ABI variant (checked by the name dladdr gives back), and
 * NOT_FOUND exactly for what the sim does not export. */
#include "sim_test.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char *name_of(void *fn)
{
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_sname) return NULL;
    return info.dli_sname;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* name is sym itself or sym_vN, with an optional _ptds/_ptsz suffix */
static int is_variant(const char *name, const char *sym)
{
    size_t n = strlen(sym);
    if (strncmp(name, sym, n) != 0) return 0;
    const char *rest = name + n;
    if (rest[0] == '_' && rest[1] == 'v' && rest[2] >= '2' && rest[2] <= '9') rest += 3;
    return !*rest || !strcmp(rest, "_ptds") || !strcmp(rest, "_ptsz");
}

static void every_cudart_request(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/cudart13-getprocaddress.txt", SIM_DATA_DIR);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char sym[128];
    int ver, lines = 0, found = 0;
    unsigned long long flags;
    while (fscanf(f, "%127s %d %llu", sym, &ver, &flags) == 3) {
        lines++;
        if (strcmp(sym, "(empty)") == 0) sym[0] = 0;
        void *fn = (void *)1;
        CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
        CUresult r = cuGetProcAddress(sym, &fn, ver, flags, &st);
        if (r == CUDA_SUCCESS) {
            found++;
            assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
            const char *name = name_of(fn);
            assert_non_null(name);
            if (!is_variant(name, sym)) fail_msg("%s %d %llu answered with %s", sym, ver, flags, name);
            int pt = ends_with(name, "_ptds") || ends_with(name, "_ptsz");
            if (!(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) || ver < 7000) {
                assert_false(pt);
            } else if (!pt) {
                /* per-thread asked for: fine only if no such variant exists */
                char alt[160];
                snprintf(alt, sizeof alt, "%s_ptds", name);
                assert_null(dlsym(RTLD_DEFAULT, alt));
                snprintf(alt, sizeof alt, "%s_ptsz", name);
                assert_null(dlsym(RTLD_DEFAULT, alt));
            }
        } else {
            assert_int_equal(r, CUDA_ERROR_NOT_FOUND);
            assert_null(fn);
            assert_true(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND ||
                        st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
            /* not found means the sim really does not implement it */
            if (sym[0]) {
                char alt[160];
                assert_null(dlsym(RTLD_DEFAULT, sym));
                snprintf(alt, sizeof alt, "%s_v2", sym);
                assert_null(dlsym(RTLD_DEFAULT, alt));
            }
        }
    }
    fclose(f);
    assert_int_equal(lines, 440);
    print_message("cuGetProcAddress_v2: %d of %d cudart requests found\n", found, lines);
    assert_true(found >= 100);   /* 115 when written */
}

static void variants(void **state)
{
    (void)state;
    static const struct { const char *sym; int ver; unsigned long long flags; const char *want; } cases[] = {
        {"cuMemAlloc", 2000, 0, "cuMemAlloc"},
        {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
        {"cuMemAlloc", 13000, 2, "cuMemAlloc_v2"},
        {"cuMemGetInfo", 13000, 0, "cuMemGetInfo_v2"},
        {"cuMemAllocAsync", 11020, 0, "cuMemAllocAsync"},
        {"cuMemAllocAsync", 11020, 2, "cuMemAllocAsync_ptsz"},
        {"cuMemFreeAsync", 12000, 2, "cuMemFreeAsync_ptsz"},
        {"cuMemcpyHtoD", 3020, 0, "cuMemcpyHtoD_v2"},
        {"cuMemcpyHtoD", 3020, 2, "cuMemcpyHtoD_v2"},      /* per-thread exists from 7.0 */
        {"cuMemcpyHtoD", 7000, 2, "cuMemcpyHtoD_v2_ptds"},
        {"cuMemcpyHtoD", 7000, 3, "cuMemcpyHtoD_v2"},      /* legacy stream wins */
        {"cuMemcpy", 7000, 2, "cuMemcpy_ptds"},
        {"cuMemsetD8Async", 7000, 2, "cuMemsetD8Async_ptsz"},
        {"cuStreamSynchronize", 7000, 2, "cuStreamSynchronize_ptsz"},
        {"cuCtxCreate", 3020, 0, "cuCtxCreate_v2"},
        {"cuCtxCreate", 13000, 0, "cuCtxCreate_v4"},
        {"cuEventElapsedTime", 2000, 0, "cuEventElapsedTime"},
        {"cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2"},
        {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
        {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
        {"cuIpcOpenMemHandle", 4010, 0, "cuIpcOpenMemHandle"},
        {"cuIpcOpenMemHandle", 11000, 0, "cuIpcOpenMemHandle_v2"},
        {"cuDevicePrimaryCtxRelease", 7000, 0, "cuDevicePrimaryCtxRelease"},
        {"cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2"},
        {"cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2"},
        {"cuMemCreate", 10020, 0, "cuMemCreate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult st;
        CU_OK(cuGetProcAddress(cases[i].sym, &fn, cases[i].ver, cases[i].flags, &st));
        const char *name = name_of(fn);
        assert_non_null(name);
        if (strcmp(name, cases[i].want) != 0)
            fail_msg("%s %d %llu: got %s, want %s", cases[i].sym, cases[i].ver, cases[i].flags, name, cases[i].want);
    }
}

static void edge_cases(void **state)
{
    (void)state;
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
    CU_ERR(cuGetProcAddress("", &fn, 0, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_null(fn);
    CU_ERR(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CU_ERR(cuGetProcAddress("cuMemAllocAsync", &fn, 11000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CU_ERR(cuGetProcAddress(NULL, &fn, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuGetProcAddress("cuInit", NULL, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuGetProcAddress("cuInit", &fn, 13000, 4, &st), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuGetProcAddress("cuInit", &fn, 13000, 0, NULL));   /* status is optional */
    /* the legacy 4-argument entry point */
    CUresult (*legacy)(const char *, void **, int, cuuint64_t) =
        (CUresult(*)(const char *, void **, int, cuuint64_t))dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    assert_non_null(legacy);
    CU_OK(legacy("cuMemFree", &fn, 3020, 0));
    assert_string_equal(name_of(fn), "cuMemFree_v2");
    CU_ERR(legacy("", &fn, 0, 0), CUDA_ERROR_NOT_FOUND);
    /* what comes back is callable */
    CU_OK(cuGetProcAddress("cuDriverGetVersion", &fn, 13000, 0, &st));
    int v = 0;
    CU_OK(((CUresult(*)(int *))fn)(&v));
    assert_int_equal(v, 13000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_cudart_request), cmocka_unit_test(variants), cmocka_unit_test(edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

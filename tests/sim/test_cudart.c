/* NVIDIA's own runtime (libcudart from the toolkit) over the sim: it
 * dlopens libcuda.so.1 (this process already has the sim under that
 * soname), resolves every driver function through cuGetProcAddress_v2, and
 * stops at cuGetExportTable, which the sim cannot serve; cudaMalloc then
 * fails cleanly. Only what is true is asserted. */
#include "sim_test.h"
#include <cuda_runtime_api.h>
#include <stdio.h>

static void runtime_reaches_the_sim(void **state)
{
    (void)state;
    vramsim_reset_calls();
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, 1 << 20);
    print_message("cudaMalloc: %d (%s); cuGetProcAddress_v2 lookups: %llu, cuGetExportTable: %llu\n", (int)e,
                  cudaGetErrorString(e), (unsigned long long)vramsim_calls("cuGetProcAddress_v2"),
                  (unsigned long long)vramsim_calls("cuGetExportTable"));
    assert_int_not_equal(e, cudaSuccess);
    assert_null(p);
    assert_true(vramsim_calls("cuGetProcAddress_v2") >= 400);   /* 440 with CUDA 13.0 */
    assert_true(vramsim_calls("cuGetExportTable") >= 1);
    assert_true(vramsim_calls("cuDriverGetVersion") >= 1);
    /* nothing was allocated on the card */
    assert_int_equal(vramsim_live_count(0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(runtime_reaches_the_sim)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

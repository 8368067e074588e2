/* CUDA arrays on the simulated card (tools/sim/array.c): charged to the
 * card by the sim's model (rows padded to 512 B; 64 KiB pages below 2 MiB,
 * 2 MiB pages from there), refused at
 * the card's limit, given back by cuArrayDestroy and by the context's end,
 * descriptors read back, bad descriptors and handles refused. Card: 1GiB. */
#include "sim_test.h"

static void arrays_charge_the_card(void **state)
{
    (void)state;
    sim_test_setup(0);
    uint64_t base = vramsim_card_used(0);
    /* 1000 x 1000 float4: rows of 16,000 B padded to 16,384, 15.6 MiB -> 16 MiB */
    CUDA_ARRAY_DESCRIPTOR d2 = {1000, 1000, CU_AD_FORMAT_FLOAT, 4};
    CUarray a;
    CU_OK(cuArrayCreate(&a, &d2));
    assert_int_equal(vramsim_card_used(0) - base, 16 * MiB);
    CUDA_ARRAY_DESCRIPTOR back;
    CU_OK(cuArrayGetDescriptor(&back, a));
    assert_int_equal(back.Width, 1000);
    assert_int_equal(back.Height, 1000);
    assert_int_equal(back.Format, CU_AD_FORMAT_FLOAT);
    assert_int_equal(back.NumChannels, 4);
    /* a 3D array: 512 x 256 x 128 bytes = 16 MiB (256-byte rows would take 512 each); a layered 2D one
     * of 6 layers: 6 x 4 MiB */
    CUDA_ARRAY3D_DESCRIPTOR d3 = {512, 256, 128, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
    CUarray b, c;
    CU_OK(cuArray3DCreate(&b, &d3));
    CUDA_ARRAY3D_DESCRIPTOR l = {1024, 1024, 6, CU_AD_FORMAT_SIGNED_INT32, 1, CUDA_ARRAY3D_LAYERED};
    CU_OK(cuArray3DCreate(&c, &l));
    assert_int_equal(vramsim_card_used(0) - base, (16 + 16 + 24) * MiB);
    CUDA_ARRAY3D_DESCRIPTOR back3;
    CU_OK(cuArray3DGetDescriptor(&back3, c));
    assert_int_equal(back3.Depth, 6);
    assert_int_equal(back3.Flags, CUDA_ARRAY3D_LAYERED);
    CU_ERR(cuArrayGetDescriptor(&back, c), CUDA_ERROR_INVALID_VALUE);   /* layered: no 2D descriptor */
    /* a mipmapped 2048^2 RGBA8: 16 MiB + 4 + 1 + ... = 21.3 MiB -> 22 MiB */
    CUDA_ARRAY3D_DESCRIPTOR m = {2048, 2048, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
    CUmipmappedArray mm;
    CU_OK(cuMipmappedArrayCreate(&mm, &m, 12));
    assert_int_equal(vramsim_card_used(0) - base, (16 + 16 + 24 + 22) * MiB);
    CU_ERR(cuArrayDestroy((CUarray)mm), CUDA_ERROR_INVALID_HANDLE);   /* not a plain array */
    CU_OK(cuMipmappedArrayDestroy(mm));
    CU_OK(cuArrayDestroy(b));
    CU_OK(cuArrayDestroy(a));
    CU_ERR(cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(vramsim_card_used(0) - base, 24 * MiB);
    CU_OK(cuArrayDestroy(c));
    assert_int_equal(vramsim_card_used(0), base);
    /* small: 100 x 100 bytes, rows of 512 B: 50 KiB in one 64 KiB page */
    CUDA_ARRAY3D_DESCRIPTOR small = {100, 100, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
    CU_OK(cuArray3DCreate(&a, &small));
    assert_int_equal(vramsim_card_used(0) - base, 64 << 10);
    CU_OK(cuArrayDestroy(a));
}

static void arrays_refused_at_the_limit(void **state)
{
    (void)state;
    sim_test_setup(0);
    uint64_t base = vramsim_card_used(0);
    /* 16384 x 16384 float: 1 GiB, more than the card holds with anything on it */
    CUDA_ARRAY3D_DESCRIPTOR big = {16384, 16384, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, 2 * MiB));
    CUarray a;
    CU_ERR(cuArray3DCreate(&a, &big), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(vramsim_card_used(0) - base, 2 * MiB);
    CU_OK(cuMemFree(p));
}

static void arrays_bad_descriptors(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUarray a;
    CUDA_ARRAY3D_DESCRIPTOR zero = {0, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    CU_ERR(cuArray3DCreate(&a, &zero), CUDA_ERROR_INVALID_VALUE);
    CUDA_ARRAY3D_DESCRIPTOR chans = {64, 64, 0, CU_AD_FORMAT_FLOAT, 3, 0};
    CU_ERR(cuArray3DCreate(&a, &chans), CUDA_ERROR_INVALID_VALUE);
    CUDA_ARRAY3D_DESCRIPTOR cube = {64, 32, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP};
    CU_ERR(cuArray3DCreate(&a, &cube), CUDA_ERROR_INVALID_VALUE);
    CUDA_ARRAY3D_DESCRIPTOR bc = {64, 64, 0, CU_AD_FORMAT_BC1_UNORM, 4, 0};
    CU_ERR(cuArray3DCreate(&a, &bc), CUDA_ERROR_NOT_SUPPORTED);   /* not modelled */
    CUDA_ARRAY3D_DESCRIPTOR m = {64, 64, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    CUmipmappedArray mm;
    CU_ERR(cuMipmappedArrayCreate(&mm, &m, 8), CUDA_ERROR_INVALID_VALUE);   /* 64 has 7 levels */
    CU_ERR(cuArray3DCreate(NULL, &m), CUDA_ERROR_INVALID_VALUE);
    CUDA_ARRAY3D_DESCRIPTOR huge = {(size_t)1 << 40, (size_t)1 << 40, (size_t)1 << 40, CU_AD_FORMAT_FLOAT, 4, 0};
    CU_ERR(cuArray3DCreate(&a, &huge), CUDA_ERROR_OUT_OF_MEMORY);   /* its size does not fit in 64 bits */
    CU_ERR(cuArrayDestroy((CUarray)(uintptr_t)0x1000), CUDA_ERROR_INVALID_HANDLE);
}

static void arrays_end_with_their_context(void **state)
{
    (void)state;
    CU_OK(cuInit(0));
    uint64_t base = vramsim_card_used(0);
    CUcontext c;
    CU_OK(cuCtxCreate(&c, NULL, 0, 0));
    CUDA_ARRAY3D_DESCRIPTOR d = {512, 512, 0, CU_AD_FORMAT_FLOAT, 4, 0};
    CUarray a;
    CU_OK(cuArray3DCreate(&a, &d));
    assert_true(vramsim_card_used(0) > base);
    CU_OK(cuCtxDestroy(c));
    assert_int_equal(vramsim_card_used(0), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(arrays_charge_the_card),
        cmocka_unit_test(arrays_refused_at_the_limit),
        cmocka_unit_test(arrays_bad_descriptors),
        cmocka_unit_test(arrays_end_with_their_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

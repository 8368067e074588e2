/* Peer access (context.c, vmm.c): cuCtxEnablePeerAccess /
 * cuCtxDisablePeerAccess and their errors; what a kernel on a device could
 * reach (vramsim_device_can_access): its own memory, a peer context's
 * cuMemAlloc memory once peer access is on, a VMM mapping where
 * cuMemSetAccess opened it to the device (cuMemGetAccess answers per
 * device). Cards: 1GiB, 1GiB. */
#include "sim_test.h"
#include <string.h>

static void enable_disable(void **state)
{
    (void)state;
    CUcontext c1 = sim_test_setup(1);
    CUcontext c0;
    CU_OK(cuDevicePrimaryCtxRetain(&c0, 0));
    CU_OK(cuCtxSetCurrent(c0));
    CUdeviceptr p;
    CU_OK(cuMemAlloc(&p, MiB));
    assert_int_equal(vramsim_device_can_access(0, p, MiB), 1);
    assert_int_equal(vramsim_device_can_access(1, p, MiB), 0);
    assert_int_equal(vramsim_device_can_access(1, p, 2 * MiB), 0);   /* past the block */
    CU_OK(cuCtxSetCurrent(c1));
    CU_ERR(cuCtxEnablePeerAccess(c0, 1), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_INVALID_DEVICE);
    CU_ERR(cuCtxEnablePeerAccess((CUcontext)8, 0), CUDA_ERROR_INVALID_CONTEXT);
    CU_ERR(cuCtxDisablePeerAccess(c0), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    CU_OK(cuCtxEnablePeerAccess(c0, 0));
    CU_ERR(cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    assert_int_equal(vramsim_device_can_access(1, p, MiB), 1);
    CU_OK(cuCtxDisablePeerAccess(c0));
    assert_int_equal(vramsim_device_can_access(1, p, MiB), 0);
    /* the context's end ends the pairing */
    CU_OK(cuCtxEnablePeerAccess(c0, 0));
    CU_OK(cuDevicePrimaryCtxReset(0));
    CU_OK(cuDevicePrimaryCtxRetain(&c0, 0));
    CU_ERR(cuCtxDisablePeerAccess(c0), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    CU_OK(cuDevicePrimaryCtxRelease(0));
}

static void vmm_per_device(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t G = 0;
    CU_OK(cuMemGetAllocationGranularity(&G, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle h;
    CU_OK(cuMemCreate(&h, G, &prop, 0));
    CUdeviceptr va;
    CU_OK(cuMemAddressReserve(&va, G, 0, 0, 0));
    CU_OK(cuMemMap(va, G, 0, h, 0));
    assert_int_equal(vramsim_device_can_access(0, va, G), 0);   /* mapped, no access yet */
    CUmemAccessDesc d = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CU_OK(cuMemSetAccess(va, G, &d, 1));
    assert_int_equal(vramsim_device_can_access(0, va, G), 1);
    assert_int_equal(vramsim_device_can_access(1, va, G), 0);
    unsigned long long fl = 7;
    CUmemLocation l1 = {CU_MEM_LOCATION_TYPE_DEVICE, 1};
    CU_OK(cuMemGetAccess(&fl, &l1, va));
    assert_int_equal(fl, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    d.location.id = 1;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
    CU_OK(cuMemSetAccess(va, G, &d, 1));   /* device 0 keeps its read-write */
    assert_int_equal(vramsim_device_can_access(1, va, G), 1);
    CU_OK(cuMemGetAccess(&fl, &l1, va));
    assert_int_equal(fl, CU_MEM_ACCESS_FLAGS_PROT_READ);
    CUmemLocation l0 = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CU_OK(cuMemGetAccess(&fl, &l0, va));
    assert_int_equal(fl, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CU_OK(cuMemsetD8(va, 1, G));   /* the host's view stays the widest */
    CU_OK(cuMemUnmap(va, G));
    CU_OK(cuMemRelease(h));
    CU_OK(cuMemAddressFree(va, G));
    assert_int_equal(vramsim_device_can_access(9, va, G), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(enable_disable), cmocka_unit_test(vmm_per_device)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

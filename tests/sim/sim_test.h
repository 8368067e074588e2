/* Helpers shared by the simulated driver's tests. Each test binary runs
 * with its own VRAMSIM_STATE (set by ctest), so parallel runs never share
 * cards. Tests call the Driver API as clients do: through cuda.h's names. */
#ifndef SIM_TEST_H
#define SIM_TEST_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cuda.h>
#include "vramsim.h"

#define CU_OK(call) assert_int_equal((int)(call), (int)CUDA_SUCCESS)
#define CU_ERR(call, err) assert_int_equal((int)(call), (int)(err))
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* cuInit + the primary context of dev made current; returns it. */
static inline CUcontext sim_test_setup(int dev)
{
    CUcontext c = NULL;
    CU_OK(cuInit(0));
    CU_OK(cuDevicePrimaryCtxRetain(&c, dev));
    CU_OK(cuCtxSetCurrent(c));
    return c;
}
#endif

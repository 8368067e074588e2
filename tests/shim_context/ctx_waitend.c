/* A request that waits under on_limit = wait does not hold up the end of
 * its own context (issue 9 with issue 4's wait mode).
 *
 *   ctx_waitend      (tenant waiter: limit 1 GiB, on_limit = wait:2min)
 *
 * The primary context holds 3/4 of the tenant's room (768 MiB of the 1 GiB
 * on the sim, less each context's own footprint on a real card); a second
 * thread in it asks for half the room and waits (over the limit). The main
 * thread then resets the primary context, which frees what it held.
 * Checked: the reset returns long before the wait would have run out (a
 * wait that kept its hold on the context stalled the reset for the whole 2
 * minutes), and the waiting request comes back: granted, or the driver's
 * error for a destroyed context; either way the tenant holds nothing
 * afterwards but what it was granted. */
#include "shim_test.h"

#include <cuda.h>
#include <pthread.h>
#include <time.h>

#define MiB (1ull << 20)
#define EVENTUALLY_S 30.0   /* far below the 2 min wait, far above any sane reset */

static CUcontext g_ctx;
static CUresult g_res = (CUresult)-1;
static CUdeviceptr g_p;
static size_t g_ask;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *waiter(void *arg) {
  (void)arg;
  T_CU(cuCtxSetCurrent(g_ctx));
  g_res = cuMemAlloc(&g_p, g_ask);
  return NULL;
}

int main(void) {
  t_shim();
  T_CU(cuInit(0));
  CUdevice d;
  T_CU(cuDeviceGet(&d, 0));
  T_CU(cuDevicePrimaryCtxRetain(&g_ctx, d));
  T_CU(cuCtxSetCurrent(g_ctx));
  /* The tenant's room with the context made (its footprint counts). */
  size_t fr0 = 0, tot0 = 0;
  T_CU(cuMemGetInfo(&fr0, &tot0));
  size_t hold = fr0 / 4 * 3 / MiB * MiB;
  g_ask = fr0 / 2 / MiB * MiB;
  T_SAY("room %zu MiB: holding %zu MiB, asking %zu MiB", (size_t)(fr0 / MiB), (size_t)(hold / MiB),
        (size_t)(g_ask / MiB));
  CUdeviceptr big;
  T_CU(cuMemAlloc(&big, hold));
  pthread_t t;
  T_CHECK(pthread_create(&t, NULL, waiter, NULL) == 0, "pthread_create");
  /* Let the request reach its wait (it cannot be granted before the reset). */
  struct timespec ms300 = {0, 300000000};
  nanosleep(&ms300, NULL);
  T_CHECK(g_res == (CUresult)-1, "the request waits (returned %d)", (int)g_res);
  double t0 = now_s();
  T_CU(cuDevicePrimaryCtxReset(d));
  double took = now_s() - t0;
  T_SAY("the reset returned after %.3f s", took);
  T_CHECK(took < EVENTUALLY_S, "the reset was not held up by the waiting request (%.1f s)", took);
  pthread_join(t, NULL);
  T_SAY("the waiting request returned %d", (int)g_res);
  T_CHECK(g_res == CUDA_SUCCESS || g_res == CUDA_ERROR_CONTEXT_IS_DESTROYED || g_res == CUDA_ERROR_INVALID_CONTEXT,
          "the waiting request: granted or the destroyed context's error (%d)", (int)g_res);
  /* The primary context anew (a reset leaves it to be made again). */
  size_t fr = 0, tot = 0;
  T_CU(cuDevicePrimaryCtxRetain(&g_ctx, d));
  T_CU(cuCtxSetCurrent(g_ctx));
  if (g_res == CUDA_SUCCESS) T_CU(cuMemFree(g_p));
  T_CU(cuMemGetInfo(&fr, &tot));
  T_CHECK(fr == fr0, "the tenant holds nothing afterwards but its context (free %zu, %zu before)", fr, fr0);
  T_SAY("PASS");
  return 0;
}

/* Unit test of the arena backend's books when the driver frees a chunk
 * first (arena_backend.c): a chunk whose free the driver refuses stays
 * charged and guarded while its context lives (the driver may still hold
 * it), and once the context has ended its charge goes with the backend,
 * exactly once; a chunk freed as usual is not uncharged twice. Linked with
 * the static interposer library over the simulated driver (VS_SIM_LIBCUDA,
 * no preload); the books are a real ledger in a folder of its own. The
 * driver freeing the chunk first stands for a primary context's last
 * release, which the shim learns ended the context only after the driver
 * has freed its memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "arena_backend.h"
#include "driver_table.h"
#include "interpose.h"
#include "quota.h"
#include "unit_over_sim.h"

#define MiB (1ull << 20)

static CUcontext g_ctx;

static uint64_t held(void) {
  uint64_t h = 0, o = 0;
  assert_int_equal(vs_quota_held(0, &h, &o), 0);
  return h;
}

static void refused_chunk_goes_with_its_context(void **s) {
  (void)s;
  const vs_real_table *real = vs_driver();
  vs_arena_backend be;
  assert_int_equal(vs_backend_init(0, (uint64_t)(uintptr_t)g_ctx, 0, &be), CUDA_SUCCESS);
  uint64_t h0 = held(), a = 0, b = 0;
  assert_int_equal(be.chunk_alloc(be.ctx, 4 * MiB, &a), VS_BACKEND_OK);
  assert_int_equal(be.chunk_alloc(be.ctx, 2 * MiB, &b), VS_BACKEND_OK);
  assert_int_equal(held(), h0 + 6 * MiB);
  assert_int_equal(be.chunk_free(be.ctx, b, 2 * MiB), VS_BACKEND_OK);   /* as usual */
  assert_int_equal(held(), h0 + 4 * MiB);
  assert_int_equal(vs_backend_holds(b), 0);
  /* The driver frees a first: its free through the backend is refused, and
   * while the context lives the chunk stays charged and guarded. */
  assert_int_equal(real->cuMemFree_v2((CUdeviceptr)a), CUDA_SUCCESS);
  assert_int_equal(be.chunk_free(be.ctx, a, 4 * MiB), VS_BACKEND_ERROR);
  assert_int_equal(held(), h0 + 4 * MiB);
  assert_int_equal(vs_backend_holds(a), 1);
  /* The context ends: the driver has freed every chunk of it. */
  vs_backend_ended(be.ctx);
  vs_backend_free(be.ctx);
  assert_int_equal(held(), h0);
  assert_int_equal(vs_backend_holds(a), 0);
}

/* A backend freed while its context lives moves no books. */
static void live_context_keeps_its_books(void **s) {
  (void)s;
  const vs_real_table *real = vs_driver();
  vs_arena_backend be;
  assert_int_equal(vs_backend_init(0, (uint64_t)(uintptr_t)g_ctx, 0, &be), CUDA_SUCCESS);
  uint64_t h0 = held(), a = 0;
  assert_int_equal(be.chunk_alloc(be.ctx, 4 * MiB, &a), VS_BACKEND_OK);
  assert_int_equal(real->cuMemFree_v2((CUdeviceptr)a), CUDA_SUCCESS);
  assert_int_equal(be.chunk_free(be.ctx, a, 4 * MiB), VS_BACKEND_ERROR);
  vs_backend_free(be.ctx);
  assert_int_equal(held(), h0 + 4 * MiB);
  vs_quota_uncharge(0, 4 * MiB);   /* the test's own clean-up */
}

static char g_dir[] = "/tmp/vs-unit-backend-XXXXXX";

static int setup(void **s) {
  (void)s;
  if (unit_over_sim_setup(g_dir, "chunks", "1GiB")) return -1;
  const vs_real_table *real = vs_driver();
  if (real->cuDevicePrimaryCtxRetain(&g_ctx, 0) != CUDA_SUCCESS || real->cuCtxPushCurrent_v2(g_ctx) != CUDA_SUCCESS)
    return -1;
  return vs_quota_open(0);
}

static int teardown(void **s) {
  (void)s;
  vs_driver()->cuDevicePrimaryCtxRelease_v2(0);
  return unit_over_sim_teardown(g_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(refused_chunk_goes_with_its_context),
      cmocka_unit_test(live_context_keeps_its_books),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}

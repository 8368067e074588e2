/* Threads that allocate in different contexts at once (issue 9), labelled
 * concurrent (TSan).
 *
 * One thread works in the primary context all along; the others each
 * create a context, allocate blocks of several sizes with their own
 * pattern, free half, destroy the context (the driver frees the rest) and
 * start again. The primary thread's blocks keep their bytes while the
 * others' contexts come and go; each thread's blocks keep theirs until its
 * context ends; nothing of an ended context is handed out again (a copy
 * into such memory would fail or fault); at the end the shim holds nothing
 * and agrees with the driver. */
#include "shim_test.h"

#include <cuda.h>
#include <pthread.h>

enum { WORKERS = 3, ROUNDS = 6, BLOCKS = 12 };
static const size_t sizes[4] = {700, 48 << 10, 1 << 20, 5 << 20};
static CUcontext g_primary;
static _Atomic int g_workers_done;

static void fill_check(CUdeviceptr p, size_t n, unsigned char v) {
  T_CU(cuMemsetD8(p, v, n));
  unsigned char b[2] = {0, 0};
  T_CU(cuMemcpyDtoH(&b[0], p, 1));
  T_CU(cuMemcpyDtoH(&b[1], p + n - 1, 1));
  T_CHECK(b[0] == v && b[1] == v, "block 0x%llx (%zu B) reads %u/%u, wrote %u", (unsigned long long)p, n, b[0], b[1],
          v);
}

static void still(CUdeviceptr p, size_t n, unsigned char v) {
  unsigned char b[2] = {0, 0};
  T_CU(cuMemcpyDtoH(&b[0], p, 1));
  T_CU(cuMemcpyDtoH(&b[1], p + n - 1, 1));
  T_CHECK(b[0] == v && b[1] == v, "block 0x%llx (%zu B) lost its pattern %u (%u/%u)", (unsigned long long)p, n, v,
          b[0], b[1]);
}

static void *worker(void *arg) {
  int w = (int)(intptr_t)arg;
  for (int r = 0; r < ROUNDS; r++) {
    CUcontext c = NULL;
    T_CU(cuCtxCreate(&c, NULL, 0, 0));
    CUdeviceptr p[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
      T_CU(cuMemAlloc(&p[i], sizes[i % 4]));
      fill_check(p[i], sizes[i % 4], (unsigned char)(16 * w + i));
      CUcontext owner = NULL;
      T_CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p[i]));
      T_CHECK(owner == c, "worker %d round %d block %d: context %p, not %p", w, r, i, (void *)owner, (void *)c);
    }
    for (int i = 0; i < BLOCKS; i++) still(p[i], sizes[i % 4], (unsigned char)(16 * w + i));
    for (int i = 0; i < BLOCKS; i += 2) T_CU(cuMemFree(p[i]));
    /* The odd blocks go with the context (a free of one afterwards is
     * ctx_teardown's check: here another thread may own the address by then). */
    T_CU(cuCtxDestroy(c));
  }
  g_workers_done++;
  return NULL;
}

static void *primary(void *arg) {
  (void)arg;
  T_CU(cuCtxSetCurrent(g_primary));
  enum { KEEP = 16 };
  CUdeviceptr keep[KEEP];
  for (int i = 0; i < KEEP; i++) {
    T_CU(cuMemAlloc(&keep[i], sizes[i % 4]));
    fill_check(keep[i], sizes[i % 4], (unsigned char)(200 + i));
  }
  int laps = 0;
  while (g_workers_done < WORKERS || laps < 3) {
    CUdeviceptr t = 0;
    T_CU(cuMemAlloc(&t, sizes[laps % 4]));
    fill_check(t, sizes[laps % 4], 0x5a);
    T_CU(cuMemFree(t));
    for (int i = 0; i < KEEP; i++) still(keep[i], sizes[i % 4], (unsigned char)(200 + i));
    laps++;
  }
  for (int i = 0; i < KEEP; i++) T_CU(cuMemFree(keep[i]));
  return NULL;
}

int main(void) {
  shim_api shim = t_shim();
  sim_api sim = t_sim(RTLD_DEFAULT);
  g_primary = t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  pthread_t th[WORKERS + 1];
  T_CHECK(pthread_create(&th[WORKERS], NULL, primary, NULL) == 0, "pthread_create");
  for (int w = 0; w < WORKERS; w++)
    T_CHECK(pthread_create(&th[w], NULL, worker, (void *)(intptr_t)w) == 0, "pthread_create");
  for (int w = 0; w <= WORKERS; w++) pthread_join(th[w], NULL);
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 0, "live bytes at the end");
  T_CU(cuDevicePrimaryCtxRelease(0));
  st = t_stats(&shim, 0);
  T_EQ_U64(st.reserved_bytes, 0, "reserved bytes once the primary context ended");
  if (sim.live_bytes) T_EQ_U64(sim.live_bytes(0), 0, "the sim's live bytes once every context ended");
  T_SAY("%d threads in their own contexts, %d rounds each, beside the primary context: PASS", WORKERS, ROUNDS);
  return 0;
}

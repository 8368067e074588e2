/* The last cuDevicePrimaryCtxRelease ends the primary context inside the
 * driver before the shim's hook learns so; while that call is on its way
 * back, no other thread's trim may free the context's arena memory in the
 * driver (which freed it with the context and may have handed the
 * addresses to another context by then).
 *
 *   ctx_lastrelease   (over the sim with VRAMSIM_END_LATENCY_US: the ending
 *                      call sleeps after the context's memory is freed)
 *
 * The primary context caches half the tenant's room in its arena (a block
 * allocated and freed). A second thread, in a context of its own, asks for
 * three quarters of the room while the main thread's last release is in
 * that window: refused by the books, its arena's ladder trims the card's
 * other arenas, which must leave the ending one alone. Checked: the driver
 * is asked to free nothing from the go until the end (chunks: the ended
 * context's chunks leave the books only; VMM: no trim unmaps a handle
 * before the context's end releases them), the log has no refused free,
 * the request comes back (granted or refused), and the tenant holds
 * nothing afterwards but its context. */
#include "shim_test.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1ull << 20)

static _Atomic int g_ready, g_go;
static CUresult g_res = (CUresult)-1;
static size_t g_ask;
static CUdevice g_dev;

static void nap_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void *asker(void *arg) {
  (void)arg;
  CUcontext c;
  T_CU(cuCtxCreate(&c, NULL, 0, g_dev));
  atomic_store(&g_ready, 1);
  while (!atomic_load(&g_go)) nap_ms(1);
  nap_ms(500);   /* inside the release's window (the sim sleeps 1.5 s in it): a wide margin on a loaded machine */
  CUdeviceptr p = 0;
  g_res = cuMemAlloc(&p, g_ask);
  if (g_res == CUDA_SUCCESS) T_CU(cuMemFree(p));
  T_CU(cuCtxDestroy(c));
  return NULL;
}

/* The log file VRAMSHIM_LOG names (file:PATH), or NULL. */
static const char *log_path(void) {
  const char *l = getenv("VRAMSHIM_LOG");
  const char *f = l ? strstr(l, "file:") : NULL;
  return f ? f + 5 : NULL;
}

int main(void) {
  t_shim();
  sim_api sim = t_sim(RTLD_DEFAULT);
  if (!sim.calls) {
    T_SAY("SKIP: needs the sim's counters and its VRAMSIM_END_LATENCY_US");
    return 77;
  }
  const char *log = log_path();
  T_CHECK(log != NULL, "VRAMSHIM_LOG names no file");
  T_CHECK(truncate(log, 0) == 0 || errno == ENOENT, "truncate %s", log);
  T_CU(cuInit(0));
  T_CU(cuDeviceGet(&g_dev, 0));
  CUcontext p;
  T_CU(cuDevicePrimaryCtxRetain(&p, g_dev));
  T_CU(cuCtxSetCurrent(p));
  size_t fr0 = 0, tot = 0;
  T_CU(cuMemGetInfo(&fr0, &tot));
  size_t cache = fr0 / 2 / MiB * MiB;
  g_ask = fr0 / 4 * 3 / MiB * MiB;
  CUdeviceptr b;
  T_CU(cuMemAlloc(&b, cache));
  T_CU(cuMemFree(b));   /* cached by the primary context's arena (arena = off: given back) */
  T_SAY("room %zu MiB: %zu MiB cached by the primary context, the other thread asks %zu MiB", (size_t)(fr0 / MiB),
        (size_t)(cache / MiB), (size_t)(g_ask / MiB));
  pthread_t t;
  T_CHECK(pthread_create(&t, NULL, asker, NULL) == 0, "pthread_create");
  while (!atomic_load(&g_ready)) nap_ms(1);
  T_CU(cuCtxSetCurrent(NULL));
  uint64_t frees0 = sim.calls("cuMemFree_v2"), unmaps0 = sim.calls("cuMemUnmap");
  atomic_store(&g_go, 1);
  T_CU(cuDevicePrimaryCtxRelease(g_dev));   /* the last: the context ends */
  pthread_join(t, NULL);
  uint64_t frees = sim.calls("cuMemFree_v2") - frees0, unmaps = sim.calls("cuMemUnmap") - unmaps0;
  T_SAY("the request returned %d; the driver was asked %llu cuMemFree, %llu cuMemUnmap", (int)g_res,
        (unsigned long long)frees, (unsigned long long)unmaps);
  T_CHECK(g_res == CUDA_SUCCESS || g_res == CUDA_ERROR_OUT_OF_MEMORY, "the request: granted or refused (%d)",
          (int)g_res);
  /* The asker's own block (if granted) is its arena's until its context's
   * end, which frees nothing either in chunks mode; with the arena off it
   * is one cuMemFree of the driver's. */
  T_CHECK(frees <= (g_res == CUDA_SUCCESS ? 1u : 0u), "no trim freed the ending context's chunks (%llu cuMemFree)",
          (unsigned long long)frees);
  char line[512];
  FILE *f = fopen(log, "r");
  int refused = 0;
  while (f && fgets(line, sizeof line, f)) {
    fputs(line, stderr);
    if (strstr(line, "refused to free")) refused = 1;
  }
  if (f) fclose(f);
  T_CHECK(!refused, "the log has a refused free of arena memory");
  /* The books: nothing but a new context's own. */
  T_CU(cuDevicePrimaryCtxRetain(&p, g_dev));
  T_CU(cuCtxSetCurrent(p));
  size_t fr = 0;
  T_CU(cuMemGetInfo(&fr, &tot));
  T_CHECK(fr == fr0, "the tenant holds nothing afterwards but its context (free %zu, %zu before)", fr, fr0);
  T_CU(cuDevicePrimaryCtxRelease(g_dev));
  T_SAY("PASS");
  return 0;
}

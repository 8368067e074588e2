/* vramshim-replay-child: replays one allocation trace (RMM logging CSV)
 * with real driver calls, cuMemAlloc_v2 and cuMemFree_v2 on the primary
 * context of device 0, and prints one line of numbers read from the shim
 * in it (vramshim_stats, found through the platform's vs_plat_shim_sym:
 * dlsym on Linux, vramshim.dll's export on Windows). `vramshim replay
 * --policy shim-off,shim-vmm,shim-chunks` runs it over the simulated
 * driver; see docs/replay.md.
 *
 * The device memory is never touched: over the sim, whose device memory is
 * sparse host memory, a trace of tens of GiB costs no RAM.
 *
 * Output (stdout), one line:
 *   vramshim: replay-child: result requests=N frees=N failed=N peak_live=N
 *   trace_peak_live=N peak_reserved=N driver_calls=N served_from_cache=N
 *   steady_requests=N steady_served=N ns_per_request=F live_after=N
 * peak_live, peak_reserved and driver_calls are the shim's own counters
 * (driver calls made during the replay loop); trace_peak_live is the
 * replay's own sum, so a caller can check that the shim saw every byte.
 * live_after is the shim's live bytes once every allocation still live at
 * the end of the trace has been freed (0 unless the shim lost one).
 * With --stop-at-failure the replay ends at the first refused allocation.
 * With --async every allocation is a cuMemAllocAsync on its Stream (the
 * legacy stream for 0x0/0x1, the stream made below for any other) and its
 * free a cuMemFreeAsync on the same stream, as a program on the
 * stream-ordered allocator makes them.
 * Exit status: 0 done (refusals are counted, not errors); 1 anything else. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "child.h"
#include "procenv.h"
#include "trace_csv.h"
#include "vramshim.h"

typedef int (*stats_fn)(int, vramshim_card_stats *);

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t calls_of(stats_fn stats) {
  vramshim_card_stats st;
  if (stats(0, &st)) return 0;
  uint64_t n = 0;
  for (int k = 0; k < VRAMSHIM_CALL_KINDS; k++) n += st.driver_calls[k];
  return n;
}

static int cu_fail(const char *what, CUresult r) {
  const char *name = NULL;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
  fprintf(stderr, "vramshim: replay-child: %s failed: %s (%d)\n", what, name ? name : "unknown error", (int)r);
  return 1;
}

int main(int argc, char **argv) {
  vs_plat_utf8_args(&argc, &argv);
  int stop = 0, async = 0, bad = argc < 2 || argv[1][0] == '-';
  for (int i = 2; i < argc && !bad; i++) {
    if (!strcmp(argv[i], "--stop-at-failure")) stop = 1;
    else if (!strcmp(argv[i], "--async")) async = 1;
    else bad = 1;
  }
  if (bad) {
    fprintf(stderr, "usage: vramshim-replay-child TRACE.csv [--async] [--stop-at-failure]  (run by 'vramshim "
                    "replay --policy shim-...')\n");
    return 1;
  }
  stats_fn stats;
  *(void **)&stats = vs_plat_shim_sym("vramshim_stats");
  if (!stats) {
    fprintf(stderr, "vramshim: replay-child: the shim is not in this process (no vramshim_stats)\n");
    return 1;
  }
  vs_trace t;
  char err[512];
  if (vs_trace_load(argv[1], &t, err, sizeof err)) {
    fprintf(stderr, "vramshim: %s\n", err);
    return 1;
  }
  CUresult r;
  CUdevice dev;
  CUcontext ctx;
  /* Over the sim every live allocation is a memfd: its cuInit raises
   * RLIMIT_NOFILE to the hard limit (tools/sim/config.c). */
  if ((r = cuInit(0)) != CUDA_SUCCESS) return cu_fail("cuInit", r);
  if ((r = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) return cu_fail("cuDeviceGet", r);
  if ((r = cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS) return cu_fail("cuDevicePrimaryCtxRetain", r);
  if ((r = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) return cu_fail("cuCtxSetCurrent", r);
  /* A trace with allocations on other streams than the legacy one came
   * from a program with streams of its own: make one, as it did before its
   * first allocation (the simulated policies assume the same), so the
   * shim leaves stream order (docs/arena.md) before the replay begins. */
  CUstream own = NULL;
  if (t.off_legacy && (r = cuStreamCreate(&own, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
    return cu_fail("cuStreamCreate", r);

  CUdeviceptr *addr = calloc(t.nallocs ? t.nallocs : 1, sizeof *addr);
  unsigned char *held = calloc(t.nallocs ? t.nallocs : 1, 1);
  if (!addr || !held) {
    fprintf(stderr, "vramshim: replay-child: out of memory\n");
    return 1;
  }
  uint64_t requests = 0, frees = 0, failed = 0, cached = 0, steady = 0, steady_cached = 0;
  uint64_t live = 0, peak = 0;
  double in_driver = 0; /* ns spent inside the allocation and free calls */
  uint64_t calls0 = calls_of(stats);
  for (size_t i = 0; i < t.nev; i++) {
    uint32_t id = t.ev[i].id;
    uint64_t size = t.sizes[id];
    CUstream on = t.streams[id] <= 1 ? NULL : own;
    if (t.ev[i].free) {
      if (!held[id]) continue; /* its allocation was refused */
      double a = now_ns();
      r = async ? cuMemFreeAsync(addr[id], on) : cuMemFree_v2(addr[id]);
      in_driver += now_ns() - a;
      if (r != CUDA_SUCCESS) return cu_fail(async ? "cuMemFreeAsync" : "cuMemFree_v2", r);
      held[id] = 0;
      live -= size;
      frees++;
      continue;
    }
    requests++;
    /* Served from cache: no driver call of any kind during the allocation,
     * by the shim's own per-card counters. */
    uint64_t before = calls_of(stats);
    double a = now_ns();
    r = async ? cuMemAllocAsync(&addr[id], (size_t)size, on) : cuMemAlloc_v2(&addr[id], (size_t)size);
    in_driver += now_ns() - a;
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      failed++;
      if (stop) break; /* a smallest-card search only needs yes or no */
      continue;
    }
    if (r != CUDA_SUCCESS) return cu_fail(async ? "cuMemAllocAsync" : "cuMemAlloc_v2", r);
    int from_cache = calls_of(stats) == before;
    held[id] = 1;
    live += size;
    cached += (uint64_t)from_cache;
    if (live > peak) {
      peak = live;
    } else {
      steady++;
      steady_cached += (uint64_t)from_cache;
    }
  }
  vramshim_card_stats st;
  if (stats(0, &st)) {
    fprintf(stderr, "vramshim: replay-child: vramshim_stats(0) failed\n");
    return 1;
  }
  uint64_t calls = calls_of(stats) - calls0;
  for (uint32_t id = 0; id < t.nallocs; id++)
    if (held[id] && (r = cuMemFree_v2(addr[id])) != CUDA_SUCCESS) return cu_fail("cuMemFree_v2 (end)", r);
  vramshim_card_stats end;
  if (stats(0, &end)) end.live_bytes = UINT64_MAX;
  printf("vramshim: replay-child: result requests=%llu frees=%llu failed=%llu peak_live=%llu trace_peak_live=%llu "
         "peak_reserved=%llu driver_calls=%llu served_from_cache=%llu steady_requests=%llu steady_served=%llu "
         "ns_per_request=%.1f live_after=%llu\n",
         (unsigned long long)requests, (unsigned long long)frees, (unsigned long long)failed,
         (unsigned long long)st.peak_live_bytes, (unsigned long long)peak,
         (unsigned long long)st.peak_reserved_bytes, (unsigned long long)calls, (unsigned long long)cached,
         (unsigned long long)steady, (unsigned long long)steady_cached,
         requests ? in_driver / (double)requests : 0.0, (unsigned long long)end.live_bytes);
  fflush(stdout);
  free(addr);
  free(held);
  vs_trace_free(&t);
  (void)cuDevicePrimaryCtxRelease(dev);
  return 0;
}

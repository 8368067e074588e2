/* A benchmark, not a test: the cost of one cuMemAlloc + cuMemFree pair
 * through whatever shim is preloaded (docs/benchmarks-explain.md).
 *
 *   bench_pairs [SIZE [PAIRS [RUNS [THREADED]]]]   prints "SIZE median_ns min_ns" per pair
 *
 * THREADED = 1 starts one idle thread first, as every real CUDA program has
 * (the runtime's own): glibc's malloc takes its locked paths once a process
 * has a second thread, which the shim's background thread would otherwise
 * be blamed for.
 *
 * Run it over the sim with the shim preloaded and a config naming the
 * arena; compare shims (observation on/off) and $VRAMSHIM_TRACE set/unset. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *idle(void *arg) {
  (void)arg;
  pause();
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 4096;
  int pairs = argc > 2 ? atoi(argv[2]) : 200000, runs = argc > 3 ? atoi(argv[3]) : 15;
  if (pairs < 1 || runs < 1 || runs > 1000) return 2;
  pthread_t th;
  if (argc > 4 && atoi(argv[4]) && pthread_create(&th, NULL, idle, NULL)) return 1;
  CUcontext ctx;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
  double t[1000];
  CUdeviceptr p;
  for (int i = 0; i < pairs / 10 + 1; i++) {   /* warm: the arena holds its chunk */
    if (cuMemAlloc(&p, size) || cuMemFree(p)) return 1;
  }
  for (int r = 0; r < runs; r++) {
    double t0 = now_ns();
    for (int i = 0; i < pairs; i++) {
      cuMemAlloc(&p, size);
      cuMemFree(p);
    }
    t[r] = (now_ns() - t0) / pairs;
  }
  qsort(t, (size_t)runs, sizeof t[0], cmp);
  printf("%zu %.1f %.1f\n", size, t[runs / 2], t[0]);
  return 0;
}

/* vramshim-bench: what a hooked pass-through call costs over calling the
 * driver directly, in ns per call.
 *
 * One process loads both: the driver (the sim by default) and
 * libvramshim.so, each with RTLD_LOCAL, so the bench holds the driver's own
 * function and the shim's hook of it side by side (the shim forwards to that
 * same driver). Each measurement alternates direct and hooked runs of N
 * calls, R times, and reports medians: direct, hooked, and the median of the
 * per-run differences (the cost the shim adds); and the difference of the
 * fastest runs (less sensitive to a busy machine).
 *
 *   vramshim-bench [--runs R] [--calls N] [--shim PATH] [--driver PATH]
 * A benchmark, never a test: it prints numbers and does not judge them. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef VS_BENCH_SHIM
#define VS_BENCH_SHIM "libvramshim.so"
#endif
#ifndef VS_BENCH_DRIVER
#define VS_BENCH_DRIVER "libcuda.so.1"
#endif

typedef CUresult (*init_t)(unsigned);
typedef CUresult (*retain_t)(CUcontext *, CUdevice);
typedef CUresult (*setcur_t)(CUcontext);
typedef CUresult (*info_t)(size_t *, size_t *);
typedef CUresult (*alloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*free_t)(CUdeviceptr);
typedef CUresult (*attr_t)(void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

typedef struct fns {
  info_t info;
  alloc_t alloc;
  free_t fr;
  attr_t attr;
  gpa_t gpa;
} fns;

static fns g_direct, g_hooked;
static CUdeviceptr g_live;
static volatile uintptr_t g_sink;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *need(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p) {
    fprintf(stderr, "vramshim-bench: %s not found: %s\n", name, dlerror());
    exit(2);
  }
  return p;
}

static void fill(fns *f, void *h) {
  f->info = (info_t)need(h, "cuMemGetInfo_v2");
  f->alloc = (alloc_t)need(h, "cuMemAlloc_v2");
  f->fr = (free_t)need(h, "cuMemFree_v2");
  f->attr = (attr_t)need(h, "cuPointerGetAttribute");
  f->gpa = (gpa_t)need(h, "cuGetProcAddress_v2");
}

/* ---- the operations, each n calls ---------------------------------------- */
static void op_info(const fns *f, int n) {
  size_t a, b;
  for (int i = 0; i < n; i++) f->info(&a, &b);
  g_sink += a;
}
static void op_pair(const fns *f, int n) {
  CUdeviceptr p;
  for (int i = 0; i < n; i++) {
    f->alloc(&p, 4096);
    f->fr(p);
  }
}
static void op_attr(const fns *f, int n) {
  unsigned t = 0;
  for (int i = 0; i < n; i++) f->attr(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, g_live);
  g_sink += t;
}
static void op_gpa(const fns *f, int n) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  for (int i = 0; i < n; i++) f->gpa("cuMemAlloc", &fn, 3020, 0, &st);
  g_sink += (uintptr_t)fn;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void measure(const char *what, void (*op)(const fns *, int), int runs, int calls) {
  double *d = malloc(sizeof(double) * (size_t)runs), *h = malloc(sizeof(double) * (size_t)runs),
         *diff = malloc(sizeof(double) * (size_t)runs);
  op(&g_direct, calls / 10 + 1);   /* warm both paths */
  op(&g_hooked, calls / 10 + 1);
  for (int r = 0; r < runs; r++) {
    /* Alternate which goes first, so drift does not favour one side. */
    const fns *first = r % 2 ? &g_hooked : &g_direct, *second = r % 2 ? &g_direct : &g_hooked;
    double t0 = now_ns();
    op(first, calls);
    double t1 = now_ns();
    op(second, calls);
    double t2 = now_ns();
    double a = (t1 - t0) / calls, b = (t2 - t1) / calls;
    d[r] = r % 2 ? b : a;
    h[r] = r % 2 ? a : b;
    diff[r] = h[r] - d[r];
  }
  double md = median(d, runs), mh = median(h, runs), mdiff = median(diff, runs);
  /* d and h are sorted now: their minima are the quietest runs. */
  printf("%-34s %10.1f %10.1f %10.1f %10.1f\n", what, md, mh, mdiff, h[0] - d[0]);
  free(d);
  free(h);
  free(diff);
}

int main(int argc, char **argv) {
  int runs = 41, calls = 20000;
  const char *shim_path = VS_BENCH_SHIM, *driver_path = getenv("VRAMSHIM_DRIVER");
  if (!driver_path || !*driver_path) driver_path = VS_BENCH_DRIVER;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--shim") && i + 1 < argc) shim_path = argv[++i];
    else if (!strcmp(argv[i], "--driver") && i + 1 < argc) driver_path = argv[++i];
    else {
      fprintf(stderr, "usage: vramshim-bench [--runs R] [--calls N] [--shim PATH] [--driver PATH]\n");
      return 2;
    }
  }
  if (runs < 1 || calls < 10) return 2;
  /* The shim must forward to the very driver measured directly. */
  setenv("VRAMSHIM_DRIVER", driver_path, 1);
  char state[64];
  snprintf(state, sizeof state, "/tmp/vramshim-bench-%d.state", (int)getpid());
  if (!getenv("VRAMSIM_STATE")) setenv("VRAMSIM_STATE", state, 1);

  void *drv = dlopen(driver_path, RTLD_NOW | RTLD_LOCAL);
  if (!drv) {
    fprintf(stderr, "vramshim-bench: cannot load the driver %s: %s\n", driver_path, dlerror());
    return 2;
  }
  void *shim = dlopen(shim_path, RTLD_NOW | RTLD_LOCAL);
  if (!shim) {
    fprintf(stderr, "vramshim-bench: cannot load the shim %s: %s\n", shim_path, dlerror());
    return 2;
  }
  fill(&g_direct, drv);
  fill(&g_hooked, shim);
  CUcontext ctx;
  if (((init_t)need(drv, "cuInit"))(0) != CUDA_SUCCESS ||
      ((retain_t)need(drv, "cuDevicePrimaryCtxRetain"))(&ctx, 0) != CUDA_SUCCESS ||
      ((setcur_t)need(drv, "cuCtxSetCurrent"))(ctx) != CUDA_SUCCESS || g_direct.alloc(&g_live, 1 << 20) != CUDA_SUCCESS) {
    fprintf(stderr, "vramshim-bench: the driver did not start\n");
    return 2;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  printf("vramshim-bench: driver %s, shim %s\n", driver_path, shim_path);
  printf("vramshim-bench: %d runs x %d calls each, %ld CPUs online; medians in ns per call\n", runs, calls, cpus);
  printf("%-34s %10s %10s %10s %10s\n", "call", "direct", "hooked", "added", "min-min");
  measure("cuMemGetInfo_v2", op_info, runs, calls);
  measure("cuMemAlloc_v2 + cuMemFree_v2 (4 KiB)", op_pair, runs, calls / 20 > 10 ? calls / 20 : 10);
  measure("cuPointerGetAttribute", op_attr, runs, calls);
  measure("cuGetProcAddress_v2(cuMemAlloc)", op_gpa, runs, calls);
  g_direct.fr(g_live);
  unlink(state);
  return 0;
}

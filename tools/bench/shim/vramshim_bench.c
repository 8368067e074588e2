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
 *   vramshim-bench [--runs R] [--calls N] [--shim PATH] [--driver PATH] [--view-arena [--view-live N]]
 *                  [--arena [--threads T] [--size S]]
 *
 * --view-arena: the cuMemGetInfo_v2 row is measured after one 4 KiB pair
 * through the shim, so the context's arena exists and its cache counts in
 * the view (a server's case); without it the row comes first, before any
 * arena (the view's shortest path). --view-live N (with --view-arena): 2N
 * blocks, 300 KiB and 4 KiB in turn, are allocated through the shim and
 * every other pair freed, so that N stay live while the row is measured,
 * with free holes between them in the heap (the view walks its blocks).
 *
 * --arena: the cost of an alloc+free pair through the shim with the arena
 * off, chunks and vmm, against the driver directly, side by side, for a few
 * sizes. The arena mode is fixed per process (the config is read at load),
 * so each mode runs in a child process of this program (--arena-child MODE)
 * with its own config file; each child measures its own direct pairs too.
 *
 * --arena --threads T: the same pairs through the shim, each round
 * allocating 8 blocks and freeing them, on 1 thread and on T threads in one
 * context at once; millions of pairs per second in all, and the ratio (T
 * threads' aggregate over one thread's). What the shim shares between
 * threads (locks, counters, the context) shows here, not in the single-
 * thread table. Each thread's blocks are of the same size, as a server's
 * workers' would be.
 * A benchmark, never a test: it prints numbers and does not judge them. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
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
typedef CUresult (*attrs_t)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
typedef CUresult (*range_t)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

typedef struct fns {
  info_t info;
  alloc_t alloc;
  free_t fr;
  attr_t attr;
  attrs_t attrs;
  range_t range;
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
  f->attrs = (attrs_t)need(h, "cuPointerGetAttributes");
  f->range = (range_t)need(h, "cuMemGetAddressRange_v2");
  f->gpa = (gpa_t)need(h, "cuGetProcAddress_v2");
}

/* ---- the operations, each n calls ---------------------------------------- */
static void op_info(const fns *f, int n) {
  size_t a, b;
  for (int i = 0; i < n; i++) f->info(&a, &b);
  g_sink += a;
}
static size_t g_pair_size;   /* op_pair's allocation size */
static void op_pair(const fns *f, int n) {
  CUdeviceptr p;
  for (int i = 0; i < n; i++) {
    f->alloc(&p, g_pair_size);
    f->fr(p);
  }
}
static void op_attr(const fns *f, int n) {
  unsigned t = 0;
  for (int i = 0; i < n; i++) f->attr(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, g_live);
  g_sink += t;
}
/* Two attributes, as a framework asks of a pointer it was handed. */
static void op_attrs(const fns *f, int n) {
  unsigned type = 0, dev = 0;
  CUpointer_attribute a[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void *d[2] = {&type, &dev};
  for (int i = 0; i < n; i++) f->attrs(2, a, d, g_live);
  g_sink += type + dev;
}
static void op_range(const fns *f, int n) {
  CUdeviceptr base = 0;
  size_t size = 0;
  for (int i = 0; i < n; i++) f->range(&base, &size, g_live + 64);
  g_sink += base + size;
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

/* runs runs of op, calls calls each, direct and hooked in turn: d[r] and
 * h[r] are ns per call of run r. */
static void time_runs(void (*op)(const fns *, int), int runs, int calls, double *d, double *h) {
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
  }
}

static void measure(const char *what, void (*op)(const fns *, int), int runs, int calls) {
  double *d = malloc(sizeof(double) * (size_t)runs), *h = malloc(sizeof(double) * (size_t)runs),
         *diff = malloc(sizeof(double) * (size_t)runs);
  time_runs(op, runs, calls, d, h);
  for (int r = 0; r < runs; r++) diff[r] = h[r] - d[r];
  double md = median(d, runs), mh = median(h, runs), mdiff = median(diff, runs);
  /* d and h are sorted now: their minima are the quietest runs. */
  printf("%-34s %10.1f %10.1f %10.1f %10.1f\n", what, md, mh, mdiff, h[0] - d[0]);
  free(d);
  free(h);
  free(diff);
}

/* ---- --arena: alloc+free pairs by size, one process per arena mode ----- */
static const size_t k_arena_sizes[] = {512, 4096, 300 << 10, 4 << 20};
#define ARENA_NSIZES (sizeof k_arena_sizes / sizeof k_arena_sizes[0])
/* --size S: only the row of that size (0: all rows), so a profiler run
 * (perf, callgrind) on one child sees one path: the slabs' or the heap's. */
static size_t g_only_size;
static int size_skipped(size_t k) { return g_only_size && k_arena_sizes[k] != g_only_size; }

/* ---- --threads: pairs on T threads at once --------------------------- */
#define THREAD_LIVE 8
static CUcontext g_ctx;
static setcur_t g_setcur;
typedef struct pair_thread {
  pthread_t id;
  long rounds;
} pair_thread;

static void *pair_rounds(void *arg) {
  pair_thread *t = arg;
  CUdeviceptr p[THREAD_LIVE];
  g_setcur(g_ctx);
  for (long r = 0; r < t->rounds; r++) {
    for (int k = 0; k < THREAD_LIVE; k++) g_hooked.alloc(&p[k], g_pair_size);
    for (int k = 0; k < THREAD_LIVE; k++) g_hooked.fr(p[k]);
  }
  return NULL;
}

/* Millions of pairs per second, all threads together, over one run. */
static double threads_rate(int nthreads, long rounds) {
  pair_thread t[64];
  double t0 = now_ns();
  for (int i = 0; i < nthreads; i++) {
    t[i].rounds = rounds;
    if (pthread_create(&t[i].id, NULL, pair_rounds, &t[i]) != 0) return 0;
  }
  for (int i = 0; i < nthreads; i++) pthread_join(t[i].id, NULL);
  return (double)nthreads * (double)rounds * THREAD_LIVE / (now_ns() - t0) * 1e3;
}

/* In the child: one line per size, "SIZE ONE ALL" (medians, M pairs/s). */
static void threads_child(int runs, int calls, int nthreads) {
  long rounds = calls / THREAD_LIVE > 1 ? calls / THREAD_LIVE : 1;
  for (size_t k = 0; k < ARENA_NSIZES; k++) {
    if (size_skipped(k)) continue;
    g_pair_size = k_arena_sizes[k];
    double *one = malloc(sizeof(double) * (size_t)runs), *all = malloc(sizeof(double) * (size_t)runs);
    threads_rate(1, rounds / 10 + 1);   /* warm */
    for (int r = 0; r < runs; r++) {
      one[r] = threads_rate(1, rounds);
      all[r] = threads_rate(nthreads, rounds);
    }
    printf("%zu %.3f %.3f\n", g_pair_size, median(one, runs), median(all, runs));
    free(one);
    free(all);
  }
}

/* In the child: one line per size, "SIZE DIRECT HOOKED" (medians, ns/pair). */
static void arena_child(int runs, int calls) {
  for (size_t k = 0; k < ARENA_NSIZES; k++) {
    if (size_skipped(k)) continue;
    g_pair_size = k_arena_sizes[k];
    double *d = malloc(sizeof(double) * (size_t)runs), *h = malloc(sizeof(double) * (size_t)runs);
    time_runs(op_pair, runs, calls, d, h);
    printf("%zu %.1f %.1f\n", g_pair_size, median(d, runs), median(h, runs));
    free(d);
    free(h);
  }
}

static int arena_table(const char *self, int runs, int calls, int nthreads, const char *shim_path,
                       const char *driver_path) {
  static const char *modes[] = {"off", "chunks", "vmm"};
  /* Without --threads: the direct pairs (first child's) and each mode's
   * hooked ns; with it: each mode's one-thread and all-thread rates. */
  double direct_or_one[3][ARENA_NSIZES] = {{0}}, hooked[3][ARENA_NSIZES] = {{0}};
  char dir[] = "/tmp/vramshim-bench-XXXXXX";
  if (!mkdtemp(dir)) return 2;
  for (int m = 0; m < 3; m++) {
    char conf[128], cmd[12288];
    snprintf(conf, sizeof conf, "%s/%s.conf", dir, modes[m]);
    FILE *f = fopen(conf, "w");
    if (!f) return 2;
    fprintf(f, "[global]\narena = %s\nledger_dir = %s/ledger\n", modes[m], dir);
    fclose(f);
    setenv("VRAMSHIM_CONFIG", conf, 1);
    snprintf(cmd, sizeof cmd,
             "'%s' --arena-child --threads %d --runs %d --calls %d --size %zu --shim '%s' --driver '%s'", self,
             nthreads, runs, calls, g_only_size, shim_path, driver_path);
    FILE *p = popen(cmd, "r");
    if (!p) return 2;
    size_t size;
    double d, h;
    for (size_t k = 0; k < ARENA_NSIZES; k++) {
      if (size_skipped(k)) continue;
      if (fscanf(p, "%zu %lf %lf", &size, &d, &h) != 3) break;
      if (m == 0 || nthreads > 1) direct_or_one[m][k] = d;
      hooked[m][k] = h;
    }
    if (pclose(p) != 0) fprintf(stderr, "vramshim-bench: the %s child failed\n", modes[m]);
    unlink(conf);
  }
  char ledger[160];
  snprintf(ledger, sizeof ledger, "%s/ledger", dir);
  rmdir(ledger);
  rmdir(dir);
  printf("vramshim-bench --arena: driver %s\n", driver_path);
  if (nthreads > 1) {
    printf("vramshim-bench: %d runs x %d pairs per thread, %d live blocks each; medians in millions of "
           "cuMemAlloc_v2 + cuMemFree_v2 pairs per second, all threads together\n",
           runs, calls / THREAD_LIVE * THREAD_LIVE, THREAD_LIVE);
    printf("%-10s", "size");
    for (int m = 0; m < 3; m++) printf(" %8s x1 %8s x%-2d %5s", modes[m], modes[m], nthreads, "ratio");
    printf("\n");
  } else {
    printf("vramshim-bench: %d runs x %d pairs each; medians in ns per cuMemAlloc_v2 + cuMemFree_v2 pair\n", runs,
           calls);
    printf("%-10s %12s %12s %12s %12s\n", "size", "driver", "arena off", "arena chunks", "arena vmm");
  }
  for (size_t k = 0; k < ARENA_NSIZES; k++) {
    if (size_skipped(k)) continue;
    char sz[32];
    size_t n = k_arena_sizes[k];
    if (n >= (1u << 20)) snprintf(sz, sizeof sz, "%zu MiB", n >> 20);
    else if (n >= 1024) snprintf(sz, sizeof sz, "%zu KiB", n >> 10);
    else snprintf(sz, sizeof sz, "%zu B", n);
    if (nthreads > 1) {
      printf("%-10s", sz);
      for (int m = 0; m < 3; m++)
        printf(" %11.3f %11.3f %5.2f", direct_or_one[m][k], hooked[m][k],
               direct_or_one[m][k] > 0 ? hooked[m][k] / direct_or_one[m][k] : 0.0);
      printf("\n");
    } else {
      printf("%-10s %12.1f %12.1f %12.1f %12.1f\n", sz, direct_or_one[0][k], hooked[0][k], hooked[1][k], hooked[2][k]);
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  int runs = 41, calls = 20000, arena = 0, arena_child_mode = 0, nthreads = 1, view_arena = 0, view_live = 0;
  const char *shim_path = VS_BENCH_SHIM, *driver_path = getenv("VRAMSHIM_DRIVER");
  if (!driver_path || !*driver_path) driver_path = VS_BENCH_DRIVER;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--shim") && i + 1 < argc) shim_path = argv[++i];
    else if (!strcmp(argv[i], "--driver") && i + 1 < argc) driver_path = argv[++i];
    else if (!strcmp(argv[i], "--arena")) arena = 1;
    else if (!strcmp(argv[i], "--view-arena")) view_arena = 1;
    else if (!strcmp(argv[i], "--view-live") && i + 1 < argc) view_live = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) nthreads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--arena-child")) arena_child_mode = 1;
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) g_only_size = (size_t)strtoull(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: vramshim-bench [--runs R] [--calls N] [--shim PATH] [--driver PATH] [--view-arena "
                      "[--view-live N]] [--arena [--threads T] [--size S]]\n");
      return 2;
    }
  }
  if (runs < 1 || calls < 10 || nthreads < 1 || nthreads > 64 || view_live < 0 || view_live > 100000) return 2;
  size_t rows = 0;
  for (size_t k = 0; k < ARENA_NSIZES; k++) rows += !size_skipped(k);
  if (!rows) {
    fprintf(stderr, "vramshim-bench: --size takes one of 512, 4096, 307200, 4194304\n");
    return 2;
  }
  /* Pairs per run: a twentieth of N, at least 10. */
  int pair_calls = calls / 20 > 10 ? calls / 20 : 10;
  if (arena) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 2;
    self[n] = 0;
    /* a thread's run must outweigh starting the thread: the whole N per thread */
    /* a thread's run must outweigh starting the thread: the whole N per thread */
    return arena_table(self, runs, nthreads > 1 ? calls : pair_calls, nthreads, shim_path, driver_path);
  }
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
  if (arena_child_mode) {
    g_ctx = ctx;
    g_setcur = (setcur_t)need(drv, "cuCtxSetCurrent");
    if (nthreads > 1) threads_child(runs, calls, nthreads);
    else arena_child(runs, calls);
    g_direct.fr(g_live);
    unlink(state);
    return 0;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  printf("vramshim-bench: driver %s, shim %s\n", driver_path, shim_path);
  printf("vramshim-bench: %d runs x %d calls each, %ld CPUs online; medians in ns per call\n", runs, calls, cpus);
  printf("%-34s %10s %10s %10s %10s\n", "call", "direct", "hooked", "added", "min-min");
  g_pair_size = 4096;
  if (view_arena) {
    op_pair(&g_hooked, 1);
    CUdeviceptr *held = view_live ? calloc(2 * (size_t)view_live, sizeof *held) : NULL;
    if (view_live && !held) return 2;
    for (int i = 0; i < 2 * view_live; i++)
      if (g_hooked.alloc(&held[i], i % 2 ? 4096 : 300 << 10) != CUDA_SUCCESS) held[i] = 0;
    for (int i = 0; i < 2 * view_live; i++)   /* holes: every other pair */
      if (i % 4 < 2 && held[i]) {
        g_hooked.fr(held[i]);
        held[i] = 0;
      }
    int live = 0;
    for (int i = 0; i < 2 * view_live; i++) live += held[i] != 0;
    if (live < view_live)   /* the card's room ran out: the row names the blocks it had */
      fprintf(stderr, "vramshim-bench: %d of %d blocks live (the others were refused)\n", live, view_live);
    char row[64];
    if (view_live) snprintf(row, sizeof row, "cuMemGetInfo_v2 (arena, %d live)", live);
    else snprintf(row, sizeof row, "cuMemGetInfo_v2 (arena made)");
    measure(row, op_info, runs, calls);
    for (int i = 0; i < 2 * view_live; i++)
      if (held[i]) g_hooked.fr(held[i]);
    free(held);
  } else {
    measure("cuMemGetInfo_v2", op_info, runs, calls);
  }
  measure("cuMemAlloc_v2 + cuMemFree_v2 (4 KiB)", op_pair, runs, pair_calls);
  measure("cuPointerGetAttribute", op_attr, runs, calls);
  measure("cuPointerGetAttributes (2)", op_attrs, runs, calls);
  measure("cuMemGetAddressRange_v2", op_range, runs, calls);
  measure("cuGetProcAddress_v2(cuMemAlloc)", op_gpa, runs, calls);
  g_direct.fr(g_live);
  unlink(state);
  return 0;
}

/* vramshim-drivercost: times each driver call the arena makes, by size,
 * over whatever libcuda.so.1 it finds (the real driver under
 * scripts/gpu-validate; the simulated one in the build tree), and writes
 * the driver cost table of `vramshim replay` (data/driver-costs.csv's
 * layout: call,size_bytes,ns,source).
 *
 *   vramshim-drivercost [-o FILE] [--max SIZE_MIB] [--reps N] [--source TEXT] [--real]
 *
 * --real: refuse to run over the simulated driver (scripts/gpu-validate,
 * so that a wrong library path cannot write the sim's costs as a GPU's).
 *
 * Each figure is the median of --reps calls (default 15) on device 0's
 * primary context, with the device idle: cuCtxSynchronize is timed with no
 * work queued, so it is the call's own cost, not a drain of the program's
 * work (which no table can know). Sizes double from 2 MiB (4 KiB for
 * cuMemAlloc / cuMemFree) up to --max MiB (default 1024), and stop at the
 * first size the card refuses. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXREPS 101

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return v[n / 2];
}

static FILE *out;
static const char *source = "measured";
static void row(const char *call, unsigned long long size, double ns) {
  fprintf(out, "%s,%llu,%.0f,%s\n", call, size, ns, source);
}

#define CK(x) \
  do { \
    CUresult rc_ = (x); \
    if (rc_ != CUDA_SUCCESS) { \
      const char *n_ = NULL; \
      cuGetErrorName(rc_, &n_); \
      fprintf(stderr, "vramshim: drivercost: %s failed: %s\n", #x, n_ ? n_ : "?"); \
      return -1; \
    } \
  } while (0)

static int reps = 15;

/* cuMemAlloc / cuMemFree of one size; 1 when the card refused it. */
static int time_alloc(size_t size) {
  double a[MAXREPS], f[MAXREPS];
  for (int i = 0; i < reps; i++) {
    CUdeviceptr p;
    double t0 = now_ns();
    CUresult rc = cuMemAlloc(&p, size);
    double t1 = now_ns();
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) return 1;
    CK(rc);
    CK(cuMemFree(p));
    a[i] = t1 - t0;
    f[i] = now_ns() - t1;
  }
  row("cuMemAlloc", size, median(a, reps));
  row("cuMemFree", size, median(f, reps));
  return 0;
}

static int time_vmm(CUdevice dev, size_t size, size_t gran) {
  double c[MAXREPS], m[MAXREPS], s[MAXREPS], u[MAXREPS], r[MAXREPS], ar[MAXREPS], af[MAXREPS];
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size = (size + gran - 1) / gran * gran;
  for (int i = 0; i < reps; i++) {
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    double t0 = now_ns();
    CK(cuMemAddressReserve(&va, size, gran, 0, 0));
    double t1 = now_ns();
    CUresult rc = cuMemCreate(&h, size, &prop, 0);
    double t2 = now_ns();
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
      CK(cuMemAddressFree(va, size));
      return 1;
    }
    CK(rc);
    CK(cuMemMap(va, size, 0, h, 0));
    double t3 = now_ns();
    CK(cuMemSetAccess(va, size, &acc, 1));
    double t4 = now_ns();
    CK(cuMemUnmap(va, size));
    double t5 = now_ns();
    CK(cuMemRelease(h));
    double t6 = now_ns();
    CK(cuMemAddressFree(va, size));
    double t7 = now_ns();
    ar[i] = t1 - t0; c[i] = t2 - t1; m[i] = t3 - t2; s[i] = t4 - t3; u[i] = t5 - t4; r[i] = t6 - t5; af[i] = t7 - t6;
  }
  row("cuMemCreate", size, median(c, reps));
  row("cuMemMap", size, median(m, reps));
  row("cuMemSetAccess", size, median(s, reps));
  row("cuMemUnmap", size, median(u, reps));
  row("cuMemRelease", size, median(r, reps));
  if (size == gran) {
    row("cuMemAddressReserve", 0, median(ar, reps));
    row("cuMemAddressFree", 0, median(af, reps));
  }
  return 0;
}

static int time_sync_events(void) {
  double sy[MAXREPS], er[MAXREPS], eq[MAXREPS], sw[MAXREPS];
  CUevent ev;
  CUstream s;
  CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < reps; i++) {
    double t0 = now_ns();
    CK(cuCtxSynchronize());
    double t1 = now_ns();
    CK(cuEventRecord(ev, 0));
    double t2 = now_ns();
    CUresult q = cuEventQuery(ev);
    double t3 = now_ns();
    if (q != CUDA_SUCCESS && q != CUDA_ERROR_NOT_READY) CK(q);
    CK(cuEventSynchronize(ev));
    double t4 = now_ns();
    CK(cuStreamWaitEvent(s, ev, 0));   /* the arena's order of a stream after its lane */
    double t5 = now_ns();
    sy[i] = t1 - t0; er[i] = t2 - t1; eq[i] = t3 - t2; sw[i] = t5 - t4;
  }
  CK(cuStreamSynchronize(s));
  CK(cuStreamDestroy(s));
  CK(cuEventDestroy(ev));
  row("cuCtxSynchronize", 0, median(sy, reps));
  row("cuEventRecord", 0, median(er, reps));
  row("cuEventQuery", 0, median(eq, reps));
  row("cuStreamWaitEvent", 0, median(sw, reps));
  return 0;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  unsigned long long max_mib = 1024;
  int real = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc) path = argv[++i];
    else if (!strcmp(argv[i], "--max") && i + 1 < argc) max_mib = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--source") && i + 1 < argc) source = argv[++i];
    else if (!strcmp(argv[i], "--real")) real = 1;
    else {
      fprintf(stderr, "usage: vramshim-drivercost [-o FILE] [--max SIZE_MIB] [--reps N] [--source TEXT] [--real]\n");
      return 2;
    }
  }
  if (reps < 1 || reps > MAXREPS || max_mib < 2) {
    fprintf(stderr, "vramshim: drivercost: --reps must be 1..%d and --max at least 2 (MiB)\n", MAXREPS);
    return 2;
  }
  if (real && dlsym(RTLD_DEFAULT, "vramsim_calls")) {
    fprintf(stderr, "vramshim: drivercost: --real, but the simulated driver is loaded (libvramsim.so as libcuda.so.1): "
                    "put the real driver's folder first in LD_LIBRARY_PATH\n");
    return 1;
  }
  out = path ? fopen(path, "w") : stdout;
  if (!out) {
    perror("vramshim: drivercost: cannot write the table");
    return 1;
  }
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    fprintf(stderr, "vramshim: drivercost: no CUDA device 0 (cuInit / primary context failed)\n");
    return 1;
  }
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  int vmm = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && gran;
  int drv = 0;
  cuDriverGetVersion(&drv);
  fprintf(out, "# written by vramshim-drivercost (%d repetitions, median; driver API %d)\ncall,size_bytes,ns,source\n",
          reps, drv);
  /* Warm-up: the first calls of a context pay one-time costs. */
  CUdeviceptr p;
  if (cuMemAlloc(&p, 1 << 20) == CUDA_SUCCESS) cuMemFree(p);
  int rc = 0;
  for (unsigned long long s = 4096; s <= max_mib << 20 && rc == 0; s *= 4) rc = time_alloc((size_t)s);
  for (unsigned long long s = 2ull << 20; vmm && s <= max_mib << 20 && rc == 0; s *= 4) rc = time_vmm(dev, (size_t)s, gran);
  if (rc >= 0 && time_sync_events()) rc = -1;
  if (!vmm) fprintf(stderr, "vramshim: drivercost: the card has no VMM: VMM rows missing (the table is incomplete)\n");
  cuDevicePrimaryCtxRelease(dev);
  if (path) fclose(out);
  return rc < 0 ? 1 : 0;
}

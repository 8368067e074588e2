/* Programs of the NVML tests (nvml_test.py), over the sim, with or without
 * the shim:
 *
 *   nvml_prog server direct|dl CHUNK_MIB
 *       A server that sizes its cache as Ollama and llama.cpp do: it reads
 *       card 0's free memory through NVML (bound directly, or dlopen +
 *       dlsym of libnvidia-ml.so.1), keeps 10% of it back, and fills the
 *       rest with cuMemAlloc in CHUNK_MIB pieces. Prints
 *       "nvml total T free F used U; cache C bytes in N chunks, R refused"
 *       and exits 1 when any piece was refused.
 *   nvml_prog hold MIB
 *       A context on card 0 and MIB MiB allocated; prints "ready PID" and
 *       holds them until its stdin closes.
 *   nvml_prog procs
 *       What NVML says each process with a context on card 0 holds: one
 *       "PID BYTES" line each (nvmlDeviceGetComputeRunningProcesses_v3).
 */
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*handle_fn)(unsigned, nvmlDevice_t *);
typedef nvmlReturn_t (*mem_fn)(nvmlDevice_t, nvmlMemory_t *);

static int server(int dl, unsigned long long chunk_mib) {
  init_fn init = nvmlInit_v2;
  handle_fn handle = nvmlDeviceGetHandleByIndex_v2;
  mem_fn mem = nvmlDeviceGetMemoryInfo;
  if (dl) {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "nvml_prog: dlopen libnvidia-ml.so.1: %s\n", dlerror());
      return 2;
    }
    init = (init_fn)dlsym(h, "nvmlInit_v2");
    handle = (handle_fn)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    mem = (mem_fn)dlsym(h, "nvmlDeviceGetMemoryInfo");
    if (!init || !handle || !mem) return 2;
  }
  nvmlDevice_t d;
  nvmlMemory_t m;
  if (init() != NVML_SUCCESS || handle(0, &d) != NVML_SUCCESS || mem(d, &m) != NVML_SUCCESS) {
    fprintf(stderr, "nvml_prog: NVML failed\n");
    return 2;
  }
  CUcontext c;
  CUdevice dev;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&c, dev) || cuCtxSetCurrent(c)) return 2;
  /* The server reads NVML again once its context exists, as a real one
   * does after loading its runtime: the context's own memory is gone. */
  if (mem(d, &m) != NVML_SUCCESS) return 2;
  unsigned long long budget = m.free / 10 * 9, cache = 0, chunk = chunk_mib * MiB;
  unsigned n = 0, refused = 0;
  while (cache + chunk <= budget) {
    CUdeviceptr p;
    if (cuMemAlloc(&p, chunk) != CUDA_SUCCESS) {
      refused++;
      break;
    }
    cache += chunk;
    n++;
  }
  printf("nvml total %llu free %llu used %llu; cache %llu bytes in %u chunks, %u refused\n", m.total, m.free, m.used,
         cache, n, refused);
  fflush(stdout);
  return refused ? 1 : 0;
}

static int hold(unsigned long long mib) {
  CUcontext c;
  CUdevice dev;
  CUdeviceptr p;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&c, dev) || cuCtxSetCurrent(c)) return 2;
  if (mib && cuMemAlloc(&p, mib * MiB) != CUDA_SUCCESS) return 1;
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  char b[64];
  while (fread(b, 1, sizeof b, stdin) > 0) {
  }
  return 0;
}

static int procs(void) {
  nvmlDevice_t d;
  nvmlProcessInfo_t p[256];
  unsigned n = 256;
  if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS ||
      nvmlDeviceGetComputeRunningProcesses_v3(d, &n, p) != NVML_SUCCESS)
    return 2;
  for (unsigned i = 0; i < n; i++) printf("%u %llu\n", p[i].pid, p[i].usedGpuMemory);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "server")) return server(!strcmp(argv[2], "dl"), strtoull(argv[3], NULL, 10));
  if (argc == 3 && !strcmp(argv[1], "hold")) return hold(strtoull(argv[2], NULL, 10));
  if (argc == 2 && !strcmp(argv[1], "procs")) return procs();
  fprintf(stderr, "usage: nvml_prog server direct|dl CHUNK_MIB | hold MIB | procs\n");
  return 2;
}

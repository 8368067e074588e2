/* Test 6: threads allocating and freeing at random through every path the
 * driver has (classic, pitch, managed, stream-ordered, VMM), each block
 * filled with its own byte pattern through the driver's memcpy and checked
 * before it is freed (and every live block of a thread now and then). No
 * two live blocks may overlap, no pattern may be damaged, and at the end the
 * shim's accounting is exactly zero and agrees with the driver's.
 *
 * `shim_stress arena` is the same storm with the arena on (tests/shim_arena):
 * cuMemAlloc is served from the arena, so at the end nothing is live, and
 * what the arena still holds (its cache) is exactly what the driver counts
 * as this process's memory. */
#include "shim_test.h"

#include <pthread.h>

#pragma weak cuMemAllocAsync
#pragma weak cuMemFreeAsync
#pragma weak cuMemCreate
#pragma weak cuMemRelease
#pragma weak cuMemMap
#pragma weak cuMemUnmap
#pragma weak cuMemSetAccess
#pragma weak cuMemAddressReserve
#pragma weak cuMemAddressFree
#pragma weak cuMemGetAllocationGranularity

#define THREADS 4
#define OPS 250
#define SLOTS 12

enum { P_ALLOC, P_PITCH, P_MANAGED, P_ASYNC, P_VMM, P_COUNT };

typedef struct block {
  CUdeviceptr ptr;
  size_t size;       /* bytes usable (and checked) */
  int path;
  unsigned char seed;
  CUmemGenericAllocationHandle h;  /* VMM */
  size_t va_size;
} block;

static CUcontext g_ctx;
static int g_has_async, g_has_vmm;
static size_t g_gran;

/* Every live range, to catch overlap between threads. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { CUdeviceptr a; size_t n; } g_live[THREADS * SLOTS];
static int g_nlive;

static void live_add(CUdeviceptr a, size_t n) {
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_nlive; i++)
    T_CHECK(a + n <= g_live[i].a || g_live[i].a + g_live[i].n <= a, "overlap: [%llx,+%zu) and [%llx,+%zu)",
            (unsigned long long)a, n, (unsigned long long)g_live[i].a, g_live[i].n);
  g_live[g_nlive].a = a;
  g_live[g_nlive].n = n;
  g_nlive++;
  pthread_mutex_unlock(&g_lock);
}

static void live_del(CUdeviceptr a) {
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < g_nlive; i++)
    if (g_live[i].a == a) {
      g_live[i] = g_live[--g_nlive];
      break;
    }
  pthread_mutex_unlock(&g_lock);
}

static void pattern(unsigned char *buf, size_t n, unsigned char seed) {
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(seed ^ (i * 131));
}

static void make(block *b, unsigned *rng) {
  int path;
  do path = (int)(rand_r(rng) % P_COUNT);
  while ((path == P_ASYNC && !g_has_async) || (path == P_VMM && !g_has_vmm));
  b->path = path;
  b->size = 1 + rand_r(rng) % (192 << 10);
  b->seed = (unsigned char)rand_r(rng);
  size_t pitch = 0;
  switch (path) {
  case P_ALLOC: T_CU(cuMemAlloc(&b->ptr, b->size)); break;
  case P_PITCH:
    T_CU(cuMemAllocPitch(&b->ptr, &pitch, 1 + b->size / 8, 8, 4));
    b->size = pitch * 8;
    break;
  case P_MANAGED: T_CU(cuMemAllocManaged(&b->ptr, b->size, CU_MEM_ATTACH_GLOBAL)); break;
  case P_ASYNC:
    T_CU(cuMemAllocAsync(&b->ptr, b->size, NULL));
    T_CU(cuStreamSynchronize(NULL));
    break;
  case P_VMM: {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    b->va_size = (b->size + g_gran - 1) / g_gran * g_gran;
    T_CU(cuMemCreate(&b->h, b->va_size, &prop, 0));
    T_CU(cuMemAddressReserve(&b->ptr, b->va_size, 0, 0, 0));
    T_CU(cuMemMap(b->ptr, b->va_size, 0, b->h, 0));
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    T_CU(cuMemSetAccess(b->ptr, b->va_size, &acc, 1));
    break;
  }
  }
  live_add(b->ptr, b->size);
  unsigned char *buf = malloc(b->size);
  pattern(buf, b->size, b->seed);
  T_CU(cuMemcpyHtoD(b->ptr, buf, b->size));
  free(buf);
}

static void verify(const block *b) {
  unsigned char *want = malloc(b->size), *got = malloc(b->size);
  pattern(want, b->size, b->seed);
  T_CU(cuMemcpyDtoH(got, b->ptr, b->size));
  T_CHECK(memcmp(want, got, b->size) == 0, "block [%llx,+%zu) path %d corrupted", (unsigned long long)b->ptr,
          b->size, b->path);
  free(want);
  free(got);
}

static void unmake(block *b) {
  verify(b);
  live_del(b->ptr);
  switch (b->path) {
  case P_ASYNC:
    T_CU(cuMemFreeAsync(b->ptr, NULL));
    T_CU(cuStreamSynchronize(NULL));
    break;
  case P_VMM:
    T_CU(cuMemUnmap(b->ptr, b->va_size));
    T_CU(cuMemAddressFree(b->ptr, b->va_size));
    T_CU(cuMemRelease(b->h));
    break;
  default: T_CU(cuMemFree(b->ptr));
  }
  b->ptr = 0;
}

static void *worker(void *arg) {
  unsigned rng = (unsigned)(uintptr_t)arg * 2654435761u;
  T_CU(cuCtxSetCurrent(g_ctx));
  block slots[SLOTS];
  memset(slots, 0, sizeof slots);
  for (int op = 0; op < OPS; op++) {
    block *b = &slots[rand_r(&rng) % SLOTS];
    if (b->ptr) unmake(b);
    else make(b, &rng);
    if (op % 50 == 49)   /* a live block's bytes never change */
      for (int i = 0; i < SLOTS; i++)
        if (slots[i].ptr) verify(&slots[i]);
  }
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].ptr) unmake(&slots[i]);
  return NULL;
}

int main(int argc, char **argv) {
  int arena = argc > 1 && !strcmp(argv[1], "arena");
  shim_api shim = t_shim();
  sim_api sim = t_sim(RTLD_DEFAULT);
  g_ctx = t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);

  CUdeviceptr probe;
  g_has_async = cuMemAllocAsync && cuMemAllocAsync(&probe, 512, NULL) == CUDA_SUCCESS;
  if (g_has_async) {
    T_CU(cuMemFreeAsync(probe, NULL));
    T_CU(cuStreamSynchronize(NULL));
  }
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  g_has_vmm = cuMemGetAllocationGranularity && cuMemCreate &&
              cuMemGetAllocationGranularity(&g_gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS &&
              g_gran > 0;
  T_SAY("paths: alloc, pitch, managed%s%s", g_has_async ? ", async" : " (no async in this driver)",
        g_has_vmm ? ", vmm" : " (no VMM in this driver)");

  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) T_CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0, "thread");
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);

  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 0, "live bytes back to exactly zero");
  T_EQ_U64(st.live_count, 0, "live count back to exactly zero");
  if (arena) {
    if (sim.live_bytes) T_EQ_U64(st.reserved_bytes, sim.live_bytes(0), "the arena's cache is what the driver holds");
    T_EQ_U64(st.alloc_requests - (uint64_t)g_has_async, st.free_requests - (uint64_t)g_has_async,
             "every allocation freed once");
    T_EQ_U64(st.failed_requests, 0, "no failures");
    T_SAY("arena: %llu allocations by %d threads, peak %llu bytes live, %llu cached at the end, %llu cuMemAlloc "
          "calls to the driver: PASS", (unsigned long long)st.alloc_requests, THREADS,
          (unsigned long long)st.peak_live_bytes, (unsigned long long)st.reserved_bytes,
          (unsigned long long)st.driver_calls[VRAMSHIM_CALL_MEM_ALLOC]);
    return 0;
  }
  T_EQ_U64(st.reserved_bytes, 0, "reserved back to zero");
  T_EQ_U64(st.va_reserved_bytes, 0, "VA back to zero");
  T_EQ_U64(st.alloc_requests - (uint64_t)g_has_async, st.free_requests - (uint64_t)g_has_async,
           "every allocation freed once");
  T_EQ_U64(st.failed_requests, 0, "no failures");
  t_match_live(&shim, &sim, 0, "after the storm");
  if (sim.calls) {
    uint64_t sim_allocs = sim.calls("cuMemAlloc_v2") + sim.calls("cuMemAllocPitch_v2") + sim.calls("cuMemAllocManaged") +
                          sim.calls("cuMemAllocAsync") + sim.calls("cuMemCreate");
    T_EQ_U64(st.alloc_requests, sim_allocs, "the driver saw exactly the allocations the shim counted");
  }
  T_SAY("%llu allocations by %d threads, peak %llu bytes live: PASS", (unsigned long long)st.alloc_requests, THREADS,
        (unsigned long long)st.peak_live_bytes);
  return 0;
}

/* shim_arena_view_<mode>_<card|limit>: cuMemGetInfo's free memory is what
 * one allocation can take, as it is without the shim. Programs size one
 * allocation by it (a KV cache, a preallocated pool, "allocate what is
 * free"); the arena's cache counts only where it can serve one request.
 *
 *   arena_view MODE card    the whole card (no limit)
 *   arena_view MODE limit   a tenant limit of 1001.3 MiB (no granule multiple)
 *
 * Checks, each with cuMemAlloc of exactly the free memory:
 *  1. first, before the arena exists: granted; free + 2 MiB refused;
 *  2. with a 3,000,001-byte block live (a chunk or handle it pins): granted,
 *     and free + 2 MiB refused (the view is not needlessly low either);
 *  3. 30 rounds of random allocations and frees (1 B to 240 MiB), each
 *     ending with free memory taken in one piece: granted every round, and
 *     then in two pieces (the first a whole number of 2 MiB pages): granted;
 *  4. beside a second context on the card that cached 200 MiB it freed:
 *     granted (its cache given back), and free + 2 MiB refused.
 * A refused "free" allocation is the failure users reported against a peer:
 * the view counted cache a live block pins (HEAD before this test: 30 of
 * 30 rounds refused in chunks and vmm modes). */
#include "shim_test.h"

#define MiB (1024ull * 1024)

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}
static size_t rnd_size(void) {
  int k = (int)(rnd() % 10);
  if (k < 4) return 1 + rnd() % (64 * 1024);
  if (k < 7) return 64 * 1024 + rnd() % (4 * MiB);
  if (k < 9) return 4 * MiB + rnd() % (40 * MiB);
  return 40 * MiB + rnd() % (200 * MiB);
}

static size_t view_free(void) {
  size_t f = 0, t = 0;
  T_CU(cuMemGetInfo(&f, &t));
  return f;
}

/* free memory in one piece: granted, and given back. */
static void take_free(const char *when) {
  size_t f = view_free();
  CUdeviceptr p = 0;
  CUresult r = f ? cuMemAlloc(&p, f) : CUDA_SUCCESS;
  T_CHECK(r == CUDA_SUCCESS, "%s: cuMemAlloc of the %zu bytes cuMemGetInfo called free: %d", when, f, (int)r);
  if (f) T_CU(cuMemFree(p));
}

static void not_more(const char *when) {
  size_t f = view_free();
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc(&p, f + 2 * MiB);
  T_CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "%s: free %zu + 2 MiB granted (%d): the view is low by a granule or more",
          when, f, (int)r);
}

int main(int argc, char **argv) {
  T_CHECK(argc == 3, "usage: arena_view MODE card|limit");
  t_shim();
  T_CU(cuInit(0));
  CUcontext ctx;
  T_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
  T_CU(cuCtxSetCurrent(ctx));

  take_free("first allocation");
  not_more("first allocation");

  CUdeviceptr odd = 0;
  T_CU(cuMemAlloc(&odd, 3000001));
  take_free("3,000,001 bytes live");
  not_more("3,000,001 bytes live");
  T_CU(cuMemFree(odd));

  static CUdeviceptr live[400];
  for (int round = 0; round < 30; round++) {
    for (int i = 0; i < 60; i++) {
      int j = (int)(rnd() % 400);
      if (live[j]) {
        T_CU(cuMemFree(live[j]));
        live[j] = 0;
      } else if (rnd() % 3 && cuMemAlloc(&live[j], rnd_size()) != CUDA_SUCCESS) {
        live[j] = 0;   /* the card or the limit is full: the program's own refusal */
      }
    }
    char when[64];
    snprintf(when, sizeof when, "round %d", round);
    take_free(when);
    /* Two pieces, the first a whole number of 2 MiB pages (a driver rounds
     * a large allocation up to its page: halves of an odd number of pages
     * would not fit without the shim either). */
    size_t f = view_free(), half = f / 2 / (2 * MiB) * (2 * MiB);
    CUdeviceptr a = 0, b = 0;
    CUresult ra = half ? cuMemAlloc(&a, half) : CUDA_SUCCESS;
    CUresult rb = ra == CUDA_SUCCESS && f > half ? cuMemAlloc(&b, f - half) : ra;
    T_CHECK(ra == CUDA_SUCCESS && rb == CUDA_SUCCESS, "%s: free %zu in two pieces (%zu first): %d, %d", when, f, half,
            (int)ra, (int)rb);
    if (a) T_CU(cuMemFree(a));
    if (b) T_CU(cuMemFree(b));
  }
  for (int j = 0; j < 400; j++)
    if (live[j]) T_CU(cuMemFree(live[j]));

  /* 4. A second context on the card caches what it freed: the current
   * context's free memory counts it, and an allocation of it is served
   * (the second context's arena gives its cache back). */
  CUdevice dev;
  CUcontext other;
  T_CU(cuDeviceGet(&dev, 0));
  T_CU(cuCtxCreate(&other, NULL, 0, dev));
  CUdeviceptr o = 0;
  T_CU(cuMemAlloc(&o, 200 * MiB));
  T_CU(cuMemFree(o));
  T_CU(cuCtxSetCurrent(ctx));
  take_free("another context's cache");
  not_more("another context's cache");
  T_CU(cuCtxDestroy(other));
  T_CU(cuCtxSetCurrent(ctx));
  T_SAY("%s %s: free memory is one allocation's worth in every check", argv[1], argv[2]);
  return 0;
}

/* shim_arena_view_<mode>_<card|limit>: cuMemGetInfo's free memory is what
 * one allocation can take, as it is without the shim. Programs size one
 * allocation by it (a KV cache, a preallocated pool, "allocate what is
 * free"); the arena's cache counts only where it can serve one request.
 *
 *   arena_view MODE card    the whole card (no limit)
 *   arena_view MODE limit   a tenant limit of 1001.3 MiB (no granule multiple)
 *   arena_view MODE threads the view asked again and again beside three threads
 *                           allocating and freeing, 2,000 times each at least
 *                           (ThreadSanitizer runs it)
 *   arena_view MODE ended   the card's only arena ends (check 6 alone)
 *
 * Checks, each with cuMemAlloc of exactly the free memory:
 *  1. first, before the arena exists: granted; free + 2 MiB refused;
 *  2. with a 3,000,001-byte block live (a chunk or handle it pins): granted,
 *     and free + 2 MiB refused (the view is not needlessly low either);
 *  3. 30 rounds of random allocations and frees (1 B to 240 MiB), each
 *     ending with free memory taken in one piece: granted every round, and
 *     then in two pieces (the first a whole number of 2 MiB pages): granted;
 *  4. beside a second context on the card that cached 200 MiB it freed:
 *     granted (its cache given back), and free + 2 MiB refused;
 *  5. the same where that context's arena was made after the view was last
 *     asked and the books' room has come back to what it was then (a
 *     cuMemCreate handle released meanwhile): the shim keeps the card's
 *     answer while its arena does not change, and an arena made ends it;
 *  6. (ended) the card's only arena, another context's with 200 MiB cached,
 *     ends with its context and a handle of 200 MiB is made, so that the
 *     books' room is what it was: granted, and free + 2 MiB refused.
 * A refused "free" allocation is the failure users reported against a peer:
 * the view counted cache a live block pins (HEAD before this test: 30 of
 * 30 rounds refused in chunks and vmm modes). */
#include "shim_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define MiB (1024ull * 1024)

static uint64_t xorshift(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { return xorshift(&g_rng); }
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

/* A VMM handle of n bytes on card 0 (the books count it, the arenas do
 * not hold it). */
static CUmemGenericAllocationHandle handle_of(size_t n) {
  CUmemAllocationProp prop = t_device_prop(0);
  CUmemGenericAllocationHandle h = 0;
  T_CU(cuMemCreate(&h, n, &prop, 0));
  return h;
}

/* A context of card 0's whose arena caches 200 MiB it freed. */
static CUcontext context_caching(void) {
  CUdevice dev;
  CUcontext c;
  T_CU(cuDeviceGet(&dev, 0));
  T_CU(cuCtxCreate(&c, NULL, 0, dev));
  CUdeviceptr o = 0;
  T_CU(cuMemAlloc(&o, 200 * MiB));
  T_CU(cuMemFree(o));
  return c;
}

/* 6: ctx has no arena of its own (nor makes one here: only views). */
static void arena_ended(CUcontext ctx) {
  CUcontext other = context_caching();
  T_CU(cuCtxSetCurrent(ctx));
  size_t before = view_free();
  T_CHECK(view_free() == before, "the view moved without a change");
  T_CU(cuCtxDestroy(other));
  T_CU(cuCtxSetCurrent(ctx));
  CUmemGenericAllocationHandle h = handle_of(200 * MiB);
  take_free("the only arena ended, the room as before");
  not_more("the only arena ended, the room as before");
  T_CU(cuMemRelease(h));
}

/* threads: three threads allocate and free at random (each its own xorshift
 * stream) while the main thread asks for the view again and again: the
 * view walks the arena under its locks (ThreadSanitizer runs this). A
 * fourth makes a context on the card, allocates and frees in it and ends
 * it, again and again: the card's kept answer (one arena, then two, then
 * one) is made, ended and kept anew meanwhile. */
typedef struct worker {
  CUcontext ctx;
  uint64_t rng;
  _Atomic int *stop;
  _Atomic int ops;
  int failed;
} worker;

static void *churn(void *p) {
  worker *w = p;
  CUdeviceptr live[64] = {0};
  if (cuCtxSetCurrent(w->ctx) != CUDA_SUCCESS) {
    w->failed = 1;
    return NULL;
  }
  while (!atomic_load(w->stop)) {
    uint64_t r = xorshift(&w->rng);
    int j = (int)(r % 64);
    if (live[j]) {
      if (cuMemFree(live[j]) != CUDA_SUCCESS) w->failed = 1;
      live[j] = 0;
    } else if (cuMemAlloc(&live[j], 512 + (size_t)(r >> 40) % (12 * MiB)) != CUDA_SUCCESS) {
      live[j] = 0;   /* a full card or limit: the program's own refusal */
    }
    atomic_fetch_add(&w->ops, 1);
  }
  for (int j = 0; j < 64; j++)
    if (live[j] && cuMemFree(live[j]) != CUDA_SUCCESS) w->failed = 1;
  return NULL;
}

static void *contexts_come_and_go(void *p) {
  worker *w = p;
  CUdevice dev;
  if (cuDeviceGet(&dev, 0) != CUDA_SUCCESS) w->failed = 1;
  while (!w->failed && !atomic_load(w->stop)) {
    CUcontext c;
    CUdeviceptr d = 0;
    if (cuCtxCreate(&c, NULL, 0, dev) != CUDA_SUCCESS) {
      w->failed = 1;
      break;
    }
    if (cuMemAlloc(&d, 512 + (size_t)(xorshift(&w->rng) >> 40) % (24 * MiB)) == CUDA_SUCCESS &&
        cuMemFree(d) != CUDA_SUCCESS)
      w->failed = 1;
    if (cuCtxDestroy(c) != CUDA_SUCCESS) w->failed = 1;
    atomic_fetch_add(&w->ops, 1);
  }
  return NULL;
}

static void views_beside_threads(CUcontext ctx) {
  _Atomic int stop = 0;
  worker w[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    w[i].ctx = ctx;
    w[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    w[i].stop = &stop;
    atomic_init(&w[i].ops, 0);
    w[i].failed = 0;
    T_CHECK(pthread_create(&th[i], NULL, i < 3 ? churn : contexts_come_and_go, &w[i]) == 0, "thread");
  }
  /* Views until every thread made 2,000 allocations or frees and the
   * fourth 100 contexts (at most 20 s on a slow machine), at least 3,000
   * of them. */
  size_t lo = (size_t)-1, hi = 0, t = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int views = 0;
  for (;; views++) {
    int done = views >= 3000;
    for (int i = 0; i < 4; i++) done = done && atomic_load(&w[i].ops) >= (i < 3 ? 2000 : 100);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (done || t1.tv_sec - t0.tv_sec > 20) break;
    size_t f = 0;
    T_CU(cuMemGetInfo(&f, &t));
    T_CHECK(f <= t, "free %zu above total %zu", f, t);
    if (f < lo) lo = f;
    if (f > hi) hi = f;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 4; i++) {
    T_CHECK(pthread_join(th[i], NULL) == 0, "join");
    T_CHECK(!w[i].failed, "thread %d: a free or its context failed", i);
  }
  take_free("after the threads");
  not_more("after the threads");
  T_SAY("%d views beside three threads' %d, %d and %d allocations and frees and %d contexts made and ended: "
        "free from %zu to %zu of %zu",
        views, atomic_load(&w[0].ops), atomic_load(&w[1].ops), atomic_load(&w[2].ops), atomic_load(&w[3].ops), lo, hi,
        t);
}

int main(int argc, char **argv) {
  T_CHECK(argc == 3, "usage: arena_view MODE card|limit|threads|ended");
  t_shim();
  T_CU(cuInit(0));
  CUcontext ctx;
  T_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
  T_CU(cuCtxSetCurrent(ctx));
  if (!strcmp(argv[2], "threads")) {
    views_beside_threads(ctx);
    return 0;
  }
  if (!strcmp(argv[2], "ended")) {
    arena_ended(ctx);
    T_SAY("%s ended: free memory is one allocation's worth in every check", argv[1]);
    return 0;
  }

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
  CUcontext other = context_caching();
  T_CU(cuCtxSetCurrent(ctx));
  take_free("another context's cache");
  not_more("another context's cache");
  T_CU(cuCtxDestroy(other));
  T_CU(cuCtxSetCurrent(ctx));

  /* 5. The view asked (and kept) with a 200 MiB handle held; then another
   * context's arena is made with 200 MiB cached and the handle released:
   * the books' room is as it was. */
  CUmemGenericAllocationHandle h = handle_of(200 * MiB);
  (void)view_free();
  (void)view_free();
  other = context_caching();
  T_CU(cuMemRelease(h));
  T_CU(cuCtxSetCurrent(ctx));
  not_more("an arena made since, the room as before");
  take_free("an arena made since, the room as before");
  T_CU(cuCtxDestroy(other));
  T_CU(cuCtxSetCurrent(ctx));
  T_SAY("%s %s: free memory is one allocation's worth in every check", argv[1], argv[2]);
  return 0;
}

/* The program's own synchronisations counted as the arena's
 * (stream_syncs.c), on the sim's asynchronous streams.
 *
 * A serving-like loop with two streams of its own (w non-blocking: writes
 * and reads each block; s non-blocking: reads it after w, through an
 * event) and the legacy stream (reads it after w too): each step allocates a slab, a heap and a
 * large block, enqueues the work, frees the blocks while that work may
 * still run, and then synchronises as a program does:
 *   `ctx`     cuCtxSynchronize;
 *   `streams` cuStreamSynchronize of w, s and the legacy stream;
 *   `events`  an event recorded on each of the three, each waited for
 *             (cuEventSynchronize; the legacy one polled with cuEventQuery);
 * then checks every byte the streams read. The arena must need no
 * cuCtxSynchronize of its own after the first step, and hand the freed
 * blocks out again in the next step (else this proves nothing).
 *
 * `one` (safety): the program synchronises w and the legacy stream only
 * (cuStreamSynchronize, and events on w), never s, which holds slow work
 * on the freed block: the block must not come back before the arena's own
 * sync, and s must still read its bytes. With VRAMSHIM_DEBUG_UNSAFE_REUSE=1
 * (the arena's own sync made a no-op) the damage must be seen: the test
 * catches early reuse, and the syncs of w and the legacy stream did not
 * count for s. `one-destroyed`: the same, with s destroyed right after its
 * work was enqueued (its work still runs: cuStreamDestroy returns at once):
 * a destroyed stream keeps its place until a context-wide sync. */
#include "shim_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

static shim_api g_shim;
static uint64_t own_syncs(void) { return t_stats(&g_shim, 0).driver_calls[VRAMSHIM_CALL_SYNC]; }

static void fill(unsigned char *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed * 31 + i * 7);
}

static const size_t sizes[] = {4096, 300 << 10, 24 << 20};   /* slab, heap, large */
#define NS (sizeof sizes / sizeof sizes[0])
#define SMALL_EXTRA 127   /* more 4 KiB blocks per step, with no work on them */

static void loop(const char *mode) {
  CUstream w, s;
  T_CU(cuStreamCreate(&w, CU_STREAM_NON_BLOCKING));
  T_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent ew, es, el, written[NS];
  T_CU(cuEventCreate(&ew, CU_EVENT_DISABLE_TIMING));
  T_CU(cuEventCreate(&es, CU_EVENT_DISABLE_TIMING));
  T_CU(cuEventCreate(&el, CU_EVENT_DISABLE_TIMING));
  for (size_t i = 0; i < NS; i++) T_CU(cuEventCreate(&written[i], CU_EVENT_DISABLE_TIMING));
  unsigned char *want[NS], *got_w[NS], *got_s[NS], *got_l[NS];
  for (size_t i = 0; i < NS; i++) {
    want[i] = malloc(sizes[i]);
    got_w[i] = malloc(sizes[i]);
    got_s[i] = malloc(sizes[i]);
    got_l[i] = malloc(sizes[i]);
  }
  CUdeviceptr prev[NS] = {0}, small_seen[SMALL_EXTRA];
  int reused[NS] = {0}, nsmall = 0, small_back = 0;
  const int steps = 60;
  uint64_t after_first = 0;
  for (int step = 0; step < steps; step++) {
    if (step == 1) after_first = own_syncs();
    CUdeviceptr p[NS];
    for (size_t i = 0; i < NS; i++) {
      T_CU(cuMemAlloc(&p[i], sizes[i]));
      if (p[i] == prev[i]) reused[i]++;
      fill(want[i], sizes[i], (unsigned)(step * 3 + (int)i));
      memset(got_w[i], 0, sizes[i]);
      memset(got_s[i], 0, sizes[i]);
      memset(got_l[i], 0, sizes[i]);
      T_CU(cuMemcpyHtoDAsync(p[i], want[i], sizes[i], w));
      T_CU(cuMemcpyDtoHAsync(got_w[i], p[i], sizes[i], w));
      T_CU(cuEventRecord(written[i], w));
      T_CU(cuStreamWaitEvent(s, written[i], 0));
      T_CU(cuMemcpyDtoHAsync(got_s[i], p[i], sizes[i], s));
      T_CU(cuStreamWaitEvent(NULL, written[i], 0));   /* legacy work on it too, a read after w's write */
      T_CU(cuMemcpyDtoHAsync(got_l[i], p[i], sizes[i], NULL));
    }
    /* More small blocks, freed with the rest: enough that the slab must
     * take freed slots back within the run (a slab has 512 of 4 KiB). */
    CUdeviceptr extra[SMALL_EXTRA];
    for (int k = 0; k < SMALL_EXTRA; k++) {
      T_CU(cuMemAlloc(&extra[k], sizes[0]));
      for (int j = 0; j < nsmall && !small_back; j++) small_back = extra[k] == small_seen[j];
    }
    for (int k = 0; k < SMALL_EXTRA; k++) T_CU(cuMemFree(extra[k]));
    if (step == 0)
      for (int k = 0; k < SMALL_EXTRA; k++) small_seen[nsmall++] = extra[k];
    for (size_t i = 0; i < NS; i++) {
      T_CU(cuMemFree(p[i]));   /* the streams' work on it may still run */
      prev[i] = p[i];
    }
    if (!strcmp(mode, "ctx")) {
      T_CU(cuCtxSynchronize());
    } else if (!strcmp(mode, "streams")) {
      T_CU(cuStreamSynchronize(w));
      T_CU(cuStreamSynchronize(s));
      T_CU(cuStreamSynchronize(NULL));
    } else {
      T_CU(cuEventRecord(ew, w));
      T_CU(cuEventRecord(es, s));
      T_CU(cuEventRecord(el, NULL));
      T_CU(cuEventSynchronize(ew));
      T_CU(cuEventSynchronize(es));
      CUresult q;
      while ((q = cuEventQuery(el)) == CUDA_ERROR_NOT_READY) usleep(100);
      T_CU(q);
    }
    for (size_t i = 0; i < NS; i++) {
      T_CHECK(!memcmp(got_w[i], want[i], sizes[i]), "step %d: stream w read wrong bytes (%zu)", step, sizes[i]);
      T_CHECK(!memcmp(got_s[i], want[i], sizes[i]), "step %d: stream s read wrong bytes (%zu)", step, sizes[i]);
      T_CHECK(!memcmp(got_l[i], want[i], sizes[i]), "step %d: the legacy stream read wrong bytes (%zu)", step,
              sizes[i]);
    }
  }
  uint64_t own = own_syncs() - after_first;
  T_SAY("%s: %d steps, the arena's own cuCtxSynchronize after the first step: %llu; freed heap/large blocks "
        "reused in the next step: %d/%d; small blocks of step 0 back: %s", mode, steps, (unsigned long long)own,
        reused[1], reused[2], small_back ? "yes" : "no");
  T_EQ_U64(own, 0, "the arena's own cuCtxSynchronize calls while the program synchronises itself");
  T_CHECK(small_back, "no small block freed in the first step came back in %d steps", steps);
  for (size_t i = 1; i < NS; i++)
    T_CHECK(reused[i] >= steps / 2, "a freed %zu-byte block came back in the next step only %d times of %d", sizes[i],
            reused[i], steps);
  for (size_t i = 0; i < NS; i++) {
    free(want[i]);
    free(got_w[i]);
    free(got_s[i]);
    free(got_l[i]);
    T_CU(cuEventDestroy(written[i]));
  }
  T_CU(cuEventDestroy(ew));
  T_CU(cuEventDestroy(es));
  T_CU(cuEventDestroy(el));
  T_CU(cuStreamDestroy(w));
  T_CU(cuStreamDestroy(s));
}

/* ---- `one`: only w and the legacy stream are synchronised ---------------- */
/* Slow work on s until the new bytes are written, at most g_cap_ms: a
 * second when safe (the arena's sync waits for it), a minute when unsafe
 * (nothing waits and the program lets it go; a second was not always
 * enough on a slow machine for the allocations before the reuse). */
static _Atomic int g_written;
static int g_cap_ms = 1000;

static void sleeper(void *user) {
  (void)user;
  for (int ms = 0; ms < g_cap_ms && !atomic_load(&g_written); ms++) usleep(1000);
}

#define MAX_TRIES 65536

/* 1 when s read bytes written after the free. */
static int one_case(CUstream s, CUstream w, CUevent ev, size_t n, int destroy, int *reused, int *tries) {
  unsigned char *a = malloc(n), *b = malloc(n), *got = malloc(n);
  fill(a, n, 0x11);
  fill(b, n, 0xb2);
  memset(got, 0, n);
  CUdeviceptr x;
  T_CU(cuMemAlloc(&x, n));
  T_CU(cuMemcpyHtoD(x, a, n));
  atomic_store(&g_written, 0);
  T_CU(cuLaunchHostFunc(s, sleeper, NULL));
  T_CU(cuMemcpyDtoHAsync(got, x, n, s));
  if (destroy) T_CU(cuStreamDestroy(s));   /* its work still runs */
  T_CU(cuMemFree(x));
  static CUdeviceptr p[MAX_TRIES];
  int k = 0;
  *reused = 0;
  while (k < MAX_TRIES && !*reused) {
    T_CU(cuMemAlloc(&p[k], n));
    T_CU(cuMemcpyHtoDAsync(p[k], b, n, w));
    /* The program's syncs: w (directly and by an event) and the legacy stream. */
    T_CU(cuEventRecord(ev, w));
    T_CU(cuEventSynchronize(ev));
    T_CU(cuStreamSynchronize(w));
    T_CU(cuStreamSynchronize(NULL));
    *reused = p[k] < x + n && x < p[k] + n;
    k++;
  }
  atomic_store(&g_written, 1);
  if (destroy) T_CU(cuCtxSynchronize());
  else T_CU(cuStreamSynchronize(s));
  int damaged = memcmp(got, a, n) != 0;
  T_SAY("%zu bytes: freed block %s after %d allocations; s read %s", n, *reused ? "reused" : "not reused", k,
        damaged ? "the NEW bytes (early reuse)" : "its original bytes");
  *tries = k;
  for (int i = 0; i < k; i++) T_CU(cuMemFree(p[i]));
  free(a);
  free(b);
  free(got);
  return damaged;
}

/* The 4096-byte case is the slab layer's: with arena = vmm a size class
 * takes slabs after a slab's worth of requests (docs/arena.md), so the
 * class is made hot first. */
static void hot_class(size_t n) {
  for (size_t i = 0; i <= (2u << 20) / n; i++) {
    CUdeviceptr p;
    T_CU(cuMemAlloc(&p, n));
    T_CU(cuMemFree(p));
  }
  T_CU(cuCtxSynchronize());
}

static void one(int unsafe, int destroy) {
  CUstream w, s;
  if (unsafe) g_cap_ms = 60000;
  CUevent ev;
  hot_class(sizes[0]);
  T_CU(cuStreamCreate(&w, CU_STREAM_NON_BLOCKING));
  T_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  T_CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  uint64_t before = own_syncs();
  for (size_t i = 0; i < NS; i++) {
    int reused = 0, tries = 0;
    if (destroy && i) T_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    int damaged = one_case(s, w, ev, sizes[i], destroy, &reused, &tries);
    if (unsafe) {
      T_CHECK(damaged, "with the arena's own sync a no-op the test must see the damage (%zu bytes)", sizes[i]);
    } else {
      T_CHECK(!damaged, "slow work on s read bytes written after the free (%zu bytes): a sync of w and the legacy "
              "stream was counted for s", sizes[i]);
      T_CHECK(reused, "the freed %zu-byte block was never reused: the test proves nothing", sizes[i]);
    }
  }
  if (!unsafe) T_CHECK(own_syncs() > before, "the arena never synced itself though s was never synchronised");
  T_CU(cuEventDestroy(ev));
  T_CU(cuStreamDestroy(w));
  if (!destroy) T_CU(cuStreamDestroy(s));
}

/* ---- `threads`: the stream table under concurrent use ---------------------
 * Four threads, each with streams of its own that it creates, uses and
 * destroys, allocate, write and read back on their stream, free, and
 * synchronise by cuStreamSynchronize, cuStreamQuery polling or an event,
 * while the main thread calls cuCtxSynchronize now and then. Every byte
 * read back must be right (a block reused while another thread's work on
 * it runs would show), and under ThreadSanitizer the table must be race
 * free. */
static CUcontext g_ctx;
static _Atomic int g_bad, g_done;

static void *worker(void *u) {
  int id = (int)(intptr_t)u;
  T_CU(cuCtxSetCurrent(g_ctx));
  CUstream st;
  CUevent ev;
  T_CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  T_CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  const size_t n = id % 2 ? 64 << 10 : 1 << 20;
  unsigned char *want = malloc(n), *got = malloc(n);
  for (int it = 0; it < 40; it++) {
    CUdeviceptr p;
    T_CU(cuMemAlloc(&p, n));
    fill(want, n, (unsigned)(id * 1000 + it));
    memset(got, 0, n);
    T_CU(cuMemcpyHtoDAsync(p, want, n, st));
    T_CU(cuMemcpyDtoHAsync(got, p, n, st));
    T_CU(cuMemFree(p));   /* the stream's work on it still runs */
    switch (it % 3) {
      case 0: T_CU(cuStreamSynchronize(st)); break;
      case 1: {
        CUresult q;
        while ((q = cuStreamQuery(st)) == CUDA_ERROR_NOT_READY) usleep(50);
        T_CU(q);
        break;
      }
      default:
        T_CU(cuEventRecord(ev, st));
        T_CU(cuEventSynchronize(ev));
    }
    if (memcmp(got, want, n)) atomic_fetch_add(&g_bad, 1);
    if (it % 10 == 9) {   /* a new stream now and then; the old one's handle may come back */
      T_CU(cuStreamDestroy(st));
      T_CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    }
  }
  T_CU(cuEventDestroy(ev));
  T_CU(cuStreamDestroy(st));
  free(want);
  free(got);
  atomic_fetch_add(&g_done, 1);
  return NULL;
}

static void threads(void) {
  T_CU(cuCtxGetCurrent(&g_ctx));
  pthread_t t[4];
  for (int i = 0; i < 4; i++) T_CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0, "pthread_create");
  while (atomic_load(&g_done) < 4) {
    T_CU(cuCtxSynchronize());
    usleep(2000);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  T_SAY("threads: 4 x 40 steps, %d wrong reads", atomic_load(&g_bad));
  T_CHECK(atomic_load(&g_bad) == 0, "a thread read bytes another thread wrote into a block reused too early");
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "ctx";
  g_shim = t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  if (!strcmp(mode, "one")) one(0, 0);
  else if (!strcmp(mode, "one-unsafe")) one(1, 0);
  else if (!strcmp(mode, "one-destroyed")) one(0, 1);
  else if (!strcmp(mode, "threads")) threads();
  else loop(mode);
  T_SAY("program syncs (%s): PASS", mode);
  return 0;
}

/* Stream safety of the arena on the sim's asynchronous streams.
 *
 * A block gets bytes A; a non-blocking stream is given slow work (a host
 * function that waits) and then a copy of the block to the host; the block
 * is freed and blocks of the same size are allocated, each written with
 * bytes B by a synchronous copy (which does not wait for a non-blocking
 * stream), until one of them reuses the freed block's bytes. The stream's
 * copy must still read A: the arena may reuse a block only after the device
 * work enqueued before its free has finished.
 *
 * `safe`: no damage, and reuse did happen (else this proves nothing).
 * `unsafe` (run with VRAMSHIM_DEBUG_UNSAFE_REUSE=1, reuse without waiting):
 * the damage must be seen, which shows this test catches early reuse.
 *
 * The second argument says which streams (stream order, docs/arena.md):
 * `nonblocking` (default) as above; `blocking`: two streams created
 * without flags, the slow work on the first and the new bytes written by
 * async copies on the second (two blocking streams are not ordered with
 * each other, so the program's streams still need the arena's sync);
 * `legacy`: everything on the legacy default stream, which the driver
 * serialises: the freed block must be reused by the very next allocation
 * with no cuCtxSynchronize at all, and the stream still reads its bytes; a
 * per-thread lookup (which the runtime makes in every program) changes
 * nothing; then a stream is created, and that must cost exactly one sync,
 * after which frees wait again. `legacy-ptds`: the same, but instead of a
 * stream the program calls the per-thread cuMemcpyHtoD it looked up. */
#include "shim_test.h"

#include <stdatomic.h>
#include <unistd.h>

#define MAX_TRIES 65536   /* enough to use up the free memory a growth step leaves (slabs come from it before a sync) */

/* The slow work: it holds the stream until the program has written the
 * new bytes (so with immediate reuse the stream's copy surely runs after
 * them), or for at most g_cap_ms. Safe, that is a second: a stream-safe
 * arena waits for it inside cuMemAlloc, before anything is written.
 * Unsafe, nothing waits for it and the program always lets it go, so the
 * cap is a minute: with a second, a slow machine (sanitizers, two cores)
 * spent longer on the allocations before the reuse, the copy ran first
 * and the damage went unseen. */
static _Atomic int g_written;
static int g_cap_ms = 1000;

static void sleeper(void *user) {
  (void)user;
  for (int ms = 0; ms < g_cap_ms && !atomic_load(&g_written); ms++) usleep(1000);
}

static void fill(unsigned char *b, size_t n, unsigned char seed) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed + i * 7);
}

/* 1 when the freed block's bytes were damaged before the stream read them.
 * w: the stream the new bytes are written on (NULL: synchronous copies). */
static int one_case(CUstream s, CUstream w, size_t n, int *reused, int *tries) {
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
  T_CU(cuMemFree(x));
  static CUdeviceptr p[MAX_TRIES];
  int k = 0;
  *reused = 0;
  while (k < MAX_TRIES && !*reused) {
    T_CU(cuMemAlloc(&p[k], n));
    if (w) {
      T_CU(cuMemcpyHtoDAsync(p[k], b, n, w));
      T_CU(cuStreamSynchronize(w));
    } else {
      T_CU(cuMemcpyHtoD(p[k], b, n));
    }
    *reused = p[k] < x + n && x < p[k] + n;
    k++;
  }
  atomic_store(&g_written, 1);
  T_CU(cuStreamSynchronize(s));
  int damaged = memcmp(got, a, n) != 0;
  T_SAY("%zu bytes: freed block %s after %d allocations; the stream read %s", n,
        *reused ? "reused" : "not reused", k, damaged ? "the NEW bytes (early reuse)" : "its original bytes");
  *tries = k;
  for (int i = 0; i < k; i++) T_CU(cuMemFree(p[i]));
  free(a);
  free(b);
  free(got);
  return damaged;
}

static shim_api g_shim;

/* The shim's cuCtxSynchronize calls on card 0 so far. */
static uint64_t ctx_syncs(void) { return t_stats(&g_shim, 0).driver_calls[VRAMSHIM_CALL_SYNC]; }

int main(int argc, char **argv) {
  int unsafe = argc > 1 && !strcmp(argv[1], "unsafe");
  if (unsafe) g_cap_ms = 60000;
  const char *kind = argc > 2 ? argv[2] : "nonblocking";
  int use_ptds = !strcmp(kind, "legacy-ptds");
  int legacy = !strcmp(kind, "legacy") || use_ptds, blocking = !strcmp(kind, "blocking");
  g_shim = t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUstream s = NULL, w = NULL;
  if (blocking) {
    T_CU(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    T_CU(cuStreamCreate(&w, CU_STREAM_DEFAULT));
  } else if (!legacy) {
    T_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  }
  const size_t sizes[] = {4096, 300 << 10, 24 << 20};   /* slab, heap, large */
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    int reused = 0, tries = 0;
    int damaged = one_case(s, w, sizes[i], &reused, &tries);
    if (unsafe) T_CHECK(damaged, "with reuse made immediate the test must see the damage (%zu bytes)", sizes[i]);
    else {
      T_CHECK(!damaged, "slow work on a freed %zu-byte block saw bytes written after the free", sizes[i]);
      T_CHECK(reused, "the arena never reused the freed %zu-byte block: the test proves nothing", sizes[i]);
    }
    if (legacy) T_CHECK(tries == 1, "in stream order the freed %zu-byte block is the next allocation (took %d)", sizes[i], tries);
  }
  if (legacy) {
    T_EQ_U64(ctx_syncs(), 0, "cuCtxSynchronize calls of a program on the legacy stream only");
    /* The runtime looks up per-thread variants at start in every program:
     * a lookup is no sign, and stream order holds. */
    typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
    htod_fn ptds = NULL;
    CUdriverProcAddressQueryResult st;
    T_CU(cuGetProcAddress("cuMemcpyHtoD", (void **)&ptds, 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    T_CHECK(ptds != NULL, "cuGetProcAddress(cuMemcpyHtoD, per-thread) found nothing");
    int reused = 0, tries = 0;
    T_CHECK(!one_case(NULL, NULL, 4096, &reused, &tries), "after a per-thread lookup: a freed block was reused early");
    T_CHECK(tries == 1, "a per-thread lookup alone ended stream order (took %d allocations)", tries);
    T_EQ_U64(ctx_syncs(), 0, "cuCtxSynchronize calls after a per-thread lookup");
    if (use_ptds) {
      /* A call of a per-thread variant is the sign: one sync, then frees wait. */
      CUdeviceptr x;
      unsigned char byte = 7;
      T_CU(cuMemAlloc(&x, 512));
      T_CU(ptds(x, &byte, 1));
      T_EQ_U64(ctx_syncs(), 1, "cuCtxSynchronize calls once the program used the per-thread default stream");
      T_CU(cuMemFree(x));
    } else {
      T_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      T_EQ_U64(ctx_syncs(), 1, "cuCtxSynchronize calls once the program created a stream");
    }
    T_CHECK(!one_case(s, NULL, 4096, &reused, &tries), "out of stream order: a freed block was reused early");
    T_CHECK(reused, "out of stream order: the freed block was never reused");
    T_CHECK(tries > 1, "out of stream order the freed block came back unsynced (at once)");
  } else if (!unsafe) {
    T_CHECK(ctx_syncs() >= 1, "a program with its own streams got no sync");
  }
  if (s) T_CU(cuStreamDestroy(s));
  if (w) T_CU(cuStreamDestroy(w));
  T_SAY("%s (%s streams): PASS", unsafe ? "unsafe reuse caught" : "stream-safe reuse", kind);
  return 0;
}

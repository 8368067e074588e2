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
 * the damage must be seen, which shows this test catches early reuse. */
#include "shim_test.h"

#include <stdatomic.h>
#include <unistd.h>

#define MAX_TRIES 65536   /* enough to use up the free memory a growth step leaves (slabs come from it before a sync) */

/* The slow work: it holds the stream until the program has written the
 * new bytes (so with immediate reuse the stream's copy surely runs after
 * them), or for at most a second (a stream-safe arena waits for it inside
 * cuMemAlloc, before anything is written). */
static _Atomic int g_written;

static void sleeper(void *user) {
  (void)user;
  for (int ms = 0; ms < 1000 && !atomic_load(&g_written); ms++) usleep(1000);
}

static void fill(unsigned char *b, size_t n, unsigned char seed) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed + i * 7);
}

/* 1 when the freed block's bytes were damaged before the stream read them. */
static int one_case(CUstream s, size_t n, int *reused) {
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
    T_CU(cuMemcpyHtoD(p[k], b, n));
    *reused = p[k] < x + n && x < p[k] + n;
    k++;
  }
  atomic_store(&g_written, 1);
  T_CU(cuStreamSynchronize(s));
  int damaged = memcmp(got, a, n) != 0;
  T_SAY("%zu bytes: freed block %s after %d allocations; the stream read %s", n,
        *reused ? "reused" : "not reused", k, damaged ? "the NEW bytes (early reuse)" : "its original bytes");
  for (int i = 0; i < k; i++) T_CU(cuMemFree(p[i]));
  free(a);
  free(b);
  free(got);
  return damaged;
}

int main(int argc, char **argv) {
  int unsafe = argc > 1 && !strcmp(argv[1], "unsafe");
  t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUstream s;
  T_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const size_t sizes[] = {4096, 300 << 10, 24 << 20};   /* slab, heap, large */
  int damaged_any = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    int reused = 0;
    int damaged = one_case(s, sizes[i], &reused);
    damaged_any |= damaged;
    if (unsafe) T_CHECK(damaged, "with reuse made immediate the test must see the damage (%zu bytes)", sizes[i]);
    else {
      T_CHECK(!damaged, "slow work on a freed %zu-byte block saw bytes written after the free", sizes[i]);
      T_CHECK(reused, "the arena never reused the freed %zu-byte block: the test proves nothing", sizes[i]);
    }
  }
  (void)damaged_any;
  T_CU(cuStreamDestroy(s));
  T_SAY("%s: PASS", unsafe ? "unsafe reuse caught" : "stream-safe reuse");
  return 0;
}

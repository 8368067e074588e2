/* A probe, not a requirement: where does the driver's own range check of a
 * copy or memset end on a cuMemAlloc allocation?
 *
 * An arena block lies inside a larger chunk or mapping, so a range that
 * runs past the block's end passes the driver's check under the arena and
 * reaches the block's neighbour (docs/arena.md, "Copies and memsets").
 * Whether the shim should refuse such a range itself depends on where the
 * real driver's check ends: at the size asked for (where the real driver
 * ends the allocation's address range: tests/shim_context/ctx_attrs.c), at
 * the size rounded up to the allocation's alignment, or nowhere. Run with
 * arena = off (the driver answers), for three sizes this prints the
 * driver's answer to a memset and to a copy each way that end at the size
 * asked for, one byte past it, and one byte past the size rounded up to
 * 512 B (never further: a driver that checks nothing would write there),
 * then one line with the verdict, which scripts/gpu-validate puts in its
 * summary. It passes whatever the answers; a range within the allocation
 * must succeed. */
#include "shim_test.h"

enum { PAST_NONE, PAST_ASKED, PAST_ROUNDED };

static const char *rc_name(CUresult r) {
  const char *name = NULL;
  return cuGetErrorName(r, &name) == CUDA_SUCCESS && name ? name : "?";
}

/* The three operations over [p, p + len): a memset, host to device, device
 * to host. 1 when the driver refused all three, 0 when it took all three
 * (a mix is reported and counts as taken: the check is not the range's). */
static int refused(CUdeviceptr p, size_t len, unsigned char *host, const char *what, size_t n) {
  CUresult m = cuMemsetD8(p, 0x5a, len), h = cuMemcpyHtoD(p, host, len), d = cuMemcpyDtoH(host, p, len);
  T_SAY("copy range: %zu bytes from the start of a %zu-byte cuMemAlloc (%s): memset %s, HtoD %s, DtoH %s", len, n,
        what, rc_name(m), rc_name(h), rc_name(d));
  return m != CUDA_SUCCESS && h != CUDA_SUCCESS && d != CUDA_SUCCESS;
}

int main(void) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  const size_t sizes[] = {1000, (64 << 10) + 1, (3 << 20) + 5};
  enum { N = sizeof sizes / sizeof *sizes };
  int verdict[N];
  unsigned char *host = calloc(1, (3 << 20) + 1024);
  T_CHECK(host != NULL, "host memory");
  for (int i = 0; i < N; i++) {
    size_t n = sizes[i], rounded = (n + 511) / 512 * 512;
    CUdeviceptr p = 0;
    T_CU(cuMemAlloc(&p, n));
    T_CHECK(!refused(p, n, host, "the size asked for", n), "a range within the allocation was refused");
    if (refused(p, n + 1, host, "one byte past it", n)) verdict[i] = PAST_ASKED;
    else if (refused(p, rounded + 1, host, "one byte past the size rounded to 512 B", n)) verdict[i] = PAST_ROUNDED;
    else verdict[i] = PAST_NONE;
    T_CU(cuMemFree(p));
  }
  free(host);
  int all = verdict[0];
  for (int i = 1; i < N; i++)
    if (verdict[i] != all) all = -1;
  T_SAY("copy range check: %s",
        all == PAST_ASKED     ? "asked -- the driver refuses a range one byte past the size asked for"
        : all == PAST_ROUNDED ? "rounded -- the driver takes ranges up to the size rounded to 512 B"
        : all == PAST_NONE    ? "none -- the driver took every range tried"
                              : "mixed -- the answer depends on the size (lines above)");
  T_SAY("PASS");
  return 0;
}

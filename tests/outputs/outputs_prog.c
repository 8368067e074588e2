/* A program under the shim for the machine-readable-output tests
 * (run_outputs.py drives it): holds memory on several cards.
 *
 *   outputs_prog CARD:BYTES[?|-]... allocates BYTES on card CARD (its primary
 *                                   context) for each argument, in order; an
 *                                   allocation marked '?' may be refused, one
 *                                   marked '-' is freed at once (what the
 *                                   arena then keeps is its cache).
 *                                   Says "ready PID OK REFUSED", then blocks in
 *                                   read() on stdin until it closes; frees
 *                                   what it holds; exits 0.
 * Any other failure: a message on stderr, exit 1. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ALLOCS 64
#define MAX_CARDS 16

static void fail(const char *what, CUresult r) {
  fprintf(stderr, "outputs_prog: %s failed: %d\n", what, (int)r);
  exit(1);
}

static CUcontext card_ctx(int card) {
  static CUcontext ctx[MAX_CARDS];
  if (card < 0 || card >= MAX_CARDS) {
    fprintf(stderr, "outputs_prog: card %d out of range\n", card);
    exit(1);
  }
  if (!ctx[card]) {
    CUdevice dev;
    CUresult r = cuDeviceGet(&dev, card);
    if (r != CUDA_SUCCESS) fail("cuDeviceGet", r);
    if ((r = cuDevicePrimaryCtxRetain(&ctx[card], dev)) != CUDA_SUCCESS) fail("cuDevicePrimaryCtxRetain", r);
  }
  return ctx[card];
}

int main(int argc, char **argv) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) fail("cuInit", r);
  struct { CUdeviceptr p; int card; } held[MAX_ALLOCS];
  int n = 0, refused = 0;
  for (int i = 1; i < argc && n < MAX_ALLOCS; i++) {
    char *colon = strchr(argv[i], ':'), *end;
    if (!colon) {
      fprintf(stderr, "outputs_prog: '%s' is not CARD:BYTES\n", argv[i]);
      return 1;
    }
    int card = atoi(argv[i]);
    unsigned long long bytes = strtoull(colon + 1, &end, 0);
    int optional = *end == '?';
    if ((r = cuCtxSetCurrent(card_ctx(card))) != CUDA_SUCCESS) fail("cuCtxSetCurrent", r);
    r = cuMemAlloc(&held[n].p, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && optional) {
      refused++;
      continue;
    }
    if (r != CUDA_SUCCESS) fail("cuMemAlloc", r);
    if (*end == '-') {
      if ((r = cuMemFree(held[n].p)) != CUDA_SUCCESS) fail("cuMemFree", r);
      continue;
    }
    held[n++].card = card;
  }
  printf("ready %d %d %d\n", (int)getpid(), n, refused);
  fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  for (int i = 0; i < n; i++) {
    cuCtxSetCurrent(card_ctx(held[i].card));
    if ((r = cuMemFree(held[i].p)) != CUDA_SUCCESS) fail("cuMemFree", r);
  }
  return 0;
}

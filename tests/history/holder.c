/* A workload for the history tests: run under the shim over the sim, it
 * takes commands on stdin, one per line, and answers each on stdout:
 *   alloc BYTES   cuMemAlloc; "ok" or "refused <error code>"
 *   free          frees the newest allocation still held; "ok"
 *   freeall       frees every allocation; "ok"
 *   quit          exits
 * so a test drives usage up and down (warn_at crossings, refusals) while
 * `vramshim record` and `vramshim top` watch the ledger. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HELD 1024

int main(void) {
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
    printf("error: no context\n");
    return 1;
  }
  static CUdeviceptr held[MAX_HELD];
  int n = 0;
  char line[256];
  printf("ready\n");
  fflush(stdout);
  while (fgets(line, sizeof line, stdin)) {
    unsigned long long bytes;
    if (sscanf(line, "alloc %llu", &bytes) == 1) {
      CUdeviceptr p;
      CUresult r = n < MAX_HELD ? cuMemAlloc(&p, (size_t)bytes) : CUDA_ERROR_OUT_OF_MEMORY;
      if (r == CUDA_SUCCESS) {
        held[n++] = p;
        printf("ok\n");
      } else {
        printf("refused %d\n", (int)r);
      }
    } else if (!strncmp(line, "freeall", 7)) {
      while (n) cuMemFree(held[--n]);
      printf("ok\n");
    } else if (!strncmp(line, "free", 4)) {
      if (n) cuMemFree(held[--n]);
      printf("ok\n");
    } else if (!strncmp(line, "quit", 4)) {
      break;
    } else {
      printf("error: unknown command\n");
    }
    fflush(stdout);
  }
  while (n) cuMemFree(held[--n]);
  cuDevicePrimaryCtxRelease(dev);
  return 0;
}

/* limit_view CARD=TOTAL...: under the shim, with nothing else on the card,
 * card CARD's view is total = free = TOTAL bytes (cuMemGetInfo and
 * cuDeviceTotalMem), half of it can be allocated and then all of it
 * cannot (CUDA_ERROR_OUT_OF_MEMORY). Used by the HAMi-core contract tests
 * (hami_env_test.sh) and, from the installed .deb, by the package test.
 * Prints one line per card; exit 0 when every card matches. */
#include <cuda.h>

#include "shim_test.h"

static void check_card(int card, uint64_t want) {
  CUcontext ctx = NULL;
  T_CU(cuDevicePrimaryCtxRetain(&ctx, card));
  T_CU(cuCtxSetCurrent(ctx));
  size_t f = 0, t = 0, dt = 0;
  T_CU(cuMemGetInfo(&f, &t));
  T_CU(cuDeviceTotalMem(&dt, card));
  T_SAY("card %d: total=%zu free=%zu cuDeviceTotalMem=%zu expected %llu", card, t, f, dt, (unsigned long long)want);
  T_EQ_U64(t, want, "cuMemGetInfo total");
  T_EQ_U64(dt, want, "cuDeviceTotalMem");
  T_EQ_U64(f, want, "cuMemGetInfo free");
  /* One output alone (llama.cpp asks for free alone, OptiX for the total
   * alone): the same view, not the card's. */
  size_t f1 = 0, t1 = 0;
  T_CU(cuMemGetInfo(&f1, NULL));
  T_CU(cuMemGetInfo(NULL, &t1));
  T_EQ_U64(f1, want, "cuMemGetInfo free asked alone");
  T_EQ_U64(t1, want, "cuMemGetInfo total asked alone");
  CUdeviceptr half = 0, all = 0;
  T_CHECK(cuMemAlloc(&half, want / 2) == CUDA_SUCCESS, "card %d: half of the view", card);
  CUresult r = cuMemAlloc(&all, want);
  T_CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "card %d: all of the view on top of half: %d, expected out of memory",
          card, (int)r);
  T_CU(cuMemFree(half));
  T_CU(cuDevicePrimaryCtxRelease(card));
}

int main(int argc, char **argv) {
  t_shim(); /* the shim must be preloaded */
  T_CU(cuInit(0));
  for (int i = 1; i < argc; i++) {
    int card = -1;
    unsigned long long want = 0;
    T_CHECK(sscanf(argv[i], "%d=%llu", &card, &want) == 2, "usage: limit_view CARD=TOTAL_BYTES...");
    check_card(card, want);
  }
  T_SAY("every card's view matches");
  return 0;
}

/* limit_view CARD=TOTAL...: under the shim, with nothing else on the card,
 * card CARD's view is total = free = TOTAL bytes (cuMemGetInfo and
 * cuDeviceTotalMem), half of it can be allocated and then all of it
 * cannot (CUDA_ERROR_OUT_OF_MEMORY). Used by the HAMi-core contract tests
 * (hami_env_test.sh) and, from the installed .deb, by the package test.
 * Prints one line per card; exit 0 when every card matches. */
#include <cuda.h>
#include <dlfcn.h>

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
  /* The legacy 32-bit variants (the library's unversioned names) saturate
   * at 4 GiB - 1 as the sim's do; a 4 GiB view must not wrap to 0. */
  typedef CUresult (*info32_fn)(unsigned int *, unsigned int *);
  typedef CUresult (*total32_fn)(unsigned int *, CUdevice);
  info32_fn info32 = (info32_fn)dlsym(RTLD_DEFAULT, "cuMemGetInfo");
  total32_fn total32 = (total32_fn)dlsym(RTLD_DEFAULT, "cuDeviceTotalMem");
  T_CHECK(info32 && total32, "the legacy cuMemGetInfo and cuDeviceTotalMem are exported");
  unsigned int f32 = 0, t32 = 0, dt32 = 0;
  uint64_t want32 = want > 0xffffffffull ? 0xffffffffull : want;
  T_CU(info32(&f32, &t32));
  T_CU(total32(&dt32, card));
  T_EQ_U64(f32, want32, "legacy cuMemGetInfo free");
  T_EQ_U64(t32, want32, "legacy cuMemGetInfo total");
  T_EQ_U64(dt32, want32, "legacy cuDeviceTotalMem");
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

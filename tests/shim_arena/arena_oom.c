/* The OOM ladder through the shim, on a 256 MiB card: 192 MiB are
 * allocated and freed (the arena keeps them cached: the release threshold
 * is 1 GiB), then 200 MiB are asked for. The driver refuses the arena's
 * growth; the arena releases its cache and retries, and the request is
 * granted, as it is with arena = off. Argument: the mode (vmm, chunks, off).
 * Run with `quota` on a 4 GiB card whose config limits the tenant to
 * 256 MiB, the tenant's quota refuses instead of the driver, with the same
 * outcome. */
#include "shim_test.h"
#include "vramsim.h"

#define MiB (1ull << 20)

int main(int argc, char **argv) {
  int off = argc > 1 && !strcmp(argv[1], "off");
  shim_api shim = t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUdeviceptr p[8];
  for (int i = 0; i < 8; i++) T_CU(cuMemAlloc(&p[i], 24 * MiB));
  for (int i = 0; i < 8; i++) T_CU(cuMemFree(p[i]));
  uint64_t held = vramsim_card_used(0);
  vramshim_card_stats st = t_stats(&shim, 0);
  T_SAY("after the frees: the driver counts %llu MiB used, the shim holds %llu MiB", (unsigned long long)(held / MiB),
        (unsigned long long)(st.reserved_bytes / MiB));
  if (off) T_EQ_U64(held, 0, "arena off: the frees went to the driver");
  else T_CHECK(held >= 192 * MiB, "the arena keeps its cache (%llu bytes)", (unsigned long long)held);

  CUdeviceptr big;
  T_CU(cuMemAlloc(&big, 200 * MiB));
  static unsigned char buf[200 * MiB / 64];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)(i * 5 + 1);
  T_CU(cuMemcpyHtoD(big + 199 * MiB, buf, MiB));   /* the block is really there, to its end */
  static unsigned char back[MiB];
  T_CU(cuMemcpyDtoH(back, big + 199 * MiB, MiB));
  T_CHECK(memcmp(back, buf, MiB) == 0, "bytes at the end of the large block");
  st = t_stats(&shim, 0);
  T_EQ_U64(st.failed_requests, 0, "no request refused");
  T_CHECK(vramsim_card_used(0) <= 256 * MiB, "within the card (or the tenant's limit)");
  T_SAY("200 MiB granted with %llu MiB used on the 256 MiB card", (unsigned long long)(vramsim_card_used(0) / MiB));
  T_CU(cuMemFree(big));
  T_EQ_U64(t_stats(&shim, 0).live_bytes, 0, "nothing live");

  /* More than the card: refused after the ladder, with the driver's error. */
  CUdeviceptr huge;
  T_CHECK(cuMemAlloc(&huge, 300 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "a request above the card is an OOM");
  T_CU(cuMemAlloc(&big, 240 * MiB));   /* and the arena still works after a refusal */
  T_CU(cuMemFree(big));
  T_SAY("%s: PASS", off ? "arena off" : "OOM ladder");
  return 0;
}

/* Peer access to the arena's memory (two cards). After
 * cuCtxEnablePeerAccess(ctx0) from a context of card 1, kernels on card 1
 * reach every cuMemAlloc block of ctx0: the driver opens cuMemAlloc memory
 * by itself, but the VMM arena's mappings are opened only to their own
 * card, so the shim opens them (every mapping made so far, and each one
 * made from then on), as PyTorch does for its own expandable segments.
 * The sim answers what a kernel could reach (vramsim_device_can_access).
 *
 * Also: peer access given before the arena of the peer context began, the
 * driver's CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED passed through, and
 * cuCtxDisablePeerAccess (new memory no longer opened).
 * Argument: the mode (vmm, chunks). Cards: 4GiB,4GiB. */
#include "shim_test.h"
#include "vramsim.h"

#define MiB (1ull << 20)

static int reach(int dev, CUdeviceptr p, uint64_t n) { return vramsim_device_can_access(dev, p, n); }

int main(int argc, char **argv) {
  T_CHECK(argc == 2, "usage: %s vmm|chunks", argv[0]);
  shim_api shim = t_shim();
  CUcontext c0, c1;
  T_CU(cuInit(0));
  T_CU(cuDevicePrimaryCtxRetain(&c0, 0));
  T_CU(cuDevicePrimaryCtxRetain(&c1, 1));

  /* 1. Memory of card 0 before peer access: card 1 cannot reach it. */
  T_CU(cuCtxSetCurrent(c0));
  CUdeviceptr small, big;
  T_CU(cuMemAlloc(&small, 4096));
  T_CU(cuMemAlloc(&big, 64 * MiB));
  T_CHECK(reach(0, small, 4096) && reach(0, big, 64 * MiB), "card 0 reaches its own memory");
  T_CHECK(!reach(1, small, 4096) && !reach(1, big, 64 * MiB), "card 1 reaches card 0's memory before peer access");

  /* 2. Peer access from card 1: everything allocated so far is reachable. */
  uint64_t acc0 = t_stats(&shim, 0).driver_calls[VRAMSHIM_CALL_SET_ACCESS];
  T_CU(cuCtxSetCurrent(c1));
  T_CU(cuCtxEnablePeerAccess(c0, 0));
  T_CHECK(reach(1, small, 4096), "card 1 reaches a small block of card 0 after cuCtxEnablePeerAccess");
  T_CHECK(reach(1, big, 64 * MiB), "card 1 reaches a 64 MiB block of card 0 after cuCtxEnablePeerAccess");
  T_SAY("%s: peer access opened %llu mappings", argv[1],
        (unsigned long long)(t_stats(&shim, 0).driver_calls[VRAMSHIM_CALL_SET_ACCESS] - acc0));
  T_CHECK(cuCtxEnablePeerAccess(c0, 0) == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "the driver's answer to twice");

  /* 3. What card 0 allocates from now on is reachable too. */
  T_CU(cuCtxSetCurrent(c0));
  CUdeviceptr later[64], huge;
  for (int i = 0; i < 64; i++) T_CU(cuMemAlloc(&later[i], 4096 + (size_t)i * 8192));
  T_CU(cuMemAlloc(&huge, 300 * MiB));
  for (int i = 0; i < 64; i++)
    T_CHECK(reach(1, later[i], 4096 + (uint64_t)i * 8192), "block %d allocated after peer access", i);
  T_CHECK(reach(1, huge, 300 * MiB), "a 300 MiB block allocated after peer access");

  /* 4. Peer access given before the peer context's arena began: card 0
   * reaches what card 1 allocates afterwards. */
  T_CU(cuCtxEnablePeerAccess(c1, 0));
  T_CU(cuCtxSetCurrent(c1));
  CUdeviceptr on1;
  T_CU(cuMemAlloc(&on1, 32 * MiB));
  T_CHECK(reach(0, on1, 32 * MiB), "card 0 reaches card 1's arena, begun after peer access");

  /* 5. Disabled: memory allocated afterwards is card 0's alone again. */
  T_CU(cuCtxDisablePeerAccess(c0));
  T_CHECK(cuCtxDisablePeerAccess(c0) == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "the driver's answer to twice");
  T_CU(cuCtxSetCurrent(c0));
  CUdeviceptr after;
  T_CU(cuMemAlloc(&after, 128 * MiB));
  T_CHECK(!reach(1, after, 128 * MiB), "card 1 reaches memory allocated after cuCtxDisablePeerAccess");

  T_CU(cuMemFree(after));
  T_CU(cuMemFree(huge));
  for (int i = 0; i < 64; i++) T_CU(cuMemFree(later[i]));
  T_CU(cuMemFree(big));
  T_CU(cuMemFree(small));
  T_CU(cuCtxSetCurrent(c1));
  T_CU(cuMemFree(on1));
  T_SAY("PASS");
  return 0;
}

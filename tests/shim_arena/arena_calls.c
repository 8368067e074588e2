/* What the arena saves: N alloc/free pairs of small and medium blocks cost
 * 2 driver calls each with arena = off; with the arena on, at most 1% of
 * requests take memory from the driver and all calls together (syncs
 * included) are at least 20x fewer.
 * The shim's per-card call counters must agree with the driver's own.
 * Argument: the mode (vmm, chunks, off). */
#include "shim_test.h"
#include "vramsim.h"

#define N 2000

static uint64_t sim_memory_calls(void) {
  static const char *fns[] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemCreate", "cuMemRelease", "cuMemMap",
                              "cuMemUnmap", "cuMemAddressReserve", "cuMemAddressFree", "cuCtxSynchronize"};
  uint64_t n = 0;
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) n += vramsim_calls(fns[i]);
  return n;
}

int main(int argc, char **argv) {
  int off = argc > 1 && !strcmp(argv[1], "off");
  shim_api shim = t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  vramsim_reset_calls();
  for (int i = 0; i < N; i++) {
    CUdeviceptr a, b;
    T_CU(cuMemAlloc(&a, 4096));
    T_CU(cuMemAlloc(&b, 1 << 20));
    T_CU(cuMemFree(a));
    T_CU(cuMemFree(b));
  }
  uint64_t calls = sim_memory_calls();
  vramshim_card_stats st = t_stats(&shim, 0);
  T_SAY("%d alloc/free pairs: %llu driver memory calls (%llu cuMemAlloc, %llu cuMemCreate, %llu cuCtxSynchronize)",
        2 * N, (unsigned long long)calls, (unsigned long long)vramsim_calls("cuMemAlloc_v2"),
        (unsigned long long)vramsim_calls("cuMemCreate"), (unsigned long long)vramsim_calls("cuCtxSynchronize"));
  /* The shim counts exactly the calls the driver saw. */
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_ALLOC], vramsim_calls("cuMemAlloc_v2"), "cuMemAlloc counted");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_FREE], vramsim_calls("cuMemFree_v2"), "cuMemFree counted");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_CREATE], vramsim_calls("cuMemCreate"), "cuMemCreate counted");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_RELEASE], vramsim_calls("cuMemRelease"), "cuMemRelease counted");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_MAP], vramsim_calls("cuMemMap"), "cuMemMap counted");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_UNMAP], vramsim_calls("cuMemUnmap"), "cuMemUnmap counted");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_ADDRESS_RESERVE], vramsim_calls("cuMemAddressReserve"), "reserve counted");
  T_EQ_U64(st.alloc_requests, 2 * N, "requests");
  T_EQ_U64(st.live_bytes, 0, "nothing live");
  if (off) {
    T_EQ_U64(calls, 4 * N, "arena off: one driver call per request");
  } else {
    /* >= 99% of requests served without taking memory from the driver, and
     * every kind of driver call together (syncs included) >= 20x fewer. */
    uint64_t takes = vramsim_calls("cuMemAlloc_v2") + vramsim_calls("cuMemCreate");
    T_CHECK(takes * 100 <= 2 * N, "at most 1%% of requests take driver memory (%llu of %d)",
            (unsigned long long)takes, 2 * N);
    uint64_t syncs = vramsim_calls("cuCtxSynchronize");
    T_CHECK(syncs <= 2 * N, "never more than one sync per free");
    T_CHECK(calls * 20 <= 4 * N, "arena on: at most 5%% of the calls of arena = off, syncs included (%llu of %d)",
            (unsigned long long)calls, 4 * N);
    T_EQ_U64(st.reserved_bytes, vramsim_live_bytes(0), "the arena's cache is what the driver holds");
  }
  T_SAY("PASS");
  return 0;
}

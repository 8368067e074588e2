/* Test 1: a program linked with -lcuda (the sim, soname libcuda.so.1) and the
 * shim preloaded. Direct symbol binding reaches the hooks; the shim's
 * accounting matches the driver's at every step, on the classic, pitch,
 * managed, stream-ordered and VMM paths.
 *
 * Functions a driver may lack (the stream-ordered and VMM API) are weak:
 * they bind to the shim's export, which answers CUDA_ERROR_NOT_FOUND when
 * the driver lacks them; that part is then skipped, and said so. */
#include "shim_test.h"

#pragma weak cuMemAllocAsync
#pragma weak cuMemFreeAsync
#pragma weak cuMemAllocFromPoolAsync
#pragma weak cuMemPoolCreate
#pragma weak cuMemPoolDestroy
#pragma weak cuMemCreate
#pragma weak cuMemRelease
#pragma weak cuMemMap
#pragma weak cuMemUnmap
#pragma weak cuMemSetAccess
#pragma weak cuMemAddressReserve
#pragma weak cuMemAddressFree
#pragma weak cuMemGetAllocationGranularity

/* The per-thread-stream variants, by their exported names. */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) __attribute__((weak));
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) __attribute__((weak));

static shim_api shim;
static sim_api sim;

static void fill_check(CUdeviceptr p, size_t n, unsigned char seed) {
  unsigned char *buf = malloc(n), *back = malloc(n);
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(seed + i * 7);
  T_CU(cuMemcpyHtoD(p, buf, n));
  T_CU(cuMemcpyDtoH(back, p, n));
  T_CHECK(memcmp(buf, back, n) == 0, "bytes written through the shim read back");
  free(buf);
  free(back);
}

static void classic(void) {
  CUdeviceptr p[5];
  const size_t sizes[5] = {1, 4096, 1 << 20, 3 * 1000 * 1000 + 17, 64 << 20};
  uint64_t sum = 0;
  for (int i = 0; i < 5; i++) {
    T_CU(cuMemAlloc(&p[i], sizes[i]));
    sum += sizes[i];
    t_match_live(&shim, &sim, 0, "after cuMemAlloc");
  }
  fill_check(p[2], 1 << 20, 3);
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, sum, "live bytes = sum of the sizes asked for");
  T_EQ_U64(st.live_count, 5, "live count");

  CUdeviceptr pitched;
  size_t pitch = 0;
  T_CU(cuMemAllocPitch(&pitched, &pitch, 1000, 33, 4));
  t_match_live(&shim, &sim, 0, "after cuMemAllocPitch");
  st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, sum + (uint64_t)pitch * 33, "pitch allocation counts pitch x height");

  CUdeviceptr managed;
  T_CU(cuMemAllocManaged(&managed, 12345, CU_MEM_ATTACH_GLOBAL));
  t_match_live(&shim, &sim, 0, "after cuMemAllocManaged");

  /* Queries pass through unchanged. */
  size_t free_b = 0, total_b = 0, range = 0;
  CUdeviceptr base = 0;
  T_CU(cuMemGetInfo(&free_b, &total_b));
  T_CHECK(total_b > 0 && free_b <= total_b, "cuMemGetInfo");
  T_CU(cuMemGetAddressRange(&base, &range, p[3] + 100));
  T_CHECK(base == p[3] && range >= sizes[3], "cuMemGetAddressRange");
  unsigned int memtype = 0;
  T_CU(cuPointerGetAttribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p[1]));
  T_CHECK(memtype == CU_MEMORYTYPE_DEVICE, "cuPointerGetAttribute");

  for (int i = 0; i < 5; i++) {
    T_CU(cuMemFree(p[i]));
    t_match_live(&shim, &sim, 0, "after cuMemFree");
  }
  T_CU(cuMemFree(pitched));
  T_CU(cuMemFree(managed));
  t_match_live(&shim, &sim, 0, "after every free");
  st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 0, "classic: live back to zero");
  T_CHECK(st.peak_live_bytes >= sum, "peak remembered");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_ALLOC], 6, "driver calls: 5 cuMemAlloc + 1 pitch");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_ALLOC_MANAGED], 1, "driver calls: managed");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_FREE], 7, "driver calls: frees");
  if (sim.calls) {
    T_EQ_U64(sim.calls("cuMemAlloc_v2") + sim.calls("cuMemAllocPitch_v2"), 6, "sim saw the same allocations");
    T_EQ_U64(sim.calls("cuMemFree_v2"), 7, "sim saw the same frees");
  }
  T_SAY("classic, pitch, managed: ok");
}

static void stream_ordered(void) {
  CUdeviceptr a = 0, b = 0;
  CUresult r = cuMemAllocAsync(&a, 1 << 16, NULL);
  if (r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_NOT_SUPPORTED) {
    T_SAY("SKIP stream-ordered allocation: the driver lacks cuMemAllocAsync (%d)", (int)r);
    return;
  }
  T_CHECK(r == CUDA_SUCCESS, "cuMemAllocAsync: %d", (int)r);
  T_CU(cuStreamSynchronize(NULL));
  t_match_live(&shim, &sim, 0, "after cuMemAllocAsync");
  CUmemoryPool pool = NULL;
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  if (cuMemPoolCreate && cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS) {
    T_CU(cuMemAllocFromPoolAsync(&b, 3000, pool, NULL));
    T_CU(cuStreamSynchronize(NULL));
    t_match_live(&shim, &sim, 0, "after cuMemAllocFromPoolAsync");
    fill_check(b, 3000, 9);
    T_CU(cuMemFreeAsync(b, NULL));
  }
  fill_check(a, 1 << 16, 5);
  T_CU(cuMemFreeAsync(a, NULL));
  T_CU(cuStreamSynchronize(NULL));
  t_match_live(&shim, &sim, 0, "after cuMemFreeAsync");
  if (pool) cuMemPoolDestroy(pool);
  CUdeviceptr c = 0;
  r = cuMemAllocAsync_ptsz ? cuMemAllocAsync_ptsz(&c, 777, NULL) : CUDA_ERROR_NOT_FOUND;
  if (r == CUDA_ERROR_NOT_FOUND) {
    T_SAY("SKIP cuMemAllocAsync_ptsz: the driver lacks it");
  } else {
    T_CHECK(r == CUDA_SUCCESS, "cuMemAllocAsync_ptsz: %d", (int)r);
    T_CU(cuStreamSynchronize(NULL));
    t_match_live(&shim, &sim, 0, "after cuMemAllocAsync_ptsz");
    T_CU(cuMemFreeAsync_ptsz(c, NULL));
    T_CU(cuStreamSynchronize(NULL));
    T_CHECK(shim.hook_count("cuMemAllocAsync_ptsz", VRAMSHIM_PATH_CALLS) == 1, "the _ptsz hook was entered");
  }
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 0, "stream-ordered: live back to zero");
  T_SAY("stream-ordered%s: ok", pool ? " (default and created pool)" : " (default pool)");
}

static void vmm(void) {
  CUmemAllocationProp prop = t_device_prop(0);
  size_t gran = 0;
  if (!cuMemGetAllocationGranularity ||
      cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !gran) {
    T_SAY("SKIP VMM: the driver lacks cuMemGetAllocationGranularity");
    return;
  }
  CUmemGenericAllocationHandle h;
  CUresult r = cuMemCreate(&h, 2 * gran, &prop, 0);
  if (r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_NOT_SUPPORTED) {
    T_SAY("SKIP VMM: the driver lacks cuMemCreate (%d)", (int)r);
    return;
  }
  T_CHECK(r == CUDA_SUCCESS, "cuMemCreate: %d", (int)r);
  t_match_live(&shim, &sim, 0, "after cuMemCreate");
  CUdeviceptr va;
  T_CU(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
  T_CU(cuMemMap(va + gran, 2 * gran, 0, h, 0));
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  T_CU(cuMemSetAccess(va + gran, 2 * gran, &acc, 1));
  fill_check(va + gran, 2 * gran, 11);
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.va_reserved_bytes, 4 * gran, "VA reserved");
  T_EQ_U64(st.live_bytes, 2 * gran, "VMM physical memory is live");
  T_CU(cuMemUnmap(va + gran, 2 * gran));
  T_CU(cuMemRelease(h));
  T_CU(cuMemAddressFree(va, 4 * gran));
  t_match_live(&shim, &sim, 0, "after cuMemRelease");
  st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 0, "VMM: live back to zero");
  T_EQ_U64(st.va_reserved_bytes, 0, "VMM: VA back to zero");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_CREATE], 1, "cuMemCreate counted");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_MEM_MAP], 1, "cuMemMap counted");
  T_SAY("VMM: ok");
}

int main(void) {
  shim = t_shim();
  sim = t_sim(RTLD_DEFAULT);
  T_SAY("driver %s, %s", shim.driver_path() ? shim.driver_path() : "(not loaded yet)",
        sim.calls ? "sim counters available" : "no sim counters");
  CUcontext ctx = t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  (void)ctx;
  classic();
  T_CHECK(shim.driver_path() != NULL, "the first hook loaded the driver");
  stream_ordered();
  vmm();
  T_CHECK(shim.hook_count("cuMemAlloc_v2", VRAMSHIM_PATH_CALLS) >= 5, "direct calls entered the hook");
  t_match_live(&shim, &sim, 0, "at exit");
  T_SAY("PASS");
  return 0;
}

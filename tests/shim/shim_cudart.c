/* Test 4: the real CUDA runtime (libcudart from the toolkit), unchanged,
 * over the shim; built twice, against libcudart.so (shim_cudart) and with
 * libcudart_static.a linked in (shim_cudart_static). The runtime dlopens libcuda.so.1, looks up
 * cuGetProcAddress_v2 with dlsym, and resolves every driver function
 * through it: the shim must have answered that dlsym and the lookups of
 * the memory functions the driver has.
 *
 * Over the sim the runtime then stops: it asks cuGetExportTable for
 * NVIDIA's private tables, which no simulated driver has, and cudaMalloc
 * fails (cudaErrorInvalidValue or cudaErrorNotSupported, as the sim
 * answers). Only that much is asserted there. Over
 * a real driver (no vramsim_* symbols) cudaMalloc must succeed and the
 * shim must account it. */
#include "shim_test.h"

#include <cuda_runtime_api.h>

int main(void) {
  shim_api shim = t_shim();
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, 1 << 20);
  T_SAY("cudaMalloc: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));

  uint64_t dl = shim.hook_count("cuGetProcAddress_v2", VRAMSHIM_PATH_DLSYM);
  T_CHECK(dl >= 1, "the runtime's dlsym(cuGetProcAddress_v2) was answered by the shim (%llu)",
          (unsigned long long)dl);
  T_CHECK(shim.driver_path() != NULL, "the shim loaded the driver");

  /* Hooked when the driver has them (the sim has these; a real driver all). */
  static const char *const needed[] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemGetInfo_v2", "cuMemAllocPitch_v2",
                                       "cuMemAllocManaged", "cuMemGetAddressRange_v2", "cuPointerGetAttribute",
                                       "cuPointerGetAttributes", "cuDeviceTotalMem_v2"};
  for (size_t i = 0; i < sizeof needed / sizeof *needed; i++) {
    uint64_t n = shim.hook_count(needed[i], VRAMSHIM_PATH_PROCADDRESS);
    T_CHECK(n >= 1, "the runtime's cuGetProcAddress lookup of %s was answered with the hook", needed[i]);
  }
  /* Also by the driver's word: the stream-ordered ones, when it has them. */
  static const char *const optional[] = {"cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemFreeAsync",
                                         "cuMemFreeAsync_ptsz", "cuMemAllocFromPoolAsync",
                                         "cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle", "cuIpcGetMemHandle"};
  for (size_t i = 0; i < sizeof optional / sizeof *optional; i++)
    T_SAY("%s: hooked lookups %llu", optional[i],
          (unsigned long long)shim.hook_count(optional[i], VRAMSHIM_PATH_PROCADDRESS));
  T_SAY("%llu lookups answered with hooks in all",
        (unsigned long long)shim.hook_count(NULL, VRAMSHIM_PATH_PROCADDRESS));

  /* The runtime loaded the driver privately (RTLD_LOCAL): ask its handle. */
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  sim_api sim = t_sim(drv ? drv : RTLD_DEFAULT);
  int on_sim = sim.calls != NULL;
  if (on_sim) {
    /* What is true over the sim: the runtime gave up before allocating. */
    T_CHECK(e != cudaSuccess, "over the sim cudaMalloc cannot succeed (no export tables)");
    vramshim_card_stats st = t_stats(&shim, 0);
    T_EQ_U64(st.live_bytes, 0, "nothing allocated");
    if (sim.calls) T_CHECK(sim.calls("cuGetExportTable") >= 1, "the runtime stopped at cuGetExportTable");
  } else {
    T_CHECK(e == cudaSuccess, "cudaMalloc over the real driver");
    vramshim_card_stats st;
    int dev = 0;
    T_CHECK(cudaGetDevice(&dev) == cudaSuccess, "cudaGetDevice");
    T_CHECK(shim.stats(dev, &st) == 0 && st.live_bytes >= (1 << 20), "the shim accounted the runtime's allocation");
    T_CHECK(cudaFree(p) == cudaSuccess, "cudaFree");
    T_CHECK(shim.stats(dev, &st) == 0 && st.free_requests >= 1, "the free went through the shim");
  }
  T_SAY("PASS");
  return 0;
}

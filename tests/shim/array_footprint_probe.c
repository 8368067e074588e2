/* A probe of the shim's estimate of CUDA arrays (entry/hooks_array.c): for
 * each shape, what the shim counted (its live bytes) against what the
 * driver's free memory fell by (cuMemGetInfo; no tenant limits here, so the
 * driver's own figures). The driver does not say what an array takes, so
 * the estimate is the shim's model of its layout; this program finds out
 * how far that is from a real driver, through scripts/gpu-validate.
 *
 * Over the sim, whose arrays follow the same model for the formats it
 * models, the two must be equal to the byte (and a format it does not
 * model must leave both unchanged). On a real driver every pair is printed
 * and only the shim's own bookkeeping is required: its count back to where
 * it was after each destroy. */
#include "shim_test.h"

typedef struct shape {
  const char *name;
  CUDA_ARRAY3D_DESCRIPTOR d;
  unsigned levels;   /* 0: a plain array */
} shape;

static uint64_t driver_free(void) {
  size_t f = 0, t = 0;
  T_CU(cuMemGetInfo(&f, &t));
  return f;
}

int main(void) {
  shim_api shim = t_shim();
  CUcontext ctx = t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  (void)ctx;
  const shape shapes[] = {
      {"100 x 100 u8", {100, 100, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0}, 0},
      {"1000 x 1000 float4", {1000, 1000, 0, CU_AD_FORMAT_FLOAT, 4, 0}, 0},
      {"4096 x 4096 rgba8", {4096, 4096, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0}, 0},
      {"1920 x 1080 half2", {1920, 1080, 0, CU_AD_FORMAT_HALF, 2, 0}, 0},
      {"65536 float (1D)", {65536, 0, 0, CU_AD_FORMAT_FLOAT, 1, 0}, 0},
      {"512 x 256 x 128 u8 (3D)", {512, 256, 128, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0}, 0},
      {"1024 x 1024 x 6 int32 layered", {1024, 1024, 6, CU_AD_FORMAT_SIGNED_INT32, 1, CUDA_ARRAY3D_LAYERED}, 0},
      {"512 x 512 float cubemap", {512, 512, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP}, 0},
      {"2048 x 2048 rgba8, 12 levels", {2048, 2048, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0}, 12},
      {"4096 x 4096 BC1", {4096, 4096, 0, CU_AD_FORMAT_BC1_UNORM, 4, 0}, 0},
      {"1920 x 1088 NV12", {1920, 1088, 0, CU_AD_FORMAT_NV12, 1, 0}, 0},
  };
  const int real = t_real_driver();
  int measured = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    const shape *s = &shapes[i];
    uint64_t live0 = t_stats(&shim, 0).live_bytes, free0 = driver_free();
    CUarray a = NULL;
    CUmipmappedArray m = NULL;
    CUresult r = s->levels ? cuMipmappedArrayCreate(&m, &s->d, s->levels) : cuArray3DCreate(&a, &s->d);
    uint64_t counted = t_stats(&shim, 0).live_bytes - live0, took = free0 - driver_free();
    if (r != CUDA_SUCCESS) {
      T_SAY("array %s: the driver refused it (%d); counted %llu", s->name, (int)r, (unsigned long long)counted);
      T_EQ_U64(counted, 0, "a refused array leaves the count");
      T_CHECK(real || r == CUDA_ERROR_NOT_SUPPORTED, "%s: over the sim only unmodelled formats are refused", s->name);
      continue;
    }
    T_SAY("array %s: estimate %llu, the driver took %llu (%.3f)", s->name, (unsigned long long)counted,
          (unsigned long long)took, took ? (double)counted / (double)took : 0.0);
    if (!real) T_EQ_U64(counted, took, "over the sim, the estimate is what the card holds");
    T_CU(s->levels ? cuMipmappedArrayDestroy(m) : cuArrayDestroy(a));
    T_EQ_U64(t_stats(&shim, 0).live_bytes, live0, "the destroy gives the count back");
    measured++;
  }
  T_CHECK(measured >= 8, "measured %d shapes", measured);
  T_SAY("PASS");
  return 0;
}

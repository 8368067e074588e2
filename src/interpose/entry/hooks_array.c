/* Hooks of CUDA arrays and mipmapped arrays (cudaMallocArray,
 * cudaMalloc3DArray and cudaMallocMipmappedArray come here): device memory
 * a program holds through a handle, which the tenant's books count like
 * any allocation (docs/architecture.md, "CUDA arrays").
 *
 * The driver does not say what an array takes (cuArrayGetMemoryRequirements
 * answers only for deferred-mapping arrays), so the service is asked for an
 * estimate from the descriptor: each row of texels padded to 512 bytes,
 * rows times height times depth (layers, or six faces per cubemap), mipmap
 * levels summed, in 64 KiB pages below 2 MiB and 2 MiB pages from there.
 * Where NVML is present the true footprint settles the rest: what the
 * driver holds for the process beyond what the shim counted is charged as
 * its overhead (quota/nvml_cards.c). A format this file does not know is
 * counted at the widest texel (16 bytes), so an estimate errs towards the
 * card's safety. Sparse and deferred-mapping arrays take no memory when
 * created (it is mapped later from cuMemCreate handles, charged there) and
 * pass unaccounted, as do descriptors the driver will refuse. */
#include "hook_common.h"

#define CARD vs_driver_current_card(real)

#define ARRAY_ROW ((uint64_t)512)
#define SMALL_PAGE ((uint64_t)64 << 10)
#define LARGE_PAGE ((uint64_t)2 << 20)
#define WIDEST_TEXEL_BITS 128u
#define ARRAY_SIDE_MAX ((uint64_t)1 << 32)

/* Bits per texel, and (block) the side of the square block the format
 * stores texels in (1 for most; 4 for the BCn formats). Channels count
 * only for the formats that leave them to the descriptor; 0 bits when
 * they are not 1, 2 or 4 there (the driver refuses that). */
static unsigned texel_bits(CUarray_format f, unsigned channels, unsigned *block) {
  unsigned per = 0;
  *block = 1;
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: per = 8; break;
  case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: per = 16; break;
  case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: per = 32; break;
  case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X1: return 8;
  case CU_AD_FORMAT_UNORM_INT8X2: case CU_AD_FORMAT_SNORM_INT8X2:
  case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X1: return 16;
  case CU_AD_FORMAT_UNORM_INT8X4: case CU_AD_FORMAT_SNORM_INT8X4:
  case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X2:
  case CU_AD_FORMAT_UNORM_INT_101010_2: return 32;
  case CU_AD_FORMAT_UNORM_INT16X4: case CU_AD_FORMAT_SNORM_INT16X4: return 64;
  /* block compressed: 8 bytes (BC1, BC4) or 16 per block of 4 x 4 texels */
  case CU_AD_FORMAT_BC1_UNORM: case CU_AD_FORMAT_BC1_UNORM_SRGB: case CU_AD_FORMAT_BC4_UNORM:
  case CU_AD_FORMAT_BC4_SNORM: *block = 4; return 4;
  case CU_AD_FORMAT_BC2_UNORM: case CU_AD_FORMAT_BC2_UNORM_SRGB: case CU_AD_FORMAT_BC3_UNORM:
  case CU_AD_FORMAT_BC3_UNORM_SRGB: case CU_AD_FORMAT_BC5_UNORM: case CU_AD_FORMAT_BC5_SNORM:
  case CU_AD_FORMAT_BC6H_UF16: case CU_AD_FORMAT_BC6H_SF16: case CU_AD_FORMAT_BC7_UNORM:
  case CU_AD_FORMAT_BC7_UNORM_SRGB: *block = 4; return 8;
  /* video surfaces: luma plus subsampled chroma, per texel */
  case CU_AD_FORMAT_NV12: return 12;
  case CU_AD_FORMAT_NV16: case CU_AD_FORMAT_YUY2: return 16;
  case CU_AD_FORMAT_P010: case CU_AD_FORMAT_P016: case CU_AD_FORMAT_Y444_PLANAR8: return 24;
  case CU_AD_FORMAT_P210: case CU_AD_FORMAT_P216: case CU_AD_FORMAT_Y210: case CU_AD_FORMAT_Y216:
  case CU_AD_FORMAT_AYUV: case CU_AD_FORMAT_Y410: return 32;
  case CU_AD_FORMAT_Y444_PLANAR10: return 48;
  case CU_AD_FORMAT_Y416: return 64;
  default: return WIDEST_TEXEL_BITS;
  }
  return channels == 1 || channels == 2 || channels == 4 ? per * channels : 0;
}

static uint64_t max1(uint64_t v) { return v ? v : 1; }

/* a * b, or UINT64_MAX when it does not fit */
static uint64_t mul_sat(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* The estimate of an array's bytes on the card (see the top of the file);
 * 0 for one that takes no memory now or that the driver will refuse. */
static uint64_t array_estimate(uint64_t w, uint64_t h, uint64_t d, CUarray_format f, unsigned channels,
                               unsigned flags, unsigned levels) {
  if (flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) return 0;
  unsigned block, bits = texel_bits(f, channels, &block);
  /* no device takes a side of 2^32 texels, nor more levels than such a
   * side halves into: the driver refuses those */
  if (!w || !bits || !levels || levels > 33 || w > ARRAY_SIDE_MAX || h > ARRAY_SIDE_MAX || d > ARRAY_SIDE_MAX)
    return 0;
  int slices = (flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;   /* depth counts layers or faces */
  uint64_t total = 0;
  for (unsigned l = 0; l < levels && total != UINT64_MAX; l++) {
    uint64_t bw = (w + block - 1) / block, bh = (max1(h) + block - 1) / block;
    uint64_t row = mul_sat(bw, (uint64_t)bits * block * block);
    row = row == UINT64_MAX ? row : ((row + 7) / 8 + ARRAY_ROW - 1) / ARRAY_ROW * ARRAY_ROW;
    total = add_sat(total, mul_sat(mul_sat(row, bh), max1(d)));
    w = max1(w >> 1);
    if (h) h = max1(h >> 1);
    if (d && !slices) d = max1(d >> 1);
  }
  uint64_t page = total < LARGE_PAGE ? SMALL_PAGE : LARGE_PAGE;
  if (total > UINT64_MAX - page) return 0;
  return (total + page - 1) / page * page;
}

/* One body for every array creation: the handle the driver gives (an
 * opaque, pointer-sized value) is the record's key in the service's array
 * space. */
#define ARRAY_BODY(name, estimate, driver_call)                                            \
  VS_HOOK_ENTER(name, DRIVER_ARGS);                                                        \
  uint64_t est_ = (estimate);                                                              \
  if (!pHandle || !est_) VS_FORWARD(name, DRIVER_ARGS);                                    \
  vs_guard_enter();                                                                        \
  vs_mem_op op;                                                                            \
  CUresult r;                                                                              \
  if (vs_mem_alloc_begin(&op, VS_MEM_ARRAY, CARD, est_, VRAMSHIM_CALL_MEM_ALLOC) == VS_MEM_DONE) { \
    r = op.result; /* only a refusal: the service never makes an array itself */          \
  } else {                                                                                 \
    r = driver_call;                                                                       \
    if (vs_mem_retry_refused(&op, r)) r = driver_call;                                     \
    r = vs_mem_alloc_end(&op, r, r == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0);   \
  }                                                                                        \
  vs_guard_leave();                                                                        \
  return r

#define DESC2(a) ((a) ? array_estimate((a)->Width, (a)->Height, 0, (a)->Format, (a)->NumChannels, 0, 1) : 0)
#define DESC3(a, levels)                                                                                       \
  ((a) ? array_estimate((a)->Width, (a)->Height, (a)->Depth, (a)->Format, (a)->NumChannels, (a)->Flags, levels) \
       : 0)

#define DRIVER_ARGS (pHandle, pAllocateArray)
CUresult vs_hook_cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray) {
  ARRAY_BODY(cuArrayCreate_v2, DESC2(pAllocateArray), real->cuArrayCreate_v2(pHandle, pAllocateArray));
}
CUresult vs_hook_cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray) {
  ARRAY_BODY(cuArrayCreate, DESC2(pAllocateArray), real->cuArrayCreate(pHandle, pAllocateArray));
}
CUresult vs_hook_cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray) {
  ARRAY_BODY(cuArray3DCreate_v2, DESC3(pAllocateArray, 1), real->cuArray3DCreate_v2(pHandle, pAllocateArray));
}
CUresult vs_hook_cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray) {
  ARRAY_BODY(cuArray3DCreate, DESC3(pAllocateArray, 1), real->cuArray3DCreate(pHandle, pAllocateArray));
}
#undef DRIVER_ARGS
#define DRIVER_ARGS (pHandle, pMipmappedArrayDesc, numMipmapLevels)
CUresult vs_hook_cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                        unsigned int numMipmapLevels) {
  ARRAY_BODY(cuMipmappedArrayCreate, DESC3(pMipmappedArrayDesc, numMipmapLevels),
             real->cuMipmappedArrayCreate(pHandle, pMipmappedArrayDesc, numMipmapLevels));
}
#undef DRIVER_ARGS

/* An unknown handle (one made before the shim saw it, or not an array)
 * goes to the driver unchanged and moves no books. */
#define DRIVER_ARGS (hArray)
CUresult vs_hook_cuArrayDestroy(CUarray hArray) {
  FREE_BODY(cuArrayDestroy, VS_SPACE_ARRAY, VS_FREE_ARRAY, VRAMSHIM_CALL_MEM_FREE, (uint64_t)(uintptr_t)hArray,
            real->cuArrayDestroy(hArray));
}
#undef DRIVER_ARGS
#define DRIVER_ARGS (hMipmappedArray)
CUresult vs_hook_cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  FREE_BODY(cuMipmappedArrayDestroy, VS_SPACE_ARRAY, VS_FREE_ARRAY, VRAMSHIM_CALL_MEM_FREE,
            (uint64_t)(uintptr_t)hMipmappedArray, real->cuMipmappedArrayDestroy(hMipmappedArray));
}
#undef DRIVER_ARGS

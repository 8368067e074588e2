/* CUDA arrays and mipmapped arrays: device memory a program holds through
 * an opaque handle rather than a pointer (the runtime's cudaMallocArray,
 * cudaMalloc3DArray and cudaMallocMipmappedArray come here). Each is one
 * record of memory.c (kind SIM_K_ARRAY) whose base address is the handle,
 * so the card's charge, a context's teardown and a killed process's
 * reclaim treat it like any allocation.
 *
 * The footprint is the sim's model, not a real driver's layout: each row
 * of texels padded to 512 bytes, rows times height times depth (layers, or
 * the six faces of a cubemap), mipmap levels summed (width and height
 * halved per level, and depth for a 3D array), charged in 64 KiB pages
 * below 2 MiB and in 2 MiB pages from there.
 * Only the formats whose texel size is plain are modelled (the integer,
 * half and float formats, and the normalised X1/X2/X4 ones); block
 * compressed and video formats, sparse and deferred-mapping arrays are
 * CUDA_ERROR_NOT_SUPPORTED. Copies into and out of arrays are not
 * modelled either (docs/sim.md). */
#include "sim_internal.h"

#define ARRAY_PITCH ((size_t)512)

/* Bytes per texel, 0 for a format the sim does not model. */
static size_t texel_bytes(CUarray_format f, unsigned channels)
{
    size_t per;
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: per = 1; break;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: per = 2; break;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: per = 4; break;
    case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X1: return 1;
    case CU_AD_FORMAT_UNORM_INT8X2: case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X1: return 2;
    case CU_AD_FORMAT_UNORM_INT8X4: case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X2: return 4;
    case CU_AD_FORMAT_UNORM_INT16X4: case CU_AD_FORMAT_SNORM_INT16X4: return 8;
    default: return 0;
    }
    return channels == 1 || channels == 2 || channels == 4 ? per * channels : 0;
}

static size_t max1(size_t v) { return v ? v : 1; }

/* The model's bytes for desc with `levels` mipmap levels (1 for a plain
 * array); 0 with *bad set to the error when desc is refused. */
static size_t footprint(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, CUresult *bad)
{
    *bad = CUDA_SUCCESS;
    if (d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) { *bad = CUDA_ERROR_NOT_SUPPORTED; return 0; }
    size_t t = texel_bytes(d->Format, d->NumChannels);
    if (!t) {
        int plain_but_bad_channels = texel_bytes(d->Format, 1) != 0;
        *bad = plain_but_bad_channels ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
        return 0;
    }
    int layered = (d->Flags & CUDA_ARRAY3D_LAYERED) != 0, cube = (d->Flags & CUDA_ARRAY3D_CUBEMAP) != 0;
    if (!d->Width || (!d->Height && d->Depth && !layered) ||
        (cube && (d->Width != d->Height || !d->Depth || d->Depth % 6 || (!layered && d->Depth != 6)))) {
        *bad = CUDA_ERROR_INVALID_VALUE;
        return 0;
    }
    size_t w = d->Width, h = d->Height, depth = d->Depth, big = w > h ? w : h, total = 0;
    if (!layered && !cube && depth > big) big = depth;
    unsigned most = 1;
    while (big >>= 1) most++;
    if (!levels || levels > most) { *bad = CUDA_ERROR_INVALID_VALUE; return 0; }
    for (unsigned l = 0; l < levels; l++) {
        size_t row, plane, vol;
        /* larger than any address space: no card could hold it */
        if (__builtin_mul_overflow(w, t, &row) || row > SIZE_MAX - ARRAY_PITCH ||
            __builtin_mul_overflow(SIM_ROUND_UP(row, ARRAY_PITCH), max1(h), &plane) ||
            __builtin_mul_overflow(plane, max1(depth), &vol) || __builtin_add_overflow(total, vol, &total)) {
            *bad = CUDA_ERROR_OUT_OF_MEMORY;
            return 0;
        }
        w = max1(w >> 1);
        if (h) h = max1(h >> 1);
        if (depth && !layered && !cube) depth = max1(depth >> 1);
    }
    return total;
}

static CUresult array_make(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, unsigned mip, uintptr_t *handle)
{
    CUresult bad;
    size_t bytes = footprint(d, levels, &bad);
    if (!bytes) return bad;
    struct sim_alloc *a;
    size_t page = bytes < SIM_BIG_PAGE ? (size_t)64 << 10 : SIM_BIG_PAGE;
    CUresult r = sim_alloc_device(SIM_K_ARRAY, bytes, SIM_ROUND_UP(bytes, page), &a);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&sim_mem_lock);
    a->adesc = *d;
    a->alevels = mip;
    pthread_mutex_unlock(&sim_mem_lock);
    *handle = a->base;
    return CUDA_SUCCESS;
}

/* The array record of handle h (mip: a mipmapped one), sim_mem_lock held. */
static struct sim_alloc *array_find(uintptr_t h, int mip)
{
    struct sim_alloc *a = h ? sim_mem_find_base(h) : NULL;
    return a && a->kind == SIM_K_ARRAY && (a->alevels != 0) == (mip != 0) ? a : NULL;
}

static CUresult array_destroy(uintptr_t h, int mip)
{
    SIM_REQUIRE_INIT();
    sim_sync_all();   /* queued work may still read the array */
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = array_find(h, mip);
    if (a) sim_mem_remove(a);
    pthread_mutex_unlock(&sim_mem_lock);
    if (!a) return CUDA_ERROR_INVALID_HANDLE;
    sim_latency();
    sim_free_record(a);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    SIM_COUNT(cuArray3DCreate_v2);
    SIM_REQUIRE_INIT();
    if (!pHandle || !pAllocateArray) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t h;
    CUresult r = array_make(pAllocateArray, 1, 0, &h);
    if (r == CUDA_SUCCESS) *pHandle = (CUarray)h;
    return r;
}

SIM_API CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    SIM_COUNT(cuArrayCreate_v2);
    SIM_REQUIRE_INIT();
    if (!pHandle || !pAllocateArray) return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = {pAllocateArray->Width, pAllocateArray->Height, 0, pAllocateArray->Format,
                                 pAllocateArray->NumChannels, 0};
    uintptr_t h;
    CUresult r = array_make(&d, 1, 0, &h);
    if (r == CUDA_SUCCESS) *pHandle = (CUarray)h;
    return r;
}

SIM_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                        unsigned int numMipmapLevels)
{
    SIM_COUNT(cuMipmappedArrayCreate);
    SIM_REQUIRE_INIT();
    if (!pHandle || !pMipmappedArrayDesc) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t h;
    CUresult r = array_make(pMipmappedArrayDesc, numMipmapLevels, numMipmapLevels, &h);
    if (r == CUDA_SUCCESS) *pHandle = (CUmipmappedArray)h;
    return r;
}

SIM_API CUresult cuArrayDestroy(CUarray hArray)
{
    SIM_COUNT(cuArrayDestroy);
    return array_destroy((uintptr_t)hArray, 0);
}

SIM_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    SIM_COUNT(cuMipmappedArrayDestroy);
    return array_destroy((uintptr_t)hMipmappedArray, 1);
}

/* The descriptor of plain array h as created. */
static CUresult array_desc(CUarray h, CUDA_ARRAY3D_DESCRIPTOR *out)
{
    SIM_REQUIRE_INIT();
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = array_find((uintptr_t)h, 0);
    if (a) *out = a->adesc;
    pthread_mutex_unlock(&sim_mem_lock);
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    SIM_COUNT(cuArray3DGetDescriptor_v2);
    return array_desc(hArray, pArrayDescriptor);
}

SIM_API CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    SIM_COUNT(cuArrayGetDescriptor_v2);
    if (!pArrayDescriptor) return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d;
    CUresult r = array_desc(hArray, &d);
    if (r != CUDA_SUCCESS) return r;
    if (d.Depth) return CUDA_ERROR_INVALID_VALUE;   /* a 3D or layered array has no 2D descriptor */
    pArrayDescriptor->Width = d.Width;
    pArrayDescriptor->Height = d.Height;
    pArrayDescriptor->Format = d.Format;
    pArrayDescriptor->NumChannels = d.NumChannels;
    return CUDA_SUCCESS;
}

/* cuMemAlloc and friends: every allocation is its own mapping of a memory
 * object (os.h: a memfd; a section on Windows), so
 * device pointers are real host addresses (page aligned, >= 512 B), no two
 * live allocations can overlap, and the pages can be shared over IPC. */
#include "sim_internal.h"
#include <stdlib.h>
#include <string.h>

CUresult sim_alloc_device(enum sim_kind kind, size_t size, size_t charge_size, struct sim_alloc **out)
{
    return sim_alloc_record(kind, size, charge_size, 0, out);
}

CUresult sim_alloc_record(enum sim_kind kind, size_t size, size_t charge_size, int host, struct sim_alloc **out)
{
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    if (!host && size > sim_cfg.capacity[ctx->dev]) return CUDA_ERROR_OUT_OF_MEMORY;
    sim_latency();
    struct sim_alloc *a = calloc(1, sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    a->charged = charge_size;
    a->host = host;
    r = host ? CUDA_SUCCESS : sim_charge(ctx->dev, charge_size);
    if (r != CUDA_SUCCESS) {
        free(a);
        return r;
    }
    a->id = sim_next_id();
    void *m;
    r = sim_backing_create(size, a->id, ctx->dev, &a->obj, &m);
    if (r != CUDA_SUCCESS) {
        if (!host) sim_uncharge(ctx->dev, charge_size);
        free(a);
        return r;
    }
    a->base = (uintptr_t)m;
    a->size = size;
    a->map_len = SIM_ROUND_UP(size, SIM_PAGE);
    a->card = ctx->dev;
    a->kind = kind;
    a->ctx = ctx;
    pthread_mutex_lock(&sim_mem_lock);
    sim_mem_insert(a);
    pthread_mutex_unlock(&sim_mem_lock);
    if (!host) sim_live_add(a->card, (int64_t)size, 1);
    *out = a;
    return CUDA_SUCCESS;
}

void sim_free_record(struct sim_alloc *a)
{
    switch (a->kind) {
    case SIM_K_POOL:
        sim_pool_free_now(a);   /* back to its pool's cache, or released */
        return;
    case SIM_K_DEVICE:
    case SIM_K_MANAGED:
    case SIM_K_ARRAY:
        sim_live_add(a->card, -(int64_t)a->size, -1);
        sim_uncharge(a->card, a->charged);
        sim_backing_destroy(a->obj, (void *)a->base, a->map_len);
        break;
    case SIM_K_HOST:
        sim_os_anon_free((void *)a->base, a->map_len);
        break;
    case SIM_K_IPC:
        sim_os_obj_unmap((void *)a->base, a->map_len);
        break;
    case SIM_K_VA:
        break;   /* vmm.c owns reservations */
    }
    free(a);
}

static size_t charge_of(size_t size) { return SIM_ROUND_UP(size, sim_cfg.alloc_granule); }

SIM_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    SIM_COUNT(cuMemAlloc_v2);
    SIM_REQUIRE_INIT();
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    struct sim_alloc *a;
    CUresult r = sim_alloc_device(SIM_K_DEVICE, bytesize, charge_of(bytesize), &a);
    if (r == CUDA_SUCCESS) *dptr = a->base;
    return r;
}

/* The legacy entry points take 32-bit device pointers; sim addresses do not
 * fit in 32 bits, so they are refused (docs/sim.md). */
SIM_API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    SIM_COUNT(cuMemAlloc);
    (void)bytesize;
    SIM_REQUIRE_INIT();
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h, unsigned elem)
{
    SIM_REQUIRE_INIT();
    if (!dptr || !pitch || w == 0 || h == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = SIM_ROUND_UP(w, 512);
    if (h > SIZE_MAX / p) return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_alloc *a;
    CUresult r = sim_alloc_device(SIM_K_DEVICE, p * h, charge_of(p * h), &a);
    if (r == CUDA_SUCCESS) {
        *dptr = a->base;
        *pitch = p;
    }
    return r;
}

SIM_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes)
{
    SIM_COUNT(cuMemAllocPitch_v2);
    return alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
}

SIM_API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int w,
                                 unsigned int h, unsigned int elem)
{
    SIM_COUNT(cuMemAllocPitch);
    (void)w; (void)h; (void)elem;
    SIM_REQUIRE_INIT();
    if (!dptr || !pPitch) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    SIM_COUNT(cuMemAllocManaged);
    SIM_REQUIRE_INIT();
    if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_alloc *a;
    CUresult r = sim_alloc_device(SIM_K_MANAGED, bytesize, charge_of(bytesize), &a);
    if (r == CUDA_SUCCESS) *dptr = a->base;
    return r;
}

static CUresult mem_free(CUdeviceptr p)
{
    SIM_REQUIRE_INIT();
    if (p == 0) return CUDA_SUCCESS;
    /* cuMemFree synchronises: queued work may still touch the block (and
     * so it may not run while a stream captures). */
    CUresult cap = sim_capture_forbids_sync();
    if (cap != CUDA_SUCCESS) return cap;
    sim_sync_all();
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find_base((uintptr_t)p);
    if (!a || a->free_pending || !sim_alloc_freeable(a)) {
        pthread_mutex_unlock(&sim_mem_lock);
        return !a && sim_graph_free(p) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;   /* a graph's allocation */
    }
    sim_mem_remove(a);
    pthread_mutex_unlock(&sim_mem_lock);
    if (a->kind != SIM_K_POOL) sim_latency();   /* a pool block stays reserved */
    sim_free_record(a);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    SIM_COUNT(cuMemFree_v2);
    return mem_free(dptr);
}

SIM_API CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    SIM_COUNT(cuMemFree);
    return mem_free(dptr);
}

SIM_API CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
    SIM_COUNT(cuMemGetInfo_v2);
    struct sim_ctx *c;
    CUresult r = sim_ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    /* One output may be NULL (OptiX asks for the total alone, llama.cpp
     * for the free memory alone, and both run on the real driver). */
    if (!free_b && !total) return CUDA_ERROR_INVALID_VALUE;
    uint64_t cap = sim_cfg.capacity[c->dev], used = sim_state_used(c->dev);
    if (total) *total = cap;
    if (free_b) *free_b = used >= cap ? 0 : cap - used;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetInfo(unsigned int *free_b, unsigned int *total)
{
    SIM_COUNT(cuMemGetInfo);
    struct sim_ctx *c;
    CUresult r = sim_ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!free_b && !total) return CUDA_ERROR_INVALID_VALUE;
    uint64_t cap = sim_cfg.capacity[c->dev], used = sim_state_used(c->dev);
    uint64_t f = used >= cap ? 0 : cap - used;
    if (total) *total = cap > 0xffffffffull ? 0xffffffffu : (unsigned)cap;
    if (free_b) *free_b = f > 0xffffffffull ? 0xffffffffu : (unsigned)f;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    SIM_COUNT(cuMemGetAddressRange_v2);
    SIM_REQUIRE_INIT();
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find((uintptr_t)dptr);
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (a && a->kind != SIM_K_HOST && a->kind != SIM_K_VA) {
        if (pbase) *pbase = a->base;
        if (psize) *psize = a->size;
        r = CUDA_SUCCESS;
    } else if (a && a->kind == SIM_K_VA) {
        int dev;
        uintptr_t base;
        size_t size;
        if (sim_vmm_ptr_info((uintptr_t)dptr, &dev, &base, &size)) {
            if (pbase) *pbase = base;
            if (psize) *psize = size;
            r = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&sim_mem_lock);
    return r;
}

SIM_API CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
    SIM_COUNT(cuMemGetAddressRange);
    (void)pbase; (void)psize; (void)dptr;
    SIM_REQUIRE_INIT();
    return CUDA_ERROR_NOT_SUPPORTED;
}

int sim_dev_range_ok(uintptr_t p, size_t n) { return sim_range_ok(p, n, 0); }

/* What a kernel on dev may touch (vramsim.h): memory of a context of dev,
 * or of another device's context that one of dev's enabled peer access to
 * (cuCtxEnablePeerAccess); a VMM range where cuMemSetAccess gave dev some
 * access; managed and pinned host memory anywhere. */
SIM_API int vramsim_device_can_access(int dev, uint64_t ptr, uint64_t n)
{
    if (!sim_initialized() || dev < 0 || dev >= sim_cfg.ncards || n == 0) return 0;
    pthread_mutex_lock(&sim_mem_lock);
    int vmm = sim_vmm_dev_access_locked((uintptr_t)ptr, (size_t)n, dev);
    struct sim_alloc *a = vmm < 0 ? sim_mem_find((uintptr_t)ptr) : NULL;
    int inside = a && (uintptr_t)ptr + n <= a->base + (a->map_len > a->size ? a->map_len : a->size);
    enum sim_kind kind = a ? a->kind : SIM_K_HOST;
    int card = a ? a->card : -1;
    struct sim_ctx *owner = a ? a->ctx : NULL;
    pthread_mutex_unlock(&sim_mem_lock);
    if (vmm >= 0) return vmm;
    if (!inside) return 0;
    if (kind == SIM_K_MANAGED || kind == SIM_K_HOST) return 1;
    if (card == dev) return 1;
    return owner && sim_ctx_peer_enabled(dev, owner);
}

/* any_host: a pointer outside every record is host memory (unified copies) */
int sim_range_ok(uintptr_t p, size_t n, int any_host)
{
    if (n == 0) return 1;
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find(p);
    int ok = any_host && !a;
    if (a && a->kind == SIM_K_VA)
        ok = p - a->base <= a->map_len && n <= a->map_len - (p - a->base) && sim_vmm_range_ok(p, n);
    else if (a)
        ok = p - a->base <= a->size && n <= a->size - (p - a->base);
    pthread_mutex_unlock(&sim_mem_lock);
    return ok;
}

/* ---- pinned host memory: not charged to any card ---- */
static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
    SIM_REQUIRE_INIT();
    if (!pp || size == 0) return CUDA_ERROR_INVALID_VALUE;
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    size_t l = SIM_ROUND_UP(size, SIM_PAGE);
    void *m = sim_os_anon_alloc(l);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_alloc *a = calloc(1, sizeof *a);
    if (!a) {
        sim_os_anon_free(m, l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->base = (uintptr_t)m;
    a->size = size;
    a->map_len = l;
    a->obj = SIM_OS_NO_OBJ;
    a->card = ctx->dev;
    a->kind = SIM_K_HOST;
    a->ctx = ctx;
    a->id = sim_next_id();
    a->ipc_refs = (int)flags;   /* host allocations keep their flags here */
    pthread_mutex_lock(&sim_mem_lock);
    sim_mem_insert(a);
    pthread_mutex_unlock(&sim_mem_lock);
    *pp = m;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    SIM_COUNT(cuMemHostAlloc);
    return host_alloc(pp, bytesize, Flags);
}
SIM_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    SIM_COUNT(cuMemAllocHost_v2);
    return host_alloc(pp, bytesize, 0);
}
SIM_API CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    SIM_COUNT(cuMemAllocHost);
    return host_alloc(pp, bytesize, 0);
}

SIM_API CUresult cuMemFreeHost(void *p)
{
    SIM_COUNT(cuMemFreeHost);
    SIM_REQUIRE_INIT();
    sim_sync_all();
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find_base((uintptr_t)p);
    if (!p || !a || a->kind != SIM_K_HOST) {
        pthread_mutex_unlock(&sim_mem_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    sim_mem_remove(a);
    pthread_mutex_unlock(&sim_mem_lock);
    sim_free_record(a);
    return CUDA_SUCCESS;
}

static CUresult host_lookup(void *p, struct sim_alloc *copy)
{
    SIM_REQUIRE_INIT();
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find((uintptr_t)p);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (a && a->kind == SIM_K_HOST) {
        *copy = *a;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_mem_lock);
    return r;
}

SIM_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    SIM_COUNT(cuMemHostGetDevicePointer_v2);
    struct sim_alloc a;
    if (!pdptr || Flags != 0) return sim_initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = host_lookup(p, &a);
    if (r == CUDA_SUCCESS) *pdptr = (CUdeviceptr)(uintptr_t)p;   /* unified addressing */
    return r;
}

SIM_API CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
    SIM_COUNT(cuMemHostGetDevicePointer);
    (void)pdptr; (void)p; (void)Flags;
    SIM_REQUIRE_INIT();
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    SIM_COUNT(cuMemHostGetFlags);
    struct sim_alloc a;
    if (!pFlags) return sim_initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = host_lookup(p, &a);
    if (r == CUDA_SUCCESS) *pFlags = (unsigned)a.ipc_refs;
    return r;
}

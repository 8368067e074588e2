/* Copies and memsets. The synchronous forms first wait for the default
 * stream (they are ordered after it, as on the legacy default stream); the
 * Async forms queue the work on the stream's worker. Device ranges are
 * checked against the allocation table: a range that runs outside a live
 * allocation is CUDA_ERROR_INVALID_VALUE, never a stray write. */
#include "sim_internal.h"
#include <string.h>

struct copy_op { void *dst; const void *src; size_t n; };
static void run_copy(void *p)
{
    struct copy_op *o = p;
    memmove(o->dst, o->src, o->n);
}

struct set_op { void *dst; uint32_t value; unsigned elem; size_t n; };
static void run_set(void *p)
{
    struct set_op *o = p;
    if (o->elem == 1) {
        memset(o->dst, (int)(o->value & 0xff), o->n);
    } else if (o->elem == 2) {
        uint16_t *d = o->dst, v = (uint16_t)o->value;
        for (size_t i = 0; i < o->n; i++) d[i] = v;
    } else {
        uint32_t *d = o->dst;
        for (size_t i = 0; i < o->n; i++) d[i] = o->value;
    }
}

enum { K_H = 1, K_D = 2, K_ANY = 3 };

/* Queues fn(op) on stream s (async), or runs it now, after the default
 * stream's work. */
static CUresult submit(sim_op_fn fn, void *op, size_t opsz, int async, CUstream s)
{
    if (async) {
        struct sim_stream *st = sim_stream_get(s);
        if (!st) return CUDA_ERROR_INVALID_HANDLE;
        return sim_stream_enqueue(st, fn, op, opsz);
    }
    sim_default_stream_sync();
    fn(op);
    return CUDA_SUCCESS;
}

static CUresult do_copy(uintptr_t dst, int dk, uintptr_t src, int sk, size_t n, int async, CUstream s)
{
    SIM_REQUIRE_INIT();
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (n == 0) return CUDA_SUCCESS;
    if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
    /* typed sides must be device memory; unified sides may be either, but
     * if they fall in a device allocation or reservation they must fit */
    if ((dk != K_H && !sim_range_ok(dst, n, dk == K_ANY)) || (sk != K_H && !sim_range_ok(src, n, sk == K_ANY)))
        return CUDA_ERROR_INVALID_VALUE;
    struct copy_op o = {(void *)dst, (const void *)src, n};
    return submit(run_copy, &o, sizeof o, async, s);
}

static CUresult do_set(uintptr_t dst, uint32_t v, unsigned elem, size_t n, int async, CUstream s)
{
    SIM_REQUIRE_INIT();
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (n == 0) return CUDA_SUCCESS;
    if (dst % elem != 0 || n > SIZE_MAX / elem || !sim_dev_range_ok(dst, n * elem))
        return CUDA_ERROR_INVALID_VALUE;
    struct set_op o = {(void *)dst, v, elem, n};
    return submit(run_set, &o, sizeof o, async, s);
}

#define LEGACY_PTR(x) ((uintptr_t)(x))

/* ---- synchronous copies ---- */
#define HTOD(name, ptrt, szt) \
    SIM_API CUresult name(ptrt dst, const void *src, szt n) \
    { SIM_COUNT(name); return do_copy(LEGACY_PTR(dst), K_D, (uintptr_t)src, K_H, n, 0, NULL); }
#define DTOH(name, ptrt, szt) \
    SIM_API CUresult name(void *dst, ptrt src, szt n) \
    { SIM_COUNT(name); return do_copy((uintptr_t)dst, K_H, LEGACY_PTR(src), K_D, n, 0, NULL); }
#define DTOD(name, ptrt, szt) \
    SIM_API CUresult name(ptrt dst, ptrt src, szt n) \
    { SIM_COUNT(name); return do_copy(LEGACY_PTR(dst), K_D, LEGACY_PTR(src), K_D, n, 0, NULL); }
HTOD(cuMemcpyHtoD, CUdeviceptr_v1, unsigned int)
HTOD(cuMemcpyHtoD_v2, CUdeviceptr, size_t)
HTOD(cuMemcpyHtoD_v2_ptds, CUdeviceptr, size_t)
DTOH(cuMemcpyDtoH, CUdeviceptr_v1, unsigned int)
DTOH(cuMemcpyDtoH_v2, CUdeviceptr, size_t)
DTOH(cuMemcpyDtoH_v2_ptds, CUdeviceptr, size_t)
DTOD(cuMemcpyDtoD, CUdeviceptr_v1, unsigned int)
DTOD(cuMemcpyDtoD_v2, CUdeviceptr, size_t)
DTOD(cuMemcpyDtoD_v2_ptds, CUdeviceptr, size_t)

/* Unified addressing: either side may be host or device memory. */
SIM_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    SIM_COUNT(cuMemcpy);
    return do_copy(dst, K_ANY, src, K_ANY, n, 0, NULL);
}
SIM_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    SIM_COUNT(cuMemcpy_ptds);
    return do_copy(dst, K_ANY, src, K_ANY, n, 0, NULL);
}

/* ---- asynchronous copies ---- */
#define HTODA(name, ptrt, szt) \
    SIM_API CUresult name(ptrt dst, const void *src, szt n, CUstream s) \
    { SIM_COUNT(name); return do_copy(LEGACY_PTR(dst), K_D, (uintptr_t)src, K_H, n, 1, s); }
#define DTOHA(name, ptrt, szt) \
    SIM_API CUresult name(void *dst, ptrt src, szt n, CUstream s) \
    { SIM_COUNT(name); return do_copy((uintptr_t)dst, K_H, LEGACY_PTR(src), K_D, n, 1, s); }
#define DTODA(name, ptrt, szt) \
    SIM_API CUresult name(ptrt dst, ptrt src, szt n, CUstream s) \
    { SIM_COUNT(name); return do_copy(LEGACY_PTR(dst), K_D, LEGACY_PTR(src), K_D, n, 1, s); }
HTODA(cuMemcpyHtoDAsync, CUdeviceptr_v1, unsigned int)
HTODA(cuMemcpyHtoDAsync_v2, CUdeviceptr, size_t)
HTODA(cuMemcpyHtoDAsync_v2_ptsz, CUdeviceptr, size_t)
DTOHA(cuMemcpyDtoHAsync, CUdeviceptr_v1, unsigned int)
DTOHA(cuMemcpyDtoHAsync_v2, CUdeviceptr, size_t)
DTOHA(cuMemcpyDtoHAsync_v2_ptsz, CUdeviceptr, size_t)
DTODA(cuMemcpyDtoDAsync, CUdeviceptr_v1, unsigned int)
DTODA(cuMemcpyDtoDAsync_v2, CUdeviceptr, size_t)
DTODA(cuMemcpyDtoDAsync_v2_ptsz, CUdeviceptr, size_t)

SIM_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    SIM_COUNT(cuMemcpyAsync);
    return do_copy(dst, K_ANY, src, K_ANY, n, 1, s);
}
SIM_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    SIM_COUNT(cuMemcpyAsync_ptsz);
    return do_copy(dst, K_ANY, src, K_ANY, n, 1, s);
}

/* ---- memset ---- */
#define SETS(name, ptrt, vt, elem, szt) \
    SIM_API CUresult name(ptrt dst, vt v, szt n) \
    { SIM_COUNT(name); return do_set(LEGACY_PTR(dst), v, elem, n, 0, NULL); }
#define SETA(name, vt, elem) \
    SIM_API CUresult name(CUdeviceptr dst, vt v, size_t n, CUstream s) \
    { SIM_COUNT(name); return do_set(dst, v, elem, n, 1, s); }
SETS(cuMemsetD8, CUdeviceptr_v1, unsigned char, 1, unsigned int)
SETS(cuMemsetD8_v2, CUdeviceptr, unsigned char, 1, size_t)
SETS(cuMemsetD8_v2_ptds, CUdeviceptr, unsigned char, 1, size_t)
SETS(cuMemsetD16, CUdeviceptr_v1, unsigned short, 2, unsigned int)
SETS(cuMemsetD16_v2, CUdeviceptr, unsigned short, 2, size_t)
SETS(cuMemsetD16_v2_ptds, CUdeviceptr, unsigned short, 2, size_t)
SETS(cuMemsetD32, CUdeviceptr_v1, unsigned int, 4, unsigned int)
SETS(cuMemsetD32_v2, CUdeviceptr, unsigned int, 4, size_t)
SETS(cuMemsetD32_v2_ptds, CUdeviceptr, unsigned int, 4, size_t)
SETA(cuMemsetD8Async, unsigned char, 1)
SETA(cuMemsetD8Async_ptsz, unsigned char, 1)
SETA(cuMemsetD16Async, unsigned short, 2)
SETA(cuMemsetD16Async_ptsz, unsigned short, 2)
SETA(cuMemsetD32Async, unsigned int, 4)
SETA(cuMemsetD32Async_ptsz, unsigned int, 4)

/* Primary and regular contexts, and the per-thread context stack.
 *
 * Context objects are never freed: a destroyed context stays allocated but
 * inactive, so a stale handle is answered with CUDA_ERROR_INVALID_CONTEXT
 * rather than a read of freed memory. Destroying a context (or releasing a
 * primary context to zero) frees the device memory allocated in it, as the
 * real driver does. */
#include "sim_internal.h"
#include <stdlib.h>
#include <string.h>

#define STACK_MAX 64

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_ctx primary[SIM_MAX_CARDS];
static struct sim_ctx **regular;      /* every regular context ever created */
static size_t nregular, capregular;

static _Thread_local struct sim_ctx *stack[STACK_MAX];
static _Thread_local int depth;
/* Bumped at fork so a thread-local stack inherited by the child is stale. */
static atomic_uint generation;
static _Thread_local unsigned stack_gen;

static void check_gen(void)
{
    unsigned g = atomic_load_explicit(&generation, memory_order_relaxed);
    if (stack_gen != g) {
        depth = 0;
        stack_gen = g;
    }
}

struct sim_ctx *sim_ctx_lookup(CUcontext c)
{
    struct sim_ctx *x = (struct sim_ctx *)c, *found = NULL;
    if (!x) return NULL;
    pthread_mutex_lock(&ctx_lock);
    for (int i = 0; i < SIM_MAX_CARDS; i++)
        if (x == &primary[i]) found = x;
    for (size_t i = 0; !found && i < nregular; i++)
        if (regular[i] == x) found = x;
    if (found && !found->active) found = NULL;
    pthread_mutex_unlock(&ctx_lock);
    return found;
}

CUresult sim_ctx_current(struct sim_ctx **out)
{
    check_gen();
    if (!sim_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (depth == 0 || !stack[depth - 1]) return CUDA_ERROR_INVALID_CONTEXT;
    struct sim_ctx *c = stack[depth - 1];
    if (!__atomic_load_n(&c->active, __ATOMIC_ACQUIRE)) return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

/* ---- peer access: pairs (accessor, owner) of contexts; the accessor's
 * device may touch what was allocated in the owner (cuMemAlloc memory and
 * the like; VMM mappings have their own per-device access, vmm.c). */
#define SIM_MAX_PEERS 64
static struct { struct sim_ctx *from, *to; } peers[SIM_MAX_PEERS];
static size_t npeers;   /* guarded by ctx_lock */

static int peer_index(struct sim_ctx *from, struct sim_ctx *to)
{
    for (size_t i = 0; i < npeers; i++)
        if (peers[i].from == from && peers[i].to == to) return (int)i;
    return -1;
}

/* The end of ctx ends every pairing with it (ctx_lock held). */
static void peers_ctx_end(struct sim_ctx *ctx)
{
    for (size_t i = 0; i < npeers;)
        if (peers[i].from == ctx || peers[i].to == ctx) peers[i] = peers[--npeers];
        else i++;
}

int sim_ctx_peer_enabled(int dev, struct sim_ctx *owner)
{
    int on = 0;
    pthread_mutex_lock(&ctx_lock);
    for (size_t i = 0; i < npeers && !on; i++)
        on = peers[i].to == owner && peers[i].from->dev == dev && peers[i].from->active;
    pthread_mutex_unlock(&ctx_lock);
    return on;
}

SIM_API CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    SIM_COUNT(cuCtxEnablePeerAccess);
    struct sim_ctx *cur;
    CUresult r = sim_ctx_current(&cur);
    if (r != CUDA_SUCCESS) return r;
    if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    struct sim_ctx *to = sim_ctx_lookup(peerContext);
    if (!to) return CUDA_ERROR_INVALID_CONTEXT;
    if (to->dev == cur->dev) return CUDA_ERROR_INVALID_DEVICE;   /* cuDeviceCanAccessPeer says 0 */
    pthread_mutex_lock(&ctx_lock);
    if (peer_index(cur, to) >= 0) r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    else if (npeers == SIM_MAX_PEERS) r = CUDA_ERROR_TOO_MANY_PEERS;
    else peers[npeers].from = cur, peers[npeers++].to = to;
    pthread_mutex_unlock(&ctx_lock);
    return r;
}

SIM_API CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    SIM_COUNT(cuCtxDisablePeerAccess);
    struct sim_ctx *cur;
    CUresult r = sim_ctx_current(&cur);
    if (r != CUDA_SUCCESS) return r;
    struct sim_ctx *to = sim_ctx_lookup(peerContext);
    if (!to) return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&ctx_lock);
    int i = peer_index(cur, to);
    if (i < 0) r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    else peers[i] = peers[--npeers];
    pthread_mutex_unlock(&ctx_lock);
    return r;
}

/* Frees what was allocated in ctx. */
static void release_ctx_memory(struct sim_ctx *ctx)
{
    pthread_mutex_lock(&ctx_lock);
    peers_ctx_end(ctx);
    pthread_mutex_unlock(&ctx_lock);
    struct sim_alloc **v = NULL;
    size_t n = sim_mem_collect_ctx(ctx, &v);
    for (size_t i = 0; i < n; i++) sim_free_record(v[i]);
    sim_graph_ctx_end(ctx);
    sim_pools_sync_trim();
    free(v);
}

/* ---- primary contexts ---- */
SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SIM_COUNT(cuDevicePrimaryCtxRetain);
    SIM_REQUIRE_INIT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    pthread_mutex_lock(&ctx_lock);
    struct sim_ctx *c = &primary[dev];
    if (c->retain == 0) {
        /* the context begins: its overhead is taken from the card */
        CUresult r = sim_state_ctx_begin(dev, sim_cfg.context_overhead);
        if (r != CUDA_SUCCESS) {
            pthread_mutex_unlock(&ctx_lock);
            return r;
        }
    }
    c->dev = dev;
    c->primary = 1;
    c->retain++;
    __atomic_store_n(&c->active, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctx_lock);
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev, int reset)
{
    SIM_REQUIRE_INIT();
    CHECK_DEV(dev);
    pthread_mutex_lock(&ctx_lock);
    struct sim_ctx *c = &primary[dev];
    if (!reset && c->retain == 0) {
        pthread_mutex_unlock(&ctx_lock);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    int was_active = c->retain > 0;
    int drop = reset || --c->retain == 0;
    if (drop && was_active) sim_state_ctx_end(dev, sim_cfg.context_overhead);
    if (drop) {
        c->retain = 0;
        __atomic_store_n(&c->active, 0, __ATOMIC_RELEASE);
        c->flags = 0;
    }
    pthread_mutex_unlock(&ctx_lock);
    if (drop) {
        sim_sync_all();
        release_ctx_memory(c);
        /* The rest of a teardown: the context is gone, the call not yet back. */
        if (sim_cfg.end_latency_us) sim_sleep_us(sim_cfg.end_latency_us);
    }
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    SIM_COUNT(cuDevicePrimaryCtxRelease_v2);
    return primary_release(dev, 0);
}
SIM_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    SIM_COUNT(cuDevicePrimaryCtxRelease);
    return primary_release(dev, 0);
}
SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    SIM_COUNT(cuDevicePrimaryCtxReset_v2);
    return primary_release(dev, 1);
}
SIM_API CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    SIM_COUNT(cuDevicePrimaryCtxReset);
    return primary_release(dev, 1);
}

SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    SIM_COUNT(cuDevicePrimaryCtxGetState);
    SIM_REQUIRE_INIT();
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    pthread_mutex_lock(&ctx_lock);
    *flags = primary[dev].flags;
    *active = primary[dev].active;
    pthread_mutex_unlock(&ctx_lock);
    return CUDA_SUCCESS;
}

static CUresult primary_set_flags(CUdevice dev, unsigned flags)
{
    SIM_REQUIRE_INIT();
    CHECK_DEV(dev);
    pthread_mutex_lock(&ctx_lock);
    primary[dev].flags = flags;
    pthread_mutex_unlock(&ctx_lock);
    return CUDA_SUCCESS;
}
SIM_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    SIM_COUNT(cuDevicePrimaryCtxSetFlags_v2);
    return primary_set_flags(dev, flags);
}
SIM_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    SIM_COUNT(cuDevicePrimaryCtxSetFlags);
    return primary_set_flags(dev, flags);
}

/* ---- regular contexts ---- */
static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    SIM_REQUIRE_INIT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    struct sim_ctx *c = calloc(1, sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = sim_state_ctx_begin(dev, sim_cfg.context_overhead);
    if (r != CUDA_SUCCESS) {
        free(c);
        return r;
    }
    c->dev = dev;
    c->flags = flags;
    c->active = 1;
    pthread_mutex_lock(&ctx_lock);
    if (nregular == capregular) {
        size_t nc = capregular ? capregular * 2 : 16;
        struct sim_ctx **nv = realloc(regular, nc * sizeof *nv);
        if (!nv) {
            pthread_mutex_unlock(&ctx_lock);
            sim_state_ctx_end(dev, sim_cfg.context_overhead);
            free(c);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        regular = nv;
        capregular = nc;
    }
    regular[nregular++] = c;
    pthread_mutex_unlock(&ctx_lock);
    /* A new context becomes current on the calling thread (pushed). */
    check_gen();
    if (depth == STACK_MAX) return CUDA_ERROR_INVALID_VALUE;
    stack[depth++] = c;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    SIM_COUNT(cuCtxCreate);
    return ctx_create(pctx, flags, dev);
}
SIM_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    SIM_COUNT(cuCtxCreate_v2);
    return ctx_create(pctx, flags, dev);
}
SIM_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n,
                                unsigned int flags, CUdevice dev)
{
    SIM_COUNT(cuCtxCreate_v3);
    (void)params;
    if (n < 0) return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, flags, dev);
}
SIM_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                                CUdevice dev)
{
    SIM_COUNT(cuCtxCreate_v4);
    (void)params;
    return ctx_create(pctx, flags, dev);
}

static CUresult ctx_destroy(CUcontext ctx)
{
    SIM_REQUIRE_INIT();
    struct sim_ctx *c = sim_ctx_lookup(ctx);
    if (!c || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
    sim_sync_all();
    /* one thread ends it: a second destroy of the same handle is refused */
    if (!__atomic_exchange_n(&c->active, 0, __ATOMIC_ACQ_REL)) return CUDA_ERROR_INVALID_CONTEXT;
    check_gen();
    /* Drop it from this thread's stack; other threads see it inactive. */
    int j = 0;
    for (int i = 0; i < depth; i++)
        if (stack[i] != c) stack[j++] = stack[i];
    depth = j;
    release_ctx_memory(c);
    sim_state_ctx_end(c->dev, sim_cfg.context_overhead);
    if (sim_cfg.end_latency_us) sim_sleep_us(sim_cfg.end_latency_us);
    return CUDA_SUCCESS;
}
SIM_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    SIM_COUNT(cuCtxDestroy_v2);
    return ctx_destroy(ctx);
}
SIM_API CUresult cuCtxDestroy(CUcontext ctx)
{
    SIM_COUNT(cuCtxDestroy);
    return ctx_destroy(ctx);
}

SIM_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    SIM_COUNT(cuCtxGetCurrent);
    SIM_REQUIRE_INIT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    check_gen();
    *pctx = depth ? (CUcontext)stack[depth - 1] : NULL;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    SIM_COUNT(cuCtxSetCurrent);
    SIM_REQUIRE_INIT();
    check_gen();
    if (!ctx) {
        if (depth) depth--;
        return CUDA_SUCCESS;
    }
    struct sim_ctx *c = sim_ctx_lookup(ctx);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == 0) depth = 1;
    stack[depth - 1] = c;
    return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext ctx)
{
    SIM_REQUIRE_INIT();
    check_gen();
    struct sim_ctx *c = sim_ctx_lookup(ctx);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == STACK_MAX) return CUDA_ERROR_INVALID_VALUE;
    stack[depth++] = c;
    return CUDA_SUCCESS;
}
SIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    SIM_COUNT(cuCtxPushCurrent_v2);
    return ctx_push(ctx);
}
SIM_API CUresult cuCtxPushCurrent(CUcontext ctx)
{
    SIM_COUNT(cuCtxPushCurrent);
    return ctx_push(ctx);
}

static CUresult ctx_pop(CUcontext *pctx)
{
    SIM_REQUIRE_INIT();
    check_gen();
    if (depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    struct sim_ctx *c = stack[--depth];
    if (pctx) *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}
SIM_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    SIM_COUNT(cuCtxPopCurrent_v2);
    return ctx_pop(pctx);
}
SIM_API CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    SIM_COUNT(cuCtxPopCurrent);
    return ctx_pop(pctx);
}

SIM_API CUresult cuCtxGetDevice(CUdevice *dev)
{
    SIM_COUNT(cuCtxGetDevice);
    if (!dev) return sim_initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    struct sim_ctx *c;
    CUresult r = sim_ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    *dev = c->dev;
    return CUDA_SUCCESS;
}

/* CUDA 13: the device of ctx (NULL: the current context).
 * cuCtxGetDevice_v2 and cuCtxSynchronize_v2 are new functions under the
 * old names' _v2: a client written for CUDA 12 that binds "name_v2 if
 * exported, else name" (Numba <= 0.60 does) calls them without the context
 * argument. With VRAMSIM_DRIVER_VERSION < 13000 the sim is a driver that
 * had no such function, so the argument is not read (the legacy meaning). */
SIM_API CUresult cuCtxGetDevice_v2(CUdevice *dev, CUcontext ctx)
{
    SIM_COUNT(cuCtxGetDevice_v2);
    if (sim_driver_version() < 13000) ctx = NULL;
    if (!dev) return sim_initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    SIM_REQUIRE_INIT();
    struct sim_ctx *c = ctx ? sim_ctx_lookup(ctx) : NULL;
    if (ctx && !c) return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx) {
        CUresult r = sim_ctx_current(&c);
        if (r != CUDA_SUCCESS) return r;
    }
    *dev = c->dev;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetFlags(unsigned int *flags)
{
    SIM_COUNT(cuCtxGetFlags);
    if (!flags) return sim_initialized() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    struct sim_ctx *c;
    CUresult r = sim_ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    *flags = c->flags;
    return CUDA_SUCCESS;
}

/* CUDA 12.1: the current context's flags, replaced (cuDevicePrimaryCtxSetFlags' values). */
SIM_API CUresult cuCtxSetFlags(unsigned int flags)
{
    SIM_COUNT(cuCtxSetFlags);
    struct sim_ctx *c;
    CUresult r = sim_ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (flags & ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_COREDUMP_ENABLE |
                            CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS))
        return CUDA_ERROR_INVALID_VALUE;
    c->flags = flags;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    SIM_COUNT(cuCtxGetApiVersion);
    SIM_REQUIRE_INIT();
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    struct sim_ctx *c;
    if (ctx) {
        if (!sim_ctx_lookup(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    } else if (sim_ctx_current(&c) != CUDA_SUCCESS) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *version = 13000;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSynchronize(void)
{
    SIM_COUNT(cuCtxSynchronize);
    struct sim_ctx *c;
    CUresult r = sim_ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    r = sim_capture_forbids_sync();
    if (r != CUDA_SUCCESS) return r;
    sim_sync_all();
    sim_pools_sync_trim();
    return CUDA_SUCCESS;
}

/* CUDA 13: waits for ctx (NULL: the current context). The sim's streams
 * are per process, so this waits for all of them, as cuCtxSynchronize. */
SIM_API CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    SIM_COUNT(cuCtxSynchronize_v2);
    if (sim_driver_version() < 13000) ctx = NULL;   /* see cuCtxGetDevice_v2 */
    SIM_REQUIRE_INIT();
    struct sim_ctx *c;
    if (ctx && !sim_ctx_lookup(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx) {
        CUresult r = sim_ctx_current(&c);
        if (r != CUDA_SUCCESS) return r;
    }
    CUresult cap = sim_capture_forbids_sync();
    if (cap != CUDA_SUCCESS) return cap;
    sim_sync_all();
    sim_pools_sync_trim();
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    SIM_COUNT(cuCtxGetStreamPriorityRange);
    struct sim_ctx *c;
    CUresult r = sim_ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetLimit(size_t *value, CUlimit limit)
{
    SIM_COUNT(cuCtxGetLimit);
    struct sim_ctx *c;
    CUresult r = sim_ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    switch (limit) {
    case CU_LIMIT_STACK_SIZE: *value = 1024; break;
    case CU_LIMIT_PRINTF_FIFO_SIZE: *value = 1 << 20; break;
    case CU_LIMIT_MALLOC_HEAP_SIZE: *value = 8 << 20; break;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: *value = 2048; break;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY: *value = 64; break;
    case CU_LIMIT_PERSISTING_L2_CACHE_SIZE: *value = 0; break;
    default: return CUDA_ERROR_UNSUPPORTED_LIMIT;
    }
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    SIM_COUNT(cuCtxSetLimit);
    (void)value;
    struct sim_ctx *c;
    CUresult r = sim_ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    return (int)limit >= 0 && limit < CU_LIMIT_MAX ? CUDA_SUCCESS : CUDA_ERROR_UNSUPPORTED_LIMIT;
}

void sim_ctx_after_fork_child(void)
{
    pthread_mutex_init(&ctx_lock, NULL);
    memset(primary, 0, sizeof primary);
    for (size_t i = 0; i < nregular; i++) regular[i]->active = 0;
    atomic_fetch_add(&generation, 1);
}

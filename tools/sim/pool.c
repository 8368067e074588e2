/* Stream-ordered allocation: memory pools.
 *
 * A pool block is a device record (SIM_K_POOL) charged to the card like a
 * cuMemAlloc block. cuMemFreeAsync queues the free on the stream; when it
 * runs, the block goes back to its pool's cache, still mapped and still
 * charged (the pool keeps it reserved), and a later allocation from the
 * pool may be given the very same address: work still queued on another
 * stream then really does touch reused memory. Cached memory above the
 * pool's release threshold is returned to the card at synchronisation
 * points and by cuMemPoolTrimTo, and before an allocation would fail.
 * A host-located pool (CUDA 12.2+) works the same with host memory: its
 * blocks are charged to no card. */
#include "sim_internal.h"
#include <stdlib.h>
#include <string.h>

#define POOL_MAGIC 0x504f4f4cu

struct sim_pool {
    uint32_t magic;
    int dev;
    int is_default;
    int destroyed;
    uint64_t id;                    /* names it in its exported handle */
    CUmemAllocationHandleType handle_types;   /* cuMemPoolCreate's: POSIX_FD makes it exportable */
    int imported;                   /* cuMemPoolImportFromShareableHandle: another process's pool */
    int host;                       /* a host location (CUDA 12.2+): host memory, on no card's charge */
    int32_t exp_pid;                /* imported: the exporter and its pool's id */
    uint64_t exp_id;
    uint64_t release_threshold;
    int reuse[3];                   /* the three REUSE_* attributes */
    uint64_t reserved_cur, reserved_high, used_cur, used_high;
    /* cuMemPoolSetAccess: other devices' access (the owner's is always
     * read-write); recorded and answered, not enforced on copies. */
    CUmemAccess_flags peer[SIM_MAX_CARDS];
    struct sim_alloc **cache;       /* freed blocks kept for reuse */
    size_t ncache, capcache;
    struct sim_pool *next;
};

/* Guards every pool; taken after sim_mem_lock when both are needed. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_pool *pools;
static struct sim_pool default_pools[SIM_MAX_CARDS];
static struct sim_pool *current_pool[SIM_MAX_CARDS];

static struct sim_pool *default_pool(int dev)
{
    struct sim_pool *p = &default_pools[dev];
    if (p->magic != POOL_MAGIC) {
        memset(p, 0, sizeof *p);
        p->magic = POOL_MAGIC;
        p->dev = dev;
        p->is_default = 1;
        p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    }
    return p;
}

/* The pool cuMemAllocAsync takes from on dev: the one cuDeviceSetMemPool
 * chose (always live: cuMemPoolDestroy clears the choice), else the
 * default pool. pool_lock held. */
static struct sim_pool *mem_pool_of(int dev)
{
    return current_pool[dev] ? current_pool[dev] : default_pool(dev);
}

/* pool_lock held */
static struct sim_pool *pool_get(CUmemoryPool h)
{
    struct sim_pool *x = (struct sim_pool *)h;
    for (int i = 0; i < sim_cfg.ncards; i++)
        if (x == &default_pools[i] && x->magic == POOL_MAGIC) return x;
    for (struct sim_pool *p = pools; p; p = p->next)
        if (p == x && !p->destroyed) return p;
    return NULL;
}

/* Takes cached blocks out of p until reserved <= keep, into v; with v NULL
 * only says how many it may take (all it caches, or none when p is within
 * keep). pool_lock held. */
static size_t take_excess(struct sim_pool *p, uint64_t keep, struct sim_alloc **v)
{
    if (!v) return p->reserved_cur > keep ? p->ncache : 0;
    size_t n = 0;
    while (p->ncache && p->reserved_cur > keep) {
        struct sim_alloc *a = p->cache[--p->ncache];
        p->reserved_cur -= a->charged;
        v[n++] = a;
    }
    return n;
}

/* Releases cached blocks until reserved <= keep; pool_lock held. The
 * blocks are returned in *out (the caller frees them without the lock);
 * *out is NULL when there is nothing to release. */
static size_t trim_locked(struct sim_pool *p, uint64_t keep, struct sim_alloc ***out)
{
    size_t max = take_excess(p, keep, NULL);
    struct sim_alloc **v = max ? malloc(max * sizeof *v) : NULL;
    *out = v;
    return v ? take_excess(p, keep, v) : 0;
}

/* Gives a block no pool keeps back to the card. */
static void release_block(struct sim_alloc *a)
{
    if (!a->host) sim_uncharge(a->card, a->charged);
    sim_backing_destroy(a->obj, (void *)a->base, a->map_len);
    free(a);
}

static void release_blocks(struct sim_alloc **v, size_t n)
{
    for (size_t i = 0; i < n; i++) release_block(v[i]);
    free(v);
}

static void trim_pool(struct sim_pool *p, uint64_t keep)
{
    pthread_mutex_lock(&pool_lock);
    struct sim_alloc **v;
    size_t n = trim_locked(p, keep, &v);
    pthread_mutex_unlock(&pool_lock);
    release_blocks(v, n);
}

/* take_excess over every pool, each down to its release threshold (a
 * destroyed one down to 0); pool_lock held. */
static size_t take_sync_excess(struct sim_alloc **v)
{
    size_t n = 0;
    for (int i = 0; i < sim_cfg.ncards; i++) {
        struct sim_pool *p = &default_pools[i];
        if (p->magic == POOL_MAGIC) n += take_excess(p, p->release_threshold, v ? v + n : NULL);
    }
    for (struct sim_pool *p = pools; p; p = p->next)
        n += take_excess(p, p->destroyed ? 0 : p->release_threshold, v ? v + n : NULL);
    return n;
}

/* Runs at every synchronisation: nothing is allocated when no pool holds
 * cached memory above its threshold. */
void sim_pools_sync_trim(void)
{
    pthread_mutex_lock(&pool_lock);
    size_t max = take_sync_excess(NULL);
    struct sim_alloc **v = max ? malloc(max * sizeof *v) : NULL;
    size_t n = v ? take_sync_excess(v) : 0;
    pthread_mutex_unlock(&pool_lock);
    release_blocks(v, n);
}

/* A block freed (now or in stream order) goes back to its pool; it was
 * already taken out of the table. */
void sim_pool_free_now(struct sim_alloc *a)
{
    struct sim_pool *p = a->pool;
    if (!a->host) sim_live_add(a->card, -(int64_t)a->size, -1);
    pthread_mutex_lock(&pool_lock);
    p->used_cur -= a->charged;
    int cached = 0;
    if (!p->destroyed) {
        if (p->ncache == p->capcache) {
            size_t nc = p->capcache ? p->capcache * 2 : 16;
            struct sim_alloc **nv = realloc(p->cache, nc * sizeof *nv);
            if (nv) {
                p->cache = nv;
                p->capcache = nc;
            }
        }
        if (p->ncache < p->capcache) {
            a->free_pending = 0;
            p->cache[p->ncache++] = a;
            cached = 1;
        }
    }
    if (!cached) p->reserved_cur -= a->charged;
    pthread_mutex_unlock(&pool_lock);
    if (!cached) release_block(a);
}

static CUresult pool_alloc(CUdeviceptr *dptr, size_t size, struct sim_pool *p, CUstream s)
{
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    if (!sim_stream_get(s)) return CUDA_ERROR_INVALID_HANDLE;
    if (!p->host && ctx->dev != p->dev) return CUDA_ERROR_INVALID_VALUE;   /* no peer pools */
    if (p->imported) return CUDA_ERROR_INVALID_VALUE;          /* cuda.h: no new allocations from an imported pool */
    size_t charge = SIM_ROUND_UP(size, sim_cfg.alloc_granule);
    /* best fit among cached blocks of the pool (same charge class or larger) */
    pthread_mutex_lock(&pool_lock);
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < p->ncache; i++) {
        struct sim_alloc *c = p->cache[i];
        if (c->map_len >= size && c->charged >= charge && c->charged <= 2 * charge &&
            (best == SIZE_MAX || c->charged < p->cache[best]->charged))
            best = i;
    }
    struct sim_alloc *a = NULL;
    if (best != SIZE_MAX) {
        a = p->cache[best];
        p->cache[best] = p->cache[--p->ncache];
        p->used_cur += a->charged;
        if (p->used_cur > p->used_high) p->used_high = p->used_cur;
    }
    pthread_mutex_unlock(&pool_lock);
    if (a) {
        a->size = size;
        a->ctx = ctx;
        pthread_mutex_lock(&sim_mem_lock);
        sim_mem_insert(a);
        pthread_mutex_unlock(&sim_mem_lock);
        if (!a->host) sim_live_add(a->card, (int64_t)size, 1);
        *dptr = a->base;
        return CUDA_SUCCESS;
    }
    r = sim_alloc_record(SIM_K_POOL, size, charge, p->host, &a);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && !p->host) {
        /* the driver gives cached memory back before failing */
        sim_pools_sync_trim();
        trim_pool(p, 0);
        r = sim_alloc_record(SIM_K_POOL, size, charge, 0, &a);
    }
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&sim_mem_lock);
    a->pool = p;
    pthread_mutex_unlock(&sim_mem_lock);
    pthread_mutex_lock(&pool_lock);
    p->reserved_cur += a->charged;
    p->used_cur += a->charged;
    if (p->reserved_cur > p->reserved_high) p->reserved_high = p->reserved_cur;
    if (p->used_cur > p->used_high) p->used_high = p->used_cur;
    pthread_mutex_unlock(&pool_lock);
    *dptr = a->base;
    return CUDA_SUCCESS;
}

/* A stream-ordered allocation on a capturing stream is an allocation node
 * of the capture's graph (stream.c, "graph capture"): 1 with *r its
 * result, 0 when s is not capturing. */
static int captured_alloc(CUdeviceptr *dptr, size_t size, int dev, CUstream s, CUresult *r)
{
    struct sim_stream *st = sim_stream_get(s);
    CUgraph g = NULL;
    CUstreamCaptureStatus c = st ? sim_stream_capture(st, &g) : CU_STREAM_CAPTURE_STATUS_NONE;
    if (c == CU_STREAM_CAPTURE_STATUS_NONE) return 0;
    if (c == CU_STREAM_CAPTURE_STATUS_INVALIDATED) *r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (!dptr || size == 0) *r = CUDA_ERROR_INVALID_VALUE;
    else *r = sim_graph_capture_alloc(g, dev, size, dptr);
    return 1;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream s)
{
    SIM_REQUIRE_INIT();
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (captured_alloc(dptr, size, ctx->dev, s, &r)) return r;
    pthread_mutex_lock(&pool_lock);
    struct sim_pool *p = mem_pool_of(ctx->dev);
    pthread_mutex_unlock(&pool_lock);
    return pool_alloc(dptr, size, p, s);
}

SIM_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_COUNT(cuMemAllocAsync);
    return alloc_async(dptr, bytesize, hStream);
}
SIM_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_COUNT(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, bytesize, hStream);
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool h, CUstream s)
{
    SIM_REQUIRE_INIT();
    pthread_mutex_lock(&pool_lock);
    struct sim_pool *p = pool_get(h);
    pthread_mutex_unlock(&pool_lock);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUresult r;
    if (!p->host && captured_alloc(dptr, size, p->dev, s, &r)) return r;
    return pool_alloc(dptr, size, p, s);
}
SIM_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream)
{
    SIM_COUNT(cuMemAllocFromPoolAsync);
    return alloc_from_pool(dptr, bytesize, pool, hStream);
}
SIM_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream)
{
    SIM_COUNT(cuMemAllocFromPoolAsync_ptsz);
    return alloc_from_pool(dptr, bytesize, pool, hStream);
}

struct free_op { struct sim_alloc *a; };
static void run_free(void *arg)
{
    struct free_op *o = arg;
    pthread_mutex_lock(&sim_mem_lock);
    sim_mem_remove(o->a);
    pthread_mutex_unlock(&sim_mem_lock);
    sim_free_record(o->a);
}

static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
    SIM_REQUIRE_INIT();
    struct sim_stream *st = sim_stream_get(s);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    CUgraph g = NULL;
    CUstreamCaptureStatus c = sim_stream_capture(st, &g);
    if (c == CU_STREAM_CAPTURE_STATUS_INVALIDATED) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (c == CU_STREAM_CAPTURE_STATUS_ACTIVE)   /* only the capture's own allocations are modelled */
        return sim_graph_capture_free(g, dptr) == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find_base((uintptr_t)dptr);
    /* Plain cuMemAlloc memory may be freed in stream order too, and a
     * graph's allocation (at once: the sim's launches ran at once too). */
    if (!a || a->free_pending || !sim_alloc_freeable(a)) {
        pthread_mutex_unlock(&sim_mem_lock);
        return !a && sim_graph_free(dptr) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    a->free_pending = 1;
    pthread_mutex_unlock(&sim_mem_lock);
    struct free_op o = {a};
    CUresult r = sim_stream_enqueue(st, run_free, &o, sizeof o);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_lock(&sim_mem_lock);
        a->free_pending = 0;
        pthread_mutex_unlock(&sim_mem_lock);
    }
    return r;
}
SIM_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    SIM_COUNT(cuMemFreeAsync);
    return free_async(dptr, hStream);
}
SIM_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    SIM_COUNT(cuMemFreeAsync_ptsz);
    return free_async(dptr, hStream);
}

/* ---- pool objects ---- */
SIM_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    SIM_COUNT(cuDeviceGetDefaultMemPool);
    SIM_REQUIRE_INIT();
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    pthread_mutex_lock(&pool_lock);
    *pool = (CUmemoryPool)default_pool(dev);
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    SIM_COUNT(cuDeviceGetMemPool);
    SIM_REQUIRE_INIT();
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    pthread_mutex_lock(&pool_lock);
    *pool = (CUmemoryPool)mem_pool_of(dev);
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    SIM_COUNT(cuDeviceSetMemPool);
    SIM_REQUIRE_INIT();
    CHECK_DEV(dev);
    pthread_mutex_lock(&pool_lock);
    default_pool(dev);
    struct sim_pool *p = pool_get(pool);
    CUresult r = p && p->dev == dev && !p->imported && !p->host ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) current_pool[dev] = p;
    pthread_mutex_unlock(&pool_lock);
    return r;
}

SIM_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    SIM_COUNT(cuMemPoolCreate);
    SIM_REQUIRE_INIT();
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE &&
         props->handleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    /* Host locations, as a driver from CUDA 12.2 takes them: HOST_NUMA with
     * a host NUMA node (the sim's host has none, so only 0), HOST (id
     * ignored, no shareable handles); HOST_NUMA_CURRENT is not a pool's
     * location. Their blocks are host memory, charged to no card. */
    int host = props->location.type == CU_MEM_LOCATION_TYPE_HOST ||
               props->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
    if (host) {
        if (sim_driver_version() < 12020 ||
            (props->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && props->location.id != 0) ||
            (props->location.type == CU_MEM_LOCATION_TYPE_HOST && props->handleTypes != CU_MEM_HANDLE_TYPE_NONE))
            return CUDA_ERROR_INVALID_VALUE;
    } else {
        if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        CHECK_DEV(props->location.id);
    }
    struct sim_pool *p = calloc(1, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    p->magic = POOL_MAGIC;
    p->dev = host ? 0 : props->location.id;
    p->host = host;
    p->id = sim_next_id();
    p->handle_types = props->handleTypes;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    pthread_mutex_lock(&pool_lock);
    p->next = pools;
    pools = p;
    pthread_mutex_unlock(&pool_lock);
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

/* Like the driver: returns at once; blocks still allocated from the pool
 * are released to the card when they are freed. */
SIM_API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    SIM_COUNT(cuMemPoolDestroy);
    SIM_REQUIRE_INIT();
    pthread_mutex_lock(&pool_lock);
    struct sim_pool *p = pool_get(pool);
    if (!p || p->is_default) {
        pthread_mutex_unlock(&pool_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    p->destroyed = 1;
    for (int i = 0; i < SIM_MAX_CARDS; i++)
        if (current_pool[i] == p) current_pool[i] = NULL;
    struct sim_alloc **v;
    size_t n = trim_locked(p, 0, &v);
    pthread_mutex_unlock(&pool_lock);
    release_blocks(v, n);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    SIM_COUNT(cuMemPoolTrimTo);
    SIM_REQUIRE_INIT();
    pthread_mutex_lock(&pool_lock);
    struct sim_pool *p = pool_get(pool);
    pthread_mutex_unlock(&pool_lock);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    trim_pool(p, minBytesToKeep);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_COUNT(cuMemPoolSetAttribute);
    SIM_REQUIRE_INIT();
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    struct sim_pool *p = pool_get(pool);
    CUresult r = p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (p) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value;
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            p->release_threshold = *(cuuint64_t *)value;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0) r = CUDA_ERROR_INVALID_VALUE;
            else p->reserved_high = p->reserved_cur;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0) r = CUDA_ERROR_INVALID_VALUE;
            else p->used_high = p->used_cur;
            break;
        default:
            r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return r;
}

SIM_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_COUNT(cuMemPoolGetAttribute);
    SIM_REQUIRE_INIT();
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    struct sim_pool *p = pool_get(pool);
    CUresult r = p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (p) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            *(int *)value = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->release_threshold; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved_cur; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used_cur; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
        default: r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return r;
}

static CUresult access_location(const CUmemLocation *loc)
{
    if (!loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(loc->id);
    return CUDA_SUCCESS;
}

/* The owner keeps read-write: a descriptor that would take it away is
 * refused, as the driver refuses it. */
SIM_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    SIM_COUNT(cuMemPoolSetAccess);
    SIM_REQUIRE_INIT();
    if (count && !map) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        CUresult r = access_location(&map[i].location);
        if (r != CUDA_SUCCESS) return r;
        if (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&pool_lock);
    struct sim_pool *p = pool_get(pool);
    CUresult r = p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; p && r == CUDA_SUCCESS && i < count; i++)
        if (map[i].location.id == p->dev && map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            r = CUDA_ERROR_INVALID_DEVICE;
    for (size_t i = 0; p && r == CUDA_SUCCESS && i < count; i++)
        if (map[i].location.id != p->dev) p->peer[map[i].location.id] = map[i].flags;
    pthread_mutex_unlock(&pool_lock);
    return r;
}

SIM_API CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
    SIM_COUNT(cuMemPoolGetAccess);
    SIM_REQUIRE_INIT();
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = access_location(location);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&pool_lock);
    struct sim_pool *p = pool_get(memPool);
    if (p) *flags = location->id == p->dev ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : p->peer[location->id];
    pthread_mutex_unlock(&pool_lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- exportable (IPC) pools, POSIX file descriptors ----
 * The pool's shareable handle is a descriptor naming (exporter pid, pool
 * id, card); an importer gets a pool of its own that only imports. A
 * pointer's export data names the block's memory object, as a legacy IPC
 * handle does (ipc.c), plus the pool it came from; the importer maps the
 * same pages after checking that the object still is that buffer. The
 * memory stays the exporter's: charged there, never to an importer. */
#define POOL_PTR_MAGIC 0x76735050u   /* "PPsv" */
struct pool_ptr_wire {
    uint32_t magic;
    int32_t pid;
    int32_t fd;
    int32_t card;
    uint64_t id;
    uint64_t size;
    uint64_t map_len;
    uint64_t pool_id;
};
_Static_assert(sizeof(struct pool_ptr_wire) <= sizeof(CUmemPoolPtrExportData), "export data is 64 bytes");

SIM_API CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                  CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_COUNT(cuMemPoolExportToShareableHandle);
    SIM_REQUIRE_INIT();
    if (!sim_os_posix_fd_handles()) return CUDA_ERROR_NOT_SUPPORTED;
    if (!handle_out || flags || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    struct sim_pool *p = pool_get(pool);
    int ok = p && !p->imported && !p->is_default && (p->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    uint64_t id = ok ? p->id : 0;
    int dev = ok ? p->dev : 0;
    pthread_mutex_unlock(&pool_lock);
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    int fd = sim_os_pool_fd_create(sim_os_pid(), id, dev);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)handle_out = fd;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                    CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_COUNT(cuMemPoolImportFromShareableHandle);
    SIM_REQUIRE_INIT();
    if (!sim_os_posix_fd_handles()) return CUDA_ERROR_NOT_SUPPORTED;
    if (!pool_out || flags || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_INVALID_VALUE;
    int32_t pid;
    uint64_t id;
    int card;
    if (sim_os_pool_fd_read((int)(intptr_t)handle, &pid, &id, &card) != 0 || card < 0 || card >= sim_cfg.ncards)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_pool *p = calloc(1, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    p->magic = POOL_MAGIC;
    p->dev = card;
    p->id = sim_next_id();
    p->handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p->imported = 1;
    p->exp_pid = pid;
    p->exp_id = id;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    pthread_mutex_lock(&pool_lock);
    p->next = pools;
    pools = p;
    pthread_mutex_unlock(&pool_lock);
    *pool_out = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
    SIM_COUNT(cuMemPoolExportPointer);
    SIM_REQUIRE_INIT();
    if (!sim_os_posix_fd_handles()) return CUDA_ERROR_NOT_SUPPORTED;
    if (!shareData_out) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find_base((uintptr_t)ptr);
    if (a && a->kind == SIM_K_POOL && !a->free_pending && a->pool) {
        pthread_mutex_lock(&pool_lock);
        struct sim_pool *p = a->pool;
        if (!p->imported && (p->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
            struct pool_ptr_wire w = {POOL_PTR_MAGIC, sim_os_pid(), (int32_t)a->obj, a->card, a->id, a->size,
                                      a->map_len, p->id};
            memset(shareData_out, 0, sizeof *shareData_out);
            memcpy(shareData_out->reserved, &w, sizeof w);
            r = CUDA_SUCCESS;
        }
        pthread_mutex_unlock(&pool_lock);
    }
    pthread_mutex_unlock(&sim_mem_lock);
    return r;
}

SIM_API CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData *shareData)
{
    SIM_COUNT(cuMemPoolImportPointer);
    SIM_REQUIRE_INIT();
    if (!sim_os_posix_fd_handles()) return CUDA_ERROR_NOT_SUPPORTED;
    if (!ptr_out || !shareData) return CUDA_ERROR_INVALID_VALUE;
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    struct pool_ptr_wire w;
    memcpy(&w, shareData->reserved, sizeof w);
    pthread_mutex_lock(&pool_lock);
    struct sim_pool *p = pool_get(pool);
    int ok = p && p->imported && p->exp_pid == w.pid && p->exp_id == w.pool_id;
    pthread_mutex_unlock(&pool_lock);
    if (!ok || w.magic != POOL_PTR_MAGIC || w.fd < 0 || w.map_len == 0 || w.size > w.map_len)
        return CUDA_ERROR_INVALID_VALUE;
    /* each import is its own mapping, freed once (cuMemFree / cuMemFreeAsync) */
    void *m = NULL;
    int mr = sim_os_ipc_map(w.pid, w.fd, w.id, w.map_len, &m);
    if (mr != 0) return mr == -2 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
    CUresult rr = sim_ipc_record(m, w.map_len, w.size, w.card, w.pid, w.id, ctx, 1, ptr_out);
    if (rr != CUDA_SUCCESS) return rr;
    return CUDA_SUCCESS;
}

void sim_pool_after_fork_child(void)
{
    pthread_mutex_init(&pool_lock, NULL);
    pools = NULL;
    memset(default_pools, 0, sizeof default_pools);
    memset(current_pool, 0, sizeof current_pool);
}

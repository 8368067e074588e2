/* Streams run their work later, in order, on one worker thread each, after
 * VRAMSIM_ASYNC_DELAY_US per operation, so a block reused before the work
 * touching it has run shows up as corrupted bytes. The process's default
 * stream (handles 0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) is one such
 * stream. Events (event.c) are stream operations too. */
#include "sim_internal.h"
#include <stdlib.h>
#include <string.h>

struct sim_op {
    struct sim_op *next;
    sim_op_fn fn;
    _Alignas(16) unsigned char arg[64];
};

struct sim_stream {
    struct sim_ctx *ctx;
    unsigned flags;
    int priority;
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* work queued / work done */
    struct sim_op *head, *tail;
    uint64_t enq, done;
    int stop;                /* destroyed: drain, then the worker exits */
    int dead;                /* destroyed (guarded by reg_lock); stays listed */
    struct sim_stream *next_live;
    /* graph capture (guarded by reg_lock): CU_STREAM_CAPTURE_STATUS_*, and
     * the graph the capture builds */
    CUstreamCaptureStatus capture;
    CUgraph capture_graph;
    CUstreamCaptureMode capture_mode;
    pthread_t capture_thread;   /* who began it: global and thread-local captures end there */
};


/* Guards the stream list and the default stream. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_stream *streams;
static struct sim_stream *default_stream;

static CUresult capturing_self(struct sim_stream *st);

static void *worker(void *p)
{
    struct sim_stream *st = p;
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (!st->head && !st->stop) pthread_cond_wait(&st->cv, &st->mu);
        if (!st->head) break;   /* stopped and drained */
        struct sim_op *op = st->head;
        pthread_mutex_unlock(&st->mu);
        if (sim_cfg.async_delay_us) sim_sleep_us(sim_cfg.async_delay_us);
        op->fn(op->arg);
        pthread_mutex_lock(&st->mu);
        st->head = op->next;
        if (!st->head) st->tail = NULL;
        st->done++;
        pthread_cond_broadcast(&st->cv);
        free(op);
    }
    /* The stream object itself is kept (a destroyed stream is a few hundred
     * bytes): a synchroniser may still hold a pointer to it. */
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

static struct sim_stream *stream_new(struct sim_ctx *ctx, unsigned flags, int prio)
{
    struct sim_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->ctx = ctx;
    st->flags = flags;
    st->priority = prio;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &at, worker, st);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        pthread_mutex_destroy(&st->mu);
        pthread_cond_destroy(&st->cv);
        free(st);
        return NULL;
    }
    return st;
}

struct sim_stream *sim_stream_get(CUstream s)
{
    uintptr_t h = (uintptr_t)s;
    struct sim_stream *found = NULL;
    pthread_mutex_lock(&reg_lock);
    if (h == 0 || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
        if (!default_stream) default_stream = stream_new(NULL, 0, 0);
        found = default_stream;
    } else {
        for (struct sim_stream *x = streams; x; x = x->next_live)
            if (x == (struct sim_stream *)s && !x->dead) found = x;
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

CUresult sim_stream_enqueue(struct sim_stream *st, sim_op_fn fn, const void *arg, size_t argsz)
{
    struct sim_op *op = calloc(1, sizeof *op);
    if (!op || argsz > sizeof op->arg) {
        free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->fn = fn;
    memcpy(op->arg, arg, argsz);
    pthread_mutex_lock(&st->mu);
    if (st->tail) st->tail->next = op;
    else st->head = op;
    st->tail = op;
    st->enq++;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return CUDA_SUCCESS;
}

/* Waits until st has run its first target operations. */
static void wait_done(struct sim_stream *st, uint64_t target)
{
    pthread_mutex_lock(&st->mu);
    while (st->done < target) pthread_cond_wait(&st->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
}

/* Waits for the work queued on st so far. */
static void stream_drain(struct sim_stream *st)
{
    pthread_mutex_lock(&st->mu);
    uint64_t target = st->enq;
    pthread_mutex_unlock(&st->mu);
    wait_done(st, target);
}

/* Waits for the work queued so far on every stream, or (legacy) only on
 * the default stream and the streams created without CU_STREAM_NON_BLOCKING,
 * which is what a synchronous call on the legacy default stream waits for.
 * Stream objects are never freed, so waiting on one after dropping
 * reg_lock is safe; waiting without it lets other threads use streams. */
static void sync_streams(int legacy_only)
{
    /* Snapshot every stream's queue length first, then wait for each: work
     * queued after this call started is not waited for (no livelock when
     * other threads keep queueing). */
    struct waiter { struct sim_stream *st; uint64_t target; } *w = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&reg_lock);
    struct sim_stream *list[2] = {default_stream, streams};
    for (int k = 0; k < 2; k++) {
        for (struct sim_stream *x = list[k]; x; x = k ? x->next_live : NULL) {
            if (legacy_only && (x->flags & CU_STREAM_NON_BLOCKING)) continue;
            pthread_mutex_lock(&x->mu);
            uint64_t enq = x->enq, done = x->done;
            pthread_mutex_unlock(&x->mu);
            if (done >= enq) continue;
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 8;
                struct waiter *nw = realloc(w, nc * sizeof *nw);
                if (!nw) break;
                w = nw;
                cap = nc;
            }
            w[n++] = (struct waiter){x, enq};
        }
    }
    pthread_mutex_unlock(&reg_lock);
    for (size_t i = 0; i < n; i++) wait_done(w[i].st, w[i].target);
    free(w);
}

void sim_default_stream_sync(void) { sync_streams(1); }
void sim_sync_all(void) { sync_streams(0); }


/* ---- streams ---- */
static CUresult stream_create(CUstream *ph, unsigned flags, int prio)
{
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    if (prio > 0) prio = 0;
    if (prio < -5) prio = -5;
    struct sim_stream *st = stream_new(ctx, flags, prio);
    if (!st) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&reg_lock);
    st->next_live = streams;
    streams = st;
    pthread_mutex_unlock(&reg_lock);
    *ph = (CUstream)st;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    SIM_COUNT(cuStreamCreate);
    return stream_create(phStream, Flags, 0);
}

SIM_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    SIM_COUNT(cuStreamCreateWithPriority);
    return stream_create(phStream, flags, priority);
}

static CUresult stream_destroy(CUstream h)
{
    SIM_REQUIRE_INIT();
    if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&reg_lock);
    struct sim_stream *st = streams;
    while (st && (st != (struct sim_stream *)h || st->dead)) st = st->next_live;
    if (st) st->dead = 1;
    pthread_mutex_unlock(&reg_lock);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    /* Like the driver, return at once; queued work still completes. */
    pthread_mutex_lock(&st->mu);
    st->stop = 1;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamDestroy_v2(CUstream hStream)
{
    SIM_COUNT(cuStreamDestroy_v2);
    return stream_destroy(hStream);
}
SIM_API CUresult cuStreamDestroy(CUstream hStream)
{
    SIM_COUNT(cuStreamDestroy);
    return stream_destroy(hStream);
}

static CUresult stream_sync(CUstream h)
{
    SIM_REQUIRE_INIT();
    GET_STREAM(st, h);
    CUresult c = capturing_self(st);
    if (c != CUDA_SUCCESS) return c;
    stream_drain(st);
    sim_pools_sync_trim();
    return CUDA_SUCCESS;
}
SIM_API CUresult cuStreamSynchronize(CUstream h)
{
    SIM_COUNT(cuStreamSynchronize);
    return stream_sync(h);
}
SIM_API CUresult cuStreamSynchronize_ptsz(CUstream h)
{
    SIM_COUNT(cuStreamSynchronize_ptsz);
    return stream_sync(h);
}

static CUresult stream_query(CUstream h)
{
    SIM_REQUIRE_INIT();
    GET_STREAM(st, h);
    CUresult c = capturing_self(st);
    if (c != CUDA_SUCCESS) return c;
    pthread_mutex_lock(&st->mu);
    int idle = st->done == st->enq;
    pthread_mutex_unlock(&st->mu);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
SIM_API CUresult cuStreamQuery(CUstream h)
{
    SIM_COUNT(cuStreamQuery);
    return stream_query(h);
}
SIM_API CUresult cuStreamQuery_ptsz(CUstream h)
{
    SIM_COUNT(cuStreamQuery_ptsz);
    return stream_query(h);
}

static CUresult stream_get(CUstream h, int *prio, unsigned *flags, CUcontext *ctx)
{
    SIM_REQUIRE_INIT();
    if (!prio && !flags && !ctx) return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(st, h);
    if (prio) *prio = st->priority;
    if (flags) *flags = st->flags;
    if (ctx) {
        struct sim_ctx *c = st->ctx;
        if (!c && sim_ctx_current(&c) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
        *ctx = (CUcontext)c;
    }
    return CUDA_SUCCESS;
}
SIM_API CUresult cuStreamGetPriority(CUstream h, int *p)
{
    SIM_COUNT(cuStreamGetPriority);
    return p ? stream_get(h, p, NULL, NULL) : CUDA_ERROR_INVALID_VALUE;
}
SIM_API CUresult cuStreamGetPriority_ptsz(CUstream h, int *p)
{
    SIM_COUNT(cuStreamGetPriority_ptsz);
    return p ? stream_get(h, p, NULL, NULL) : CUDA_ERROR_INVALID_VALUE;
}
SIM_API CUresult cuStreamGetFlags(CUstream h, unsigned int *f)
{
    SIM_COUNT(cuStreamGetFlags);
    return f ? stream_get(h, NULL, f, NULL) : CUDA_ERROR_INVALID_VALUE;
}
SIM_API CUresult cuStreamGetFlags_ptsz(CUstream h, unsigned int *f)
{
    SIM_COUNT(cuStreamGetFlags_ptsz);
    return f ? stream_get(h, NULL, f, NULL) : CUDA_ERROR_INVALID_VALUE;
}
SIM_API CUresult cuStreamGetCtx(CUstream h, CUcontext *c)
{
    SIM_COUNT(cuStreamGetCtx);
    return c ? stream_get(h, NULL, NULL, c) : CUDA_ERROR_INVALID_VALUE;
}
SIM_API CUresult cuStreamGetCtx_ptsz(CUstream h, CUcontext *c)
{
    SIM_COUNT(cuStreamGetCtx_ptsz);
    return c ? stream_get(h, NULL, NULL, c) : CUDA_ERROR_INVALID_VALUE;
}

/* CUDA 12.5: the stream's context and green context (the sim has none). */
SIM_API CUresult cuStreamGetCtx_v2(CUstream h, CUcontext *c, CUgreenCtx *g)
{
    SIM_COUNT(cuStreamGetCtx_v2);
    if (!c || !g) return CUDA_ERROR_INVALID_VALUE;
    *g = NULL;
    return stream_get(h, NULL, NULL, c);
}
SIM_API CUresult cuStreamGetCtx_v2_ptsz(CUstream h, CUcontext *c, CUgreenCtx *g)
{
    SIM_COUNT(cuStreamGetCtx_v2_ptsz);
    if (!c || !g) return CUDA_ERROR_INVALID_VALUE;
    *g = NULL;
    return stream_get(h, NULL, NULL, c);
}

/* ---- graph capture ----
 * What is modelled: a stream created by the program (not a default
 * stream) captures between cuStreamBeginCapture* and cuStreamEndCapture;
 * cuMemAllocAsync / cuMemAllocFromPoolAsync on it add allocation nodes to
 * its graph (fixed addresses, no memory until a launch, as graph.c's), and
 * cuMemFreeAsync of such an address adds its free node. A call that would
 * wait for a capturing stream fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture (the
 * program's cuStreamEndCapture then returns
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph): cuCtxSynchronize
 * and the implicit sync of cuMemFree while any stream captures, and
 * cuStreamSynchronize / cuStreamQuery of the capturing stream, in every
 * capture mode. A global or thread-local capture ends only on the thread
 * that began it (elsewhere CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, and it
 * goes on). Not modelled: the capture modes' other rules on
 * "potentially unsafe" calls, other work on a capturing stream (it runs
 * as if not captured), capture of the per-thread default stream, capture
 * into an existing graph (cuStreamBeginCaptureToGraph), and a captured
 * free of memory allocated outside the capture (CUDA_ERROR_NOT_SUPPORTED). */

CUstreamCaptureStatus sim_stream_capture(struct sim_stream *st, CUgraph *g)
{
    pthread_mutex_lock(&reg_lock);
    CUstreamCaptureStatus c = st->capture;
    if (g) *g = st->capture_graph;
    pthread_mutex_unlock(&reg_lock);
    return c;
}

CUresult sim_capture_forbids_sync(void)
{
    int any = 0;
    pthread_mutex_lock(&reg_lock);
    for (struct sim_stream *x = streams; x; x = x->next_live)
        if (!x->dead && x->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            x->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
            any = 1;
        }
    pthread_mutex_unlock(&reg_lock);
    return any ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* A sync or query of st itself while it captures: refused, the capture
 * invalidated. */
static CUresult capturing_self(struct sim_stream *st)
{
    pthread_mutex_lock(&reg_lock);
    CUresult r = CUDA_SUCCESS;
    if (st->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        st->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&reg_lock);
    return r;
}

static int is_default_handle(CUstream h)
{
    return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode)
{
    SIM_REQUIRE_INIT();
    GET_STREAM(st, h);
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (is_default_handle(h)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    CUgraph g;
    CUresult r = sim_graph_new(&g);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&reg_lock);
    if (st->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else {
        st->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        st->capture_graph = g;
        st->capture_mode = mode;
        st->capture_thread = pthread_self();
    }
    pthread_mutex_unlock(&reg_lock);
    if (r != CUDA_SUCCESS) sim_graph_drop(g);
    return r;
}

SIM_API CUresult cuStreamBeginCapture(CUstream h)
{
    SIM_COUNT(cuStreamBeginCapture);
    return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
SIM_API CUresult cuStreamBeginCapture_ptsz(CUstream h)
{
    SIM_COUNT(cuStreamBeginCapture_ptsz);
    return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
SIM_API CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode)
{
    SIM_COUNT(cuStreamBeginCapture_v2);
    return begin_capture(h, mode);
}
SIM_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode)
{
    SIM_COUNT(cuStreamBeginCapture_v2_ptsz);
    return begin_capture(h, mode);
}

static CUresult end_capture(CUstream h, CUgraph *out)
{
    SIM_REQUIRE_INIT();
    GET_STREAM(st, h);
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&reg_lock);
    CUstreamCaptureStatus c = st->capture;
    CUgraph g = st->capture_graph;
    if (c != CU_STREAM_CAPTURE_STATUS_NONE && st->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
        !pthread_equal(st->capture_thread, pthread_self())) {
        pthread_mutex_unlock(&reg_lock);   /* cuda.h: ended from the thread that began it; it goes on */
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    st->capture = CU_STREAM_CAPTURE_STATUS_NONE;
    st->capture_graph = NULL;
    pthread_mutex_unlock(&reg_lock);
    if (c == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
    if (c == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        sim_graph_drop(g);
        *out = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *out = g;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuStreamEndCapture(CUstream h, CUgraph *phGraph)
{
    SIM_COUNT(cuStreamEndCapture);
    return end_capture(h, phGraph);
}
SIM_API CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *phGraph)
{
    SIM_COUNT(cuStreamEndCapture_ptsz);
    return end_capture(h, phGraph);
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *st)
{
    SIM_REQUIRE_INIT();
    if (!st) return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(x, h);
    *st = sim_stream_capture(x, NULL);
    return CUDA_SUCCESS;
}
SIM_API CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st)
{
    SIM_COUNT(cuStreamIsCapturing);
    return is_capturing(h, st);
}
SIM_API CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *st)
{
    SIM_COUNT(cuStreamIsCapturing_ptsz);
    return is_capturing(h, st);
}

/* ---- host functions ---- */
struct host_fn_op { CUhostFn fn; void *user; };
static void run_host_fn(void *p)
{
    struct host_fn_op *o = p;
    o->fn(o->user);
}

static CUresult launch_host_fn(CUstream h, CUhostFn fn, void *user)
{
    SIM_REQUIRE_INIT();
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(st, h);
    struct host_fn_op o = {fn, user};
    return sim_stream_enqueue(st, run_host_fn, &o, sizeof o);
}
SIM_API CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *userData)
{
    SIM_COUNT(cuLaunchHostFunc);
    return launch_host_fn(h, fn, userData);
}
SIM_API CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void *userData)
{
    SIM_COUNT(cuLaunchHostFunc_ptsz);
    return launch_host_fn(h, fn, userData);
}

struct callback_op { CUstreamCallback fn; CUstream h; void *user; };
static void run_callback(void *p)
{
    struct callback_op *o = p;
    o->fn(o->h, CUDA_SUCCESS, o->user);
}
static CUresult add_callback(CUstream h, CUstreamCallback fn, void *user, unsigned flags)
{
    SIM_REQUIRE_INIT();
    if (!fn || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(st, h);
    struct callback_op o = {fn, h, user};
    return sim_stream_enqueue(st, run_callback, &o, sizeof o);
}
SIM_API CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void *user, unsigned int flags)
{
    SIM_COUNT(cuStreamAddCallback);
    return add_callback(h, cb, user, flags);
}
SIM_API CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback cb, void *user, unsigned int flags)
{
    SIM_COUNT(cuStreamAddCallback_ptsz);
    return add_callback(h, cb, user, flags);
}

void sim_stream_after_fork_child(void)
{
    /* Worker threads do not exist in the child: forget every stream and
     * event (leaked, not freed: their locks may be held by lost threads). */
    pthread_mutex_init(&reg_lock, NULL);
    streams = NULL;
    default_stream = NULL;
}

/* Events: points in a stream. Recording one queues an operation that marks
 * it reached (with a timestamp); cuStreamWaitEvent queues an operation that
 * blocks its stream until the event reaches the generation recorded when the
 * wait was queued. An event is freed when its handle is destroyed and no
 * queued operation refers to it any more. */
#include "sim_internal.h"
#include <stdlib.h>
#include <time.h>

struct sim_event {
    unsigned flags;
    uint64_t rec, done;      /* generations recorded / reached */
    struct timespec t;
    int refs;                /* the handle + queued ops */
    struct sim_event *next_live;
};

/* Guards the event list, every event's fields and refs. */
static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;
static struct sim_event *events;

static struct sim_event *event_get(CUevent h)
{
    for (struct sim_event *e = events; e; e = e->next_live)
        if (e == (struct sim_event *)h) return e;
    return NULL;
}

static void event_unref_locked(struct sim_event *e)
{
    if (--e->refs == 0) free(e);
}

SIM_API CUresult cuEventCreate(CUevent *ph, unsigned int Flags)
{
    SIM_COUNT(cuEventCreate);
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (!ph || (Flags & ~0xfu)) return CUDA_ERROR_INVALID_VALUE;
    struct sim_event *e = calloc(1, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = Flags;
    e->refs = 1;
    pthread_mutex_lock(&ev_lock);
    e->next_live = events;
    events = e;
    pthread_mutex_unlock(&ev_lock);
    *ph = (CUevent)e;
    return CUDA_SUCCESS;
}

static CUresult event_destroy(CUevent h)
{
    SIM_REQUIRE_INIT();
    pthread_mutex_lock(&ev_lock);
    struct sim_event **pp = &events;
    while (*pp && *pp != (struct sim_event *)h) pp = &(*pp)->next_live;
    struct sim_event *e = *pp;
    if (e) {
        *pp = e->next_live;
        event_unref_locked(e);
    }
    pthread_mutex_unlock(&ev_lock);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
SIM_API CUresult cuEventDestroy_v2(CUevent h)
{
    SIM_COUNT(cuEventDestroy_v2);
    return event_destroy(h);
}
SIM_API CUresult cuEventDestroy(CUevent h)
{
    SIM_COUNT(cuEventDestroy);
    return event_destroy(h);
}

/* A queued record or wait: holds a reference to e. */
struct event_op { struct sim_event *e; uint64_t gen; };

/* Queues fn on st for event h, at a new generation (record) or the one
 * recorded last (wait). */
static CUresult enqueue_event_op(struct sim_stream *st, CUevent h, sim_op_fn fn, int new_gen)
{
    pthread_mutex_lock(&ev_lock);
    struct sim_event *e = event_get(h);
    if (!e) {
        pthread_mutex_unlock(&ev_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    struct event_op o = {e, new_gen ? ++e->rec : e->rec};
    e->refs++;
    pthread_mutex_unlock(&ev_lock);
    CUresult r = sim_stream_enqueue(st, fn, &o, sizeof o);
    if (r != CUDA_SUCCESS) {
        pthread_mutex_lock(&ev_lock);
        event_unref_locked(e);
        pthread_mutex_unlock(&ev_lock);
    }
    return r;
}

static void run_record(void *p)
{
    struct event_op *o = p;
    pthread_mutex_lock(&ev_lock);
    if (o->gen > o->e->done) {
        o->e->done = o->gen;
        clock_gettime(CLOCK_MONOTONIC, &o->e->t);
    }
    pthread_cond_broadcast(&ev_cv);
    event_unref_locked(o->e);
    pthread_mutex_unlock(&ev_lock);
}

static CUresult event_record(CUevent h, CUstream s)
{
    SIM_REQUIRE_INIT();
    GET_STREAM(st, s);
    return enqueue_event_op(st, h, run_record, 1);
}
SIM_API CUresult cuEventRecord(CUevent h, CUstream s)
{
    SIM_COUNT(cuEventRecord);
    return event_record(h, s);
}
SIM_API CUresult cuEventRecord_ptsz(CUevent h, CUstream s)
{
    SIM_COUNT(cuEventRecord_ptsz);
    return event_record(h, s);
}
SIM_API CUresult cuEventRecordWithFlags(CUevent h, CUstream s, unsigned int flags)
{
    SIM_COUNT(cuEventRecordWithFlags);
    (void)flags;
    return event_record(h, s);
}
SIM_API CUresult cuEventRecordWithFlags_ptsz(CUevent h, CUstream s, unsigned int flags)
{
    SIM_COUNT(cuEventRecordWithFlags_ptsz);
    (void)flags;
    return event_record(h, s);
}

SIM_API CUresult cuEventQuery(CUevent h)
{
    SIM_COUNT(cuEventQuery);
    SIM_REQUIRE_INIT();
    pthread_mutex_lock(&ev_lock);
    struct sim_event *e = event_get(h);
    CUresult r = !e ? CUDA_ERROR_INVALID_HANDLE : e->done >= e->rec ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&ev_lock);
    return r;
}

SIM_API CUresult cuEventSynchronize(CUevent h)
{
    SIM_COUNT(cuEventSynchronize);
    SIM_REQUIRE_INIT();
    pthread_mutex_lock(&ev_lock);
    struct sim_event *e = event_get(h);
    if (!e) {
        pthread_mutex_unlock(&ev_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    uint64_t target = e->rec;
    e->refs++;
    while (e->done < target) pthread_cond_wait(&ev_cv, &ev_lock);
    event_unref_locked(e);
    pthread_mutex_unlock(&ev_lock);
    sim_pools_sync_trim();
    return CUDA_SUCCESS;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b)
{
    SIM_REQUIRE_INIT();
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&ev_lock);
    struct sim_event *s = event_get(a), *e = event_get(b);
    CUresult r = CUDA_SUCCESS;
    if (!s || !e || (s->flags & CU_EVENT_DISABLE_TIMING) || (e->flags & CU_EVENT_DISABLE_TIMING) ||
        s->rec == 0 || e->rec == 0)
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (s->done < s->rec || e->done < e->rec)
        r = CUDA_ERROR_NOT_READY;
    else
        *ms = (float)((double)(e->t.tv_sec - s->t.tv_sec) * 1e3 +
                      (double)(e->t.tv_nsec - s->t.tv_nsec) / 1e6);
    pthread_mutex_unlock(&ev_lock);
    return r;
}
SIM_API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    SIM_COUNT(cuEventElapsedTime);
    return elapsed(ms, a, b);
}
SIM_API CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b)
{
    SIM_COUNT(cuEventElapsedTime_v2);
    return elapsed(ms, a, b);
}

static void run_wait(void *p)
{
    struct event_op *o = p;
    pthread_mutex_lock(&ev_lock);
    while (o->e->done < o->gen) pthread_cond_wait(&ev_cv, &ev_lock);
    event_unref_locked(o->e);
    pthread_mutex_unlock(&ev_lock);
}

static CUresult stream_wait_event(CUstream s, CUevent h, unsigned flags)
{
    SIM_REQUIRE_INIT();
    if (flags & ~1u) return CUDA_ERROR_INVALID_VALUE;
    GET_STREAM(st, s);
    return enqueue_event_op(st, h, run_wait, 0);
}
SIM_API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    SIM_COUNT(cuStreamWaitEvent);
    return stream_wait_event(s, e, flags);
}
SIM_API CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags)
{
    SIM_COUNT(cuStreamWaitEvent_ptsz);
    return stream_wait_event(s, e, flags);
}

void sim_event_after_fork_child(void)
{
    /* Leaked, not freed: their lock may have been held by a lost thread. */
    pthread_mutex_init(&ev_lock, NULL);
    pthread_cond_init(&ev_cv, NULL);
    events = NULL;
}

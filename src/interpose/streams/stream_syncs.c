/* The program's own synchronisations (stream_syncs.h): the hooks of
 * context, stream and event synchronisation, and the table of streams and
 * events they read.
 *
 * Every rule follows from the CUDA Driver API reference (cuda.h 13.0):
 * - cuCtxSynchronize "blocks until the current context has completed all
 *   preceding requested tasks" (and, for a primary context, its green
 *   contexts'); cuCtxSynchronize_v2 the same for the context it is given
 *   (NULL: the current one). Context Management.
 * - cuStreamSynchronize "waits until the device has completed all
 *   operations in the stream"; cuStreamQuery "returns CUDA_SUCCESS if all
 *   operations in the stream ... have completed" (Stream Management).
 * - cuStreamDestroy "in case the device is still doing work in the stream
 *   ... will return immediately and the resources ... will be released
 *   automatically once the device has completed all work": a destroyed
 *   stream's work may still run, so it keeps its place in the minimum
 *   until a context-wide sync begun after the destroy has returned.
 * - cuEventRecord "captures in hEvent the contents of hStream at the time
 *   of this call ... uses of hStream after this call do not modify hEvent",
 *   a later record "will overwrite the previously captured state";
 *   cuEventSynchronize "waits until the completion of all work currently
 *   captured", cuEventQuery "returns CUDA_SUCCESS if all captured work has
 *   been completed" (Event Management). So an event's completion says what
 *   a sync of its stream begun at the record would say, provided the
 *   record was not overwritten meanwhile (a sequence number, checked
 *   before and after the call) and the stream was not capturing (a record
 *   during stream capture becomes a graph node, not work on the stream:
 *   cuStreamIsCapturing is asked first; an answer other than "not
 *   capturing" makes the record count for nothing).
 * - The legacy default stream (handle 0 or CU_STREAM_LEGACY) is one stream
 *   per context ("Stream synchronization behavior"). The per-thread
 *   default stream is one per thread: the shim cannot name them all, so
 *   once it is in use only context-wide syncs count.
 * A ticket is taken before a call is forwarded and marked only after it
 * returned CUDA_SUCCESS: every block freed before the ticket had its last
 * use enqueued before the call began. Any answer but CUDA_SUCCESS (an
 * error, CUDA_ERROR_NOT_READY) marks nothing. */
#include "hook_enter.h"

#include "arena_glue.h"
#include "capture.h"
#include "contexts.h"
#include "log.h"
#include "pool_charge.h"
#include "settings.h"
#include "stream_order.h"
#include "stream_syncs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* One stream the program may have work on. Created streams are keyed by
 * handle while live; the legacy stream of a context has `legacy` set. The
 * ticket in `synced` is one of `arena`'s: an entry whose arena is not the
 * context's arena now (none yet, or a VMM arena replaced by a chunks one)
 * counts as 0, never synced. */
typedef struct {
  uint64_t serial;    /* unique, never reused (events name their stream by it) */
  uint64_t ctx_id;
  CUstream handle;
  int legacy;
  int destroyed;      /* cuStreamDestroy returned: its work may still run */
  uint64_t destroy_seq;
  vs_arena *arena;
  uint64_t synced;
} stream_ent;

/* An event the shim saw recorded. seq counts the records that returned;
 * inflight those being forwarded now (overlap: two at once, so which one
 * the driver kept is unknown). usable is 0 when the newest record cannot
 * be vouched for. */
typedef struct {
  CUevent handle;
  uint64_t seq;
  int inflight, overlap;
  int usable;
  uint64_t serial;    /* the stream's entry */
  vs_arena *arena;
  uint64_t ticket;
  UT_hash_handle hh;
} event_ent;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static stream_ent *g_streams;
static size_t g_n, g_cap;
static uint64_t g_serial, g_destroys;
static event_ent *g_events;
static _Atomic int g_off;         /* per-stream syncs count no more */
static _Atomic int g_disabled = -1;   /* VRAMSHIM_PROGRAM_SYNCS=off; -1 not read yet */

static int disabled(void) { return vs_settings_env_off_once(&g_disabled, "VRAMSHIM_PROGRAM_SYNCS"); }

static int per_stream_on(void) { return !atomic_load(&g_off) && !vs_stream_order_ptds_used(); }

void vs_stream_syncs_off(const char *why) {
  if (!atomic_exchange(&g_off, 1)) VS_DEBUG("%s: only context-wide synchronisations count as the arena's", why);
}

void vs_stream_syncs_atfork_child(void) { pthread_mutex_init(&g_lock, NULL); }

/* ---- The table (caller holds g_lock) ------------------------------------ */
static stream_ent *add_entry(uint64_t ctx_id, CUstream h, int legacy, vs_arena *a, uint64_t ticket) {
  if (g_n == g_cap) {
    size_t cap = g_cap ? 2 * g_cap : 16;
    stream_ent *n = realloc(g_streams, cap * sizeof *n);
    if (!n) return NULL;
    g_streams = n;
    g_cap = cap;
  }
  stream_ent *e = &g_streams[g_n++];
  *e = (stream_ent){++g_serial, ctx_id, h, legacy, 0, 0, a, ticket};
  return e;
}

static stream_ent *by_serial(uint64_t serial) {
  for (size_t i = 0; i < g_n; i++)
    if (g_streams[i].serial == serial) return &g_streams[i];
  return NULL;
}

static stream_ent *live_by_handle(CUstream h) {
  for (size_t i = 0; i < g_n; i++)
    if (!g_streams[i].legacy && !g_streams[i].destroyed && g_streams[i].handle == h) return &g_streams[i];
  return NULL;
}

/* The context's legacy stream, made on first use (never synced: 0). */
static stream_ent *legacy_of(uint64_t ctx_id) {
  for (size_t i = 0; i < g_n; i++)
    if (g_streams[i].legacy && g_streams[i].ctx_id == ctx_id) return &g_streams[i];
  return add_entry(ctx_id, NULL, 1, NULL, 0);
}

static void credit(stream_ent *e, vs_arena *a, uint64_t ticket) {
  if (e->arena != a) {
    e->arena = a;
    e->synced = ticket;
  } else if (ticket > e->synced) {
    e->synced = ticket;
  }
}

/* The oldest ticket every stream of the context has synced to (0: some
 * stream never did, in this arena). */
static uint64_t oldest(uint64_t ctx_id, vs_arena *a) {
  uint64_t m = UINT64_MAX;
  int legacy = 0;
  for (size_t i = 0; i < g_n; i++) {
    stream_ent *e = &g_streams[i];
    if (e->ctx_id != ctx_id) continue;
    legacy |= e->legacy;
    uint64_t v = e->arena == a ? e->synced : 0;
    if (v < m) m = v;
  }
  return legacy && m != UINT64_MAX ? m : 0;
}

/* ---- Helpers ------------------------------------------------------------- */
static vs_arena *arena_of(vs_ctx *c) { return c ? atomic_load_explicit(&c->arena, memory_order_acquire) : NULL; }

/* An arena whose pending blocks a sync could make reusable: none, or one in
 * stream order (nothing pends there, and leaving it syncs the arena, so a
 * ticket taken meanwhile could only mark blocks already ready), has no use
 * for a ticket; the sync is then forwarded with no bookkeeping. */
static int wants_tickets(vs_arena *a) { return a && !vs_arena_stream_ordered(a); }

/* A stream handle as the program passed it: the context of the stream
 * (with a reference, or NULL) and its entry's serial (0: not one to count).
 * Legacy handles name the current context's legacy stream. */
static vs_ctx *resolve(const vs_real_table *real, CUstream h, uint64_t *serial) {
  *serial = 0;
  if ((uintptr_t)h == 0x2) return NULL;   /* CU_STREAM_PER_THREAD: VS_STREAM_SEEN said so */
  if (h == NULL || (uintptr_t)h == 0x1) {
    vs_ctx *c = vs_ctx_acquire_current(real);
    if (!c) return NULL;
    pthread_mutex_lock(&g_lock);
    stream_ent *e = legacy_of(c->id);
    if (e) *serial = e->serial;
    pthread_mutex_unlock(&g_lock);
    if (!e) {
      vs_stream_syncs_off("out of host memory for the stream table");
      vs_ctx_put(c);
      return NULL;
    }
    return c;
  }
  pthread_mutex_lock(&g_lock);
  stream_ent *e = live_by_handle(h);
  uint64_t id = e ? e->ctx_id : 0;
  if (e) *serial = e->serial;
  pthread_mutex_unlock(&g_lock);
  vs_ctx *c = id ? vs_ctx_acquire_id(id) : NULL;
  if (!c) *serial = 0;
  return c;
}

/* The stream `serial` of c finished everything enqueued before `ticket`
 * (of arena a): mark what every stream of c now vouches for. */
static void stream_synced(vs_ctx *c, vs_arena *a, uint64_t serial, uint64_t ticket) {
  uint64_t m = 0;
  pthread_mutex_lock(&g_lock);
  stream_ent *e = by_serial(serial);
  if (e) {
    credit(e, a, ticket);
    if (per_stream_on()) m = oldest(c->id, a);
  }
  pthread_mutex_unlock(&g_lock);
  if (m) vs_arena_synced_to(a, m);
}

/* A context-wide sync of c, forwarded by `call`; c referenced. */
static CUresult ctx_sync(vs_ctx *c, CUresult (*call)(void *), void *arg) {
  vs_arena *a = arena_of(c);
  if (!wants_tickets(a)) return call(arg);
  uint64_t t = vs_arena_sync_ticket(a);
  pthread_mutex_lock(&g_lock);
  uint64_t destroys = g_destroys;
  pthread_mutex_unlock(&g_lock);
  CUresult r = call(arg);
  if (r != CUDA_SUCCESS) return r;
  vs_arena_synced_to(a, t);
  /* Every stream of c is synced to t; a stream destroyed before the sync
   * began has no work left and leaves the table. */
  pthread_mutex_lock(&g_lock);
  (void)legacy_of(c->id);   /* (out of memory: the stream-level minimum stays 0) */
  size_t k = 0;
  for (size_t i = 0; i < g_n; i++) {
    stream_ent *e = &g_streams[i];
    if (e->ctx_id == c->id) {
      if (e->destroyed && e->destroy_seq <= destroys) continue;
      credit(e, a, t);
    }
    g_streams[k++] = *e;
  }
  g_n = k;
  pthread_mutex_unlock(&g_lock);
  return r;
}

/* ---- Stream creation (stream_order.c's hooks) ---------------------------- */
void vs_stream_syncs_before_create(vs_stream_note *n) {
  memset(n, 0, sizeof *n);
  if (disabled()) return;
  vs_ctx *c = vs_ctx_acquire_current(vs_driver_if_loaded());
  if (!c) return;
  n->ctx_id = c->id;
  n->arena = arena_of(c);
  /* A new stream holds no work enqueued before it exists. */
  n->ticket = vs_arena_sync_ticket(n->arena);
  vs_ctx_put(c);
}

void vs_stream_syncs_created(CUresult r, CUstream s, const vs_stream_note *n) {
  if (r != CUDA_SUCCESS || disabled()) return;
  if (!n->ctx_id) {
    vs_stream_syncs_off("a stream was created with no context the shim could name");
    return;
  }
  pthread_mutex_lock(&g_lock);
  stream_ent *old = live_by_handle(s);   /* a handle reused after a destroy the shim missed */
  if (old) old->destroyed = 1, old->destroy_seq = ++g_destroys;
  stream_ent *e = add_entry(n->ctx_id, s, 0, n->arena, n->ticket);
  pthread_mutex_unlock(&g_lock);
  if (!e) vs_stream_syncs_off("out of host memory for the stream table");
  /* Only a stream recorded here is served off the lane (stream_alloc.c): a
   * handle made again may not pass for one already ordered after a lane. */
  else vs_arena_glue_forget_stream((uint64_t)(uintptr_t)s);
}

uint64_t vs_stream_syncs_ctx_of(CUstream h) {
  if (!h || (uintptr_t)h <= 0x2) return 0;
  pthread_mutex_lock(&g_lock);
  stream_ent *e = live_by_handle(h);
  uint64_t id = e ? e->ctx_id : 0;
  pthread_mutex_unlock(&g_lock);
  return id;
}

/* ---- Hooks: context-wide ------------------------------------------------- */
static CUresult call_sync(void *arg) {
  const vs_real_table *real = arg;
  return real->cuCtxSynchronize();
}

CUresult vs_hook_cuCtxSynchronize(void) {
  VS_HOOK_ENTER(cuCtxSynchronize, ());
  if (disabled()) VS_FORWARD(cuCtxSynchronize, ());
  vs_guard_enter();
  vs_ctx *c = vs_ctx_acquire_current(real);
  CUresult r = c ? ctx_sync(c, call_sync, (void *)real) : real->cuCtxSynchronize();
  if (c) vs_ctx_put(c);
  vs_pool_refresh(real, -1);   /* pools give back above their release threshold here */
  vs_guard_leave();
  return r;
}

typedef struct {
  const vs_real_table *real;
  CUcontext ctx;
} sync_v2_arg;

static CUresult call_sync_v2(void *arg) {
  sync_v2_arg *s = arg;
  return s->real->cuCtxSynchronize_v2(s->ctx);
}

CUresult vs_hook_cuCtxSynchronize_v2(CUcontext ctx) {
  VS_HOOK_ENTER(cuCtxSynchronize_v2, (ctx));
  if (disabled()) VS_FORWARD(cuCtxSynchronize_v2, (ctx));
  vs_guard_enter();
  /* Counted for the current context only (NULL, or its own handle): the
   * shim does not look other contexts up by handle here. */
  vs_ctx *c = vs_ctx_acquire_current(real);
  if (c && ctx && (uint64_t)(uintptr_t)ctx != c->handle) {
    vs_ctx_put(c);
    c = NULL;
  }
  sync_v2_arg arg = {real, ctx};
  CUresult r = c ? ctx_sync(c, call_sync_v2, &arg) : real->cuCtxSynchronize_v2(ctx);
  if (c) vs_ctx_put(c);
  vs_pool_refresh(real, -1);
  vs_guard_leave();
  return r;
}

/* ---- Hooks: one stream --------------------------------------------------- */
#define STREAM_SYNC_BODY(name, h)                                    \
  VS_HOOK_ENTER(name, (h));                                          \
  VS_STREAM_SEEN(h, 0);                                              \
  if (disabled()) VS_FORWARD(name, (h));                             \
  vs_guard_enter();                                                  \
  uint64_t serial;                                                   \
  vs_ctx *c = resolve(real, h, &serial);                             \
  vs_arena *a = arena_of(c);                                         \
  uint64_t t = serial && wants_tickets(a) ? vs_arena_sync_ticket(a) : 0; \
  CUresult r = real->name(h);                                        \
  if (r == CUDA_SUCCESS && t) stream_synced(c, a, serial, t);        \
  if (c) vs_ctx_put(c);                                              \
  vs_pool_refresh(real, -1);                                         \
  vs_guard_leave();                                                  \
  return r

CUresult vs_hook_cuStreamSynchronize(CUstream hStream) { STREAM_SYNC_BODY(cuStreamSynchronize, hStream); }
CUresult vs_hook_cuStreamQuery(CUstream hStream) { STREAM_SYNC_BODY(cuStreamQuery, hStream); }

/* A stream destroyed while capturing ends its capture (capture.h). */
#define STREAM_DESTROY_BODY(name, h)                                 \
  VS_HOOK_ENTER(name, (h));                                          \
  int capturing = vs_capture_on(real, h, 0);                         \
  vs_guard_enter();                                                  \
  CUresult r = real->name(h);                                        \
  vs_guard_leave();                                                  \
  if (r == CUDA_SUCCESS) vs_capture_stream_destroyed(capturing);     \
  if (r == CUDA_SUCCESS && h && (uintptr_t)h > 0x2) {                \
    pthread_mutex_lock(&g_lock);                                     \
    stream_ent *e = live_by_handle(h);                               \
    if (e) e->destroyed = 1, e->destroy_seq = ++g_destroys;          \
    pthread_mutex_unlock(&g_lock);                                   \
  }                                                                  \
  return r

CUresult vs_hook_cuStreamDestroy_v2(CUstream hStream) { STREAM_DESTROY_BODY(cuStreamDestroy_v2, hStream); }
CUresult vs_hook_cuStreamDestroy(CUstream hStream) { STREAM_DESTROY_BODY(cuStreamDestroy, hStream); }

/* ---- Hooks: events ------------------------------------------------------- */
static void event_forget(CUevent h) {
  pthread_mutex_lock(&g_lock);
  event_ent *ev = NULL;
  HASH_FIND(hh, g_events, &h, sizeof h, ev);
  if (ev) {
    HASH_DEL(g_events, ev);
    free(ev);
  }
  pthread_mutex_unlock(&g_lock);
}

/* A record of hEvent on hStream, forwarded by `fwd`. */
static CUresult event_record(const vs_real_table *real, CUevent hEvent, CUstream hStream, unsigned flags,
                             int with_flags) {
  uint64_t serial = 0;
  vs_ctx *c = NULL;
  vs_arena *a = NULL;
  if (!disabled() && per_stream_on() && real->cuStreamIsCapturing) {
    c = resolve(real, hStream, &serial);
    a = arena_of(c);
    /* Not capturing, asked before the record (only where a ticket has a
     * use: the query is a driver call): a record during capture is a graph
     * node. No answer (an old driver, an error): not counted. */
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (serial && wants_tickets(a) &&
        (real->cuStreamIsCapturing(hStream, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE))
      serial = 0;
  }
  uint64_t t = serial && wants_tickets(a) ? vs_arena_sync_ticket(a) : 0;
  event_ent *ev = NULL;
  pthread_mutex_lock(&g_lock);
  HASH_FIND(hh, g_events, &hEvent, sizeof hEvent, ev);
  if (!ev && t) {
    ev = calloc(1, sizeof *ev);
    if (ev) {
      ev->handle = hEvent;
      HASH_ADD(hh, g_events, handle, sizeof ev->handle, ev);
    }
  }
  int mine = ev != NULL;   /* this record is in ev's in-flight count */
  if (ev) {   /* a wait that reads the event from now on counts for nothing */
    if (ev->inflight++) ev->overlap = 1;
    ev->usable = 0;
  }
  pthread_mutex_unlock(&g_lock);
  CUresult r = with_flags ? real->cuEventRecordWithFlags(hEvent, hStream, flags) : real->cuEventRecord(hEvent, hStream);
  pthread_mutex_lock(&g_lock);
  HASH_FIND(hh, g_events, &hEvent, sizeof hEvent, ev);
  if (ev && !mine) {
    /* An entry another thread's record made meanwhile: this record, which
     * it does not count, may be the one the driver kept. */
    ev->seq++;
    if (ev->inflight) ev->overlap = 1;
    else ev->usable = 0;
  } else if (ev && ev->inflight > 0) {
    ev->seq++;
    if (--ev->inflight == 0) {
      ev->usable = r == CUDA_SUCCESS && t && !ev->overlap;
      ev->serial = serial;
      ev->arena = a;
      ev->ticket = t;
      ev->overlap = 0;
    }
  }
  pthread_mutex_unlock(&g_lock);
  if (c) vs_ctx_put(c);
  return r;
}

CUresult vs_hook_cuEventRecord(CUevent hEvent, CUstream hStream) {
  VS_HOOK_ENTER(cuEventRecord, (hEvent, hStream));
  VS_STREAM_SEEN(hStream, 0);
  vs_guard_enter();
  CUresult r = event_record(real, hEvent, hStream, 0, 0);
  vs_guard_leave();
  return r;
}

CUresult vs_hook_cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  VS_HOOK_ENTER(cuEventRecordWithFlags, (hEvent, hStream, flags));
  VS_STREAM_SEEN(hStream, 0);
  vs_guard_enter();
  CUresult r = event_record(real, hEvent, hStream, flags, 1);
  vs_guard_leave();
  return r;
}

#define EVENT_WAIT_BODY(name, h)                                                \
  VS_HOOK_ENTER(name, (h));                                                     \
  vs_guard_enter();                                                             \
  uint64_t seq = 0, serial = 0, ticket = 0, ctx_id = 0;                         \
  vs_arena *a = NULL;                                                           \
  pthread_mutex_lock(&g_lock);                                                  \
  event_ent *ev = NULL;                                                         \
  HASH_FIND(hh, g_events, &h, sizeof h, ev);                                    \
  if (ev && ev->usable && !ev->inflight) {                                      \
    seq = ev->seq, serial = ev->serial, ticket = ev->ticket, a = ev->arena;     \
    stream_ent *se = by_serial(serial);                                         \
    ctx_id = se ? se->ctx_id : 0;                                               \
  }                                                                             \
  pthread_mutex_unlock(&g_lock);                                                \
  vs_ctx *c = ctx_id ? vs_ctx_acquire_id(ctx_id) : NULL;                        \
  CUresult r = real->name(h);                                                   \
  if (r == CUDA_SUCCESS && c && arena_of(c) == a) {                             \
    pthread_mutex_lock(&g_lock);                                                \
    HASH_FIND(hh, g_events, &h, sizeof h, ev);                                  \
    int same = ev && ev->seq == seq && !ev->inflight; /* not recorded again */  \
    pthread_mutex_unlock(&g_lock);                                              \
    if (same) stream_synced(c, a, serial, ticket);                              \
  }                                                                             \
  if (c) vs_ctx_put(c);                                                         \
  vs_pool_refresh(real, -1);                                                    \
  vs_guard_leave();                                                             \
  return r

CUresult vs_hook_cuEventSynchronize(CUevent hEvent) { EVENT_WAIT_BODY(cuEventSynchronize, hEvent); }
CUresult vs_hook_cuEventQuery(CUevent hEvent) { EVENT_WAIT_BODY(cuEventQuery, hEvent); }

/* A new event is empty, whatever its handle was before; a destroyed one
 * may come back under the same handle. */
CUresult vs_hook_cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  VS_HOOK_ENTER(cuEventCreate, (phEvent, Flags));
  vs_guard_enter();
  CUresult r = real->cuEventCreate(phEvent, Flags);
  vs_guard_leave();
  if (r == CUDA_SUCCESS && phEvent) event_forget(*phEvent);
  return r;
}

CUresult vs_hook_cuEventDestroy_v2(CUevent hEvent) {
  VS_HOOK_ENTER(cuEventDestroy_v2, (hEvent));
  event_forget(hEvent);
  VS_FORWARD(cuEventDestroy_v2, (hEvent));
}
CUresult vs_hook_cuEventDestroy(CUevent hEvent) {
  VS_HOOK_ENTER(cuEventDestroy, (hEvent));
  event_forget(hEvent);
  VS_FORWARD(cuEventDestroy, (hEvent));
}

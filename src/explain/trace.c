/* Buffered RMM-CSV trace recorders; see trace.h. */
#include "file.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "bgthread.h"
#include "clock.h"
#include "log.h"
#include "proc.h"
#include "procenv.h"
#include "timeutil.h"

/* One event as the hot path stores it: no formatting there. */
typedef struct trace_rec {
  uint64_t ticks, ptr, size, stream;
  uint32_t tid;
  uint32_t action;     /* 0 allocate, 1 allocate failure, 2 free */
} trace_rec;

#define RECS (VS_TRACE_BUFFER / sizeof(trace_rec))

/* A buffer of records and the clock anchors around it: (ticks, ns) read
 * together when it started filling and when it was handed off, so tick
 * stamps convert to ns by interpolation. */
typedef struct trace_buf {
  size_t n;
  uint64_t start_ticks, start_ns, end_ticks, end_ns;
  trace_rec rec[RECS];
} trace_buf;

/* Double buffering: the hot path fills buf[active]; a full buffer is
 * handed to the process's writer thread, which formats and writes it
 * without the recorder's lock while the hot path fills the other one. If
 * the writer is still busy when the second buffer fills, the hot path
 * waits for it (back-pressure: nothing is dropped). Whoever holds a full
 * buffer (full = 1) owns fd, path and text until it clears full. */
struct vs_trace {
  pthread_mutex_t lock;
  pthread_cond_t done;     /* full went back to 0 */
  char pattern[1024];
  char path[1100];         /* owner of the full buffer only */
  char shown[1100];        /* vs_trace_path's answer, under lock */
  int card;
  int fd;                  /* -1 until the first write; owner only */
  int broken;              /* open/write failed: drop events, warn once */
  int have_origin;
  uint64_t origin_ns;      /* monotonic time of the first event */
  uint64_t recorded, dropped;
  int active, full;
  struct vs_trace *next;   /* registry, under g_reg_lock */
  struct vs_trace *wnext;  /* writer queue, under g_wq_lock */
  trace_buf buf[2];
  char text[64 * 1024];    /* formatting, a chunk at a time; owner only */
};

/* Registry of recorders: for atexit flushing and the fork handlers. */
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static vs_trace *g_reg;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The writer thread's queue of recorders with a full buffer. */
static pthread_mutex_t g_wq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wq_cond = PTHREAD_COND_INITIALIZER;
static vs_trace *g_wq_head, *g_wq_tail;
static int g_writer;       /* 0 not started, 1 running, -1 could not start: write inline */

/* Thread id cached per thread; the fork generation invalidates the cache
 * of the thread that forked (the only thread of the child). */
static _Atomic unsigned g_fork_gen;
static __thread unsigned t_gen = ~0u;
static __thread long t_tid;

static long thread_id(void) {
  unsigned gen = atomic_load_explicit(&g_fork_gen, memory_order_relaxed);
  if (t_gen != gen) {
    t_tid = vs_plat_tid();
    t_gen = gen;
  }
  return t_tid;
}

/* fork: hold every lock across it so the child never inherits one held
 * mid-update; the child then drops what the parent will write, and writes
 * its own buffers inline (it has no writer thread). */
static void atfork_prepare(void) {
  pthread_mutex_lock(&g_reg_lock);
  for (vs_trace *t = g_reg; t; t = t->next) pthread_mutex_lock(&t->lock);
  pthread_mutex_lock(&g_wq_lock);
}

static void atfork_parent(void) {
  pthread_mutex_unlock(&g_wq_lock);
  for (vs_trace *t = g_reg; t; t = t->next) pthread_mutex_unlock(&t->lock);
  pthread_mutex_unlock(&g_reg_lock);
}

static void atfork_child(void) {
  atomic_fetch_add_explicit(&g_fork_gen, 1, memory_order_relaxed);
  g_wq_head = g_wq_tail = NULL;
  /* No thread is started in a forked child (not safe before exec in
   * general): the child writes its buffers itself. */
  g_writer = -1;
  pthread_cond_init(&g_wq_cond, NULL);
  pthread_mutex_unlock(&g_wq_lock);
  for (vs_trace *t = g_reg; t; t = t->next) {
    if (t->fd >= 0) close(t->fd);
    t->fd = -1;
    t->broken = 0;
    t->have_origin = 0;
    t->full = 0;
    t->buf[0].n = t->buf[1].n = 0;
    t->recorded = t->dropped = 0;
    t->path[0] = 0;
    t->wnext = NULL;
    pthread_cond_init(&t->done, NULL);
    pthread_mutex_unlock(&t->lock);
  }
  pthread_mutex_unlock(&g_reg_lock);
}

/* Set once vs_trace_exit flushed (the atexit handler then does nothing),
 * and the shim's guard of the atexit flush (vs_trace_set_exit_guard). */
static atomic_int g_exit_done;
static int (*_Atomic g_exit_ok)(void);

static void at_exit(void) {
  if (atomic_load(&g_exit_done)) return;
  int (*ok)(void) = atomic_load(&g_exit_ok);
  if (ok && !ok()) return;   /* the other threads are gone, maybe inside our locks */
  vs_trace_flush_all();
}

void vs_trace_exit(void) {
  if (atomic_exchange(&g_exit_done, 1)) return;
  vs_trace_flush_all();
}

void vs_trace_set_exit_guard(int (*ok)(void)) { atomic_store(&g_exit_ok, ok); }

/* Timestamps. Reading CLOCK_MONOTONIC costs ~35 ns even through the vDSO
 * on a VM; the TSC costs half that. Where the TSC is invariant (x86-64,
 * constant_tsc and nonstop_tsc) events store raw ticks, converted at flush
 * by interpolating between two (ticks, ns) anchors read together; else
 * they store nanoseconds and the conversion is the identity. */
static int g_use_tsc;

static inline uint64_t ticks_now(void) {
#if defined(__x86_64__)
  if (g_use_tsc) return __rdtsc();
#endif
  return vs_mono_ns();
}

static void detect_tsc(void) { g_use_tsc = vs_plat_tsc_invariant() && !vs_plat_getenv("VRAMSHIM_TRACE_NO_TSC"); }

static void init_once(void) {
  detect_tsc();
  vs_plat_atfork(atfork_prepare, atfork_parent, atfork_child);
  atexit(at_exit);
}

int vs_trace_expand(const char *pattern, long pid, int card, char *out, size_t outlen) {
  size_t o = 0;
  for (const char *s = pattern; *s; s++) {
    char tmp[24];
    const char *piece = tmp;
    size_t n;
    if (*s != '%') {
      tmp[0] = *s;
      n = 1;
    } else {
      s++;
      if (*s == 'p') n = (size_t)snprintf(tmp, sizeof tmp, "%ld", pid);
      else if (*s == 'd') n = (size_t)snprintf(tmp, sizeof tmp, "%d", card);
      else if (*s == '%') { tmp[0] = '%'; n = 1; }
      else return -1;
    }
    if (o + n >= outlen) return -1;
    memcpy(out + o, piece, n);
    o += n;
  }
  out[o] = 0;
  return o ? 0 : -1;
}

vs_trace *vs_trace_create(const char *pattern, int card, char *err, size_t errlen) {
  char probe[1100];
  if (!pattern || strlen(pattern) >= sizeof ((vs_trace *)0)->pattern ||
      vs_trace_expand(pattern, 1, card, probe, sizeof probe)) {
    snprintf(err, errlen, "VRAMSHIM_TRACE: bad path pattern '%s' (use %%p for the pid, %%d for the card)",
             pattern ? pattern : "");
    return NULL;
  }
  pthread_once(&g_once, init_once);
  vs_trace *t = calloc(1, sizeof *t);
  if (!t) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&t->lock, NULL);
  pthread_cond_init(&t->done, NULL);
  snprintf(t->pattern, sizeof t->pattern, "%s", pattern);
  t->card = card;
  t->fd = -1;
  pthread_mutex_lock(&g_reg_lock);
  t->next = g_reg;
  g_reg = t;
  pthread_mutex_unlock(&g_reg_lock);
  return t;
}

/* Under t->lock. */
static int open_file(vs_trace *t) {
  if (vs_trace_expand(t->pattern, (long)vs_plat_pid(), t->card, t->path, sizeof t->path)) return -1;
  t->fd = vs_plat_open_regular(t->path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0640);
  if (t->fd < 0) return -1;
  if (vs_plat_file_size(t->fd) == 0) {
    static const char hdr[] = "Thread,Time,Action,Pointer,Size,Stream\n";
    if (write(t->fd, hdr, sizeof hdr - 1) != (ssize_t)(sizeof hdr - 1)) return -1;
  }
  return 0;
}

static char *put_u64(char *o, uint64_t v) {
  char tmp[20];
  int n = 0;
  do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
  while (n) *o++ = tmp[--n];
  return o;
}

static char *put_hex(char *o, uint64_t v) {
  *o++ = '0';
  *o++ = 'x';
  char tmp[16];
  int n = 0;
  do { tmp[n++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
  while (n) *o++ = tmp[--n];
  return o;
}

static char *put_2(char *o, unsigned v) {
  *o++ = (char)('0' + v / 10);
  *o++ = (char)('0' + v % 10);
  return o;
}

static char *put_time(char *o, uint64_t us) {
  uint64_t secs = us / 1000000u, hours = secs / 3600u;
  if (hours < 10) *o++ = '0';
  o = put_u64(o, hours);
  *o++ = ':';
  o = put_2(o, (unsigned)(secs / 60u % 60u));
  *o++ = ':';
  o = put_2(o, (unsigned)(secs % 60u));
  *o++ = '.';
  uint64_t frac = us % 1000000u;
  for (int i = 5; i >= 0; i--) {
    o[i] = (char)('0' + frac % 10);
    frac /= 10;
  }
  return o + 6;
}

/* Formats buffer b and writes it; called by the owner of the full buffer,
 * without t->lock. 0, or -1 (the caller marks the recorder broken). */
static int write_buf(vs_trace *t, const trace_buf *b, uint64_t origin_ns) {
  static const char *const names[] = {"allocate", "allocate failure", "free"};
  static const size_t lens[] = {8, 16, 4};
  double span = (double)(b->end_ticks - b->start_ticks);
  double scale = g_use_tsc && span > 0 ? (double)(b->end_ns - b->start_ns) / span : 1.0;
  if (t->fd < 0 && open_file(t)) goto fail;
  uint64_t last_us = 0;
  size_t i = 0;
  while (i < b->n) {
    char *o = t->text;
    /* A formatted line is at most 111 bytes. */
    for (; i < b->n && (size_t)(o - t->text) + 128 <= sizeof t->text; i++) {
      const trace_rec *r = &b->rec[i];
      double rel = (double)(int64_t)(r->ticks - b->start_ticks) * scale;
      uint64_t ns = b->start_ns + (rel > 0 ? (uint64_t)rel : 0);
      uint64_t us = ns > origin_ns ? (ns - origin_ns) / 1000u : 0;
      if (us < last_us) us = last_us;   /* never backwards in the file */
      last_us = us;
      o = put_u64(o, r->tid);
      *o++ = ',';
      o = put_time(o, us);
      *o++ = ',';
      memcpy(o, names[r->action], lens[r->action]);
      o += lens[r->action];
      *o++ = ',';
      o = put_hex(o, r->ptr);
      *o++ = ',';
      o = put_u64(o, r->size);
      *o++ = ',';
      o = put_hex(o, r->stream);
      *o++ = '\n';
    }
    size_t len = (size_t)(o - t->text), off = 0;
    while (off < len) {
      ssize_t w = write(t->fd, t->text + off, len - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) goto fail;
      off += (size_t)w;
    }
  }
  return 0;
fail:
  VS_WARN("trace for card %d: cannot write %s: %s; recording stops", t->card, t->path[0] ? t->path : t->pattern,
          strerror(errno));
  return -1;
}

/* Under t->lock, by the owner of the full buffer once written. */
static void finish_full(vs_trace *t, int rc) {
  if (rc) t->broken = 1;
  t->full = 0;
  pthread_cond_broadcast(&t->done);
}

static void hand_off(vs_trace *t, int only_full);

/* Issue 10: records reach the file within a second of the event, so a
 * process stopped by SIGTERM or SIGKILL loses at most its last second.
 * The writer hands every recorder's partly filled buffer off itself this
 * often when nothing else woke it. */
#define FLUSH_EVERY_NS 250000000ll

static void flush_partial(void) {
  pthread_mutex_lock(&g_reg_lock);
  for (vs_trace *t = g_reg; t; t = t->next) {
    pthread_mutex_lock(&t->lock);
    /* Never waits here: a recorder whose other buffer is still queued is
     * written by this thread next anyway. */
    if (!t->full && !t->broken && t->buf[t->active].n) hand_off(t, 0);
    pthread_mutex_unlock(&t->lock);
  }
  pthread_mutex_unlock(&g_reg_lock);
}

static void *writer_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&g_wq_lock);
    while (!g_wq_head) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += FLUSH_EVERY_NS;
      if (ts.tv_nsec >= 1000000000l) ts.tv_sec++, ts.tv_nsec -= 1000000000l;
      if (pthread_cond_timedwait(&g_wq_cond, &g_wq_lock, &ts) == ETIMEDOUT && !g_wq_head) {
        pthread_mutex_unlock(&g_wq_lock);
        flush_partial();   /* queues what is buffered (takes g_wq_lock itself) */
        pthread_mutex_lock(&g_wq_lock);
      }
    }
    vs_trace *t = g_wq_head;
    g_wq_head = t->wnext;
    if (!g_wq_head) g_wq_tail = NULL;
    t->wnext = NULL;
    pthread_mutex_unlock(&g_wq_lock);
    pthread_mutex_lock(&t->lock);
    const trace_buf *b = &t->buf[!t->active];
    uint64_t origin = t->origin_ns;
    pthread_mutex_unlock(&t->lock);
    int rc = write_buf(t, b, origin);
    pthread_mutex_lock(&t->lock);
    finish_full(t, rc);
    pthread_mutex_unlock(&t->lock);
  }
  return NULL;
}

/* Under g_wq_lock: starts the writer once; its signals are blocked so the
 * program's handlers never run on it. */
static void start_writer(void) {
  g_writer = vs_plat_thread_spawn(writer_main, NULL, NULL) == 0 ? 1 : -1;
}

/* Under t->lock: hands buf[active] to the writer (waiting while the other
 * buffer is still being written) and switches to the other buffer. The
 * wait drops the lock: another thread may hand the buffer off meanwhile,
 * so only_full = 1 (the record path) hands off only a still-full one. */
static void hand_off(vs_trace *t, int only_full) {
  while (t->full) pthread_cond_wait(&t->done, &t->lock);
  trace_buf *b = &t->buf[t->active];
  if (!b->n || (only_full && b->n < RECS)) return;
  b->end_ticks = ticks_now();
  b->end_ns = vs_mono_ns();
  trace_buf *nb = &t->buf[!t->active];
  nb->n = 0;
  nb->start_ticks = b->end_ticks;
  nb->start_ns = b->end_ns;
  t->active = !t->active;
  t->full = 1;
  if (t->broken) {   /* nothing more is written */
    finish_full(t, -1);
    return;
  }
  pthread_mutex_lock(&g_wq_lock);
  if (g_writer == 0) start_writer();
  int queued = g_writer == 1;
  if (queued) {
    if (g_wq_tail) g_wq_tail->wnext = t;
    else g_wq_head = t;
    g_wq_tail = t;
    pthread_cond_signal(&g_wq_cond);
  }
  pthread_mutex_unlock(&g_wq_lock);
  if (!queued) finish_full(t, write_buf(t, b, t->origin_ns));   /* no thread: write inline */
}

static void record(vs_trace *t, uint32_t action, uint64_t ptr, uint64_t size, uint64_t stream) {
  if (!t) return;
  uint32_t tid = (uint32_t)thread_id();
  pthread_mutex_lock(&t->lock);
  if (t->broken) {
    t->dropped++;
    pthread_mutex_unlock(&t->lock);
    return;
  }
  trace_buf *b;
  while ((b = &t->buf[t->active])->n == RECS) hand_off(t, 1);
  if (t->broken) {   /* the hand-off may have found the file unwritable */
    t->dropped++;
    pthread_mutex_unlock(&t->lock);
    return;
  }
  /* Stamped under the lock, after any wait, so records are in time order. */
  uint64_t now = ticks_now();
  if (!t->have_origin) {
    b->n = 0;
    b->start_ticks = now;
    b->start_ns = t->origin_ns = vs_mono_ns();
    t->have_origin = 1;
    /* The writer runs from the first record on: it also writes partly
     * filled buffers within a second (flush_partial). */
    pthread_mutex_lock(&g_wq_lock);
    if (g_writer == 0) start_writer();
    pthread_mutex_unlock(&g_wq_lock);
  }
  b->rec[b->n++] = (trace_rec){now, ptr, size, stream, tid, action};
  t->recorded++;
  if (b->n == RECS) hand_off(t, 1);
  pthread_mutex_unlock(&t->lock);
}

void vs_trace_alloc(vs_trace *t, uint64_t ptr, uint64_t size, uint64_t stream) {
  record(t, 0, ptr, size, stream);
}

void vs_trace_alloc_failed(vs_trace *t, uint64_t size, uint64_t stream) {
  record(t, 1, 0, size, stream);
}

void vs_trace_free(vs_trace *t, uint64_t ptr, uint64_t size, uint64_t stream) {
  record(t, 2, ptr, size, stream);
}

int vs_trace_flush(vs_trace *t) {
  if (!t) return 0;
  pthread_mutex_lock(&t->lock);
  hand_off(t, 0);
  while (t->full) pthread_cond_wait(&t->done, &t->lock);
  int rc = t->broken ? -1 : 0;
  pthread_mutex_unlock(&t->lock);
  return rc;
}

void vs_trace_flush_all(void) {
  pthread_mutex_lock(&g_reg_lock);
  for (vs_trace *t = g_reg; t; t = t->next) vs_trace_flush(t);
  pthread_mutex_unlock(&g_reg_lock);
}

const char *vs_trace_path(vs_trace *t) {
  pthread_mutex_lock(&t->lock);
  vs_trace_expand(t->pattern, (long)vs_plat_pid(), t->card, t->shown, sizeof t->shown);
  pthread_mutex_unlock(&t->lock);
  return t->shown;
}

void vs_trace_counts(vs_trace *t, uint64_t *recorded, uint64_t *dropped) {
  pthread_mutex_lock(&t->lock);
  if (recorded) *recorded = t->recorded;
  if (dropped) *dropped = t->dropped;
  pthread_mutex_unlock(&t->lock);
}

void vs_trace_destroy(vs_trace *t) {
  if (!t) return;
  vs_trace_flush(t);   /* afterwards the writer holds no reference to t */
  pthread_mutex_lock(&g_reg_lock);
  for (vs_trace **pp = &g_reg; *pp; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  pthread_mutex_unlock(&g_reg_lock);
  if (t->fd >= 0) close(t->fd);
  pthread_cond_destroy(&t->done);
  pthread_mutex_destroy(&t->lock);
  free(t);
}

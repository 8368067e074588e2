/* Buffered RMM-CSV trace recorders; see trace.h. */
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "log.h"

/* One event as the hot path stores it: no formatting there. Text is made
 * at flush time, a buffer at a time. */
typedef struct trace_rec {
  uint64_t ticks, ptr, size, stream;
  uint32_t tid;
  uint32_t action;     /* 0 allocate, 1 allocate failure, 2 free */
} trace_rec;

#define RECS (VS_TRACE_BUFFER / sizeof(trace_rec))

struct vs_trace {
  pthread_mutex_t lock;
  char pattern[1024];
  char path[1100];
  int card;
  int fd;              /* -1 until the first write */
  int broken;          /* open/write failed: drop events, warn once */
  int have_origin;
  uint64_t origin_ns;  /* monotonic time of the first event */
  /* Clock anchor: ticks and monotonic ns read together at the last flush
   * (or the first event); records are placed between it and the next. */
  uint64_t anchor_ticks, anchor_ns;
  uint64_t recorded, dropped;
  size_t nrec;
  struct vs_trace *next;   /* registry, under g_reg_lock */
  trace_rec rec[RECS];
  char text[RECS * 128];   /* a formatted line is at most 111 bytes */
};

/* Registry of recorders: for atexit flushing and the fork handlers. */
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static vs_trace *g_reg;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Thread id cached per thread; the fork generation invalidates the cache
 * of the thread that forked (the only thread of the child). */
static _Atomic unsigned g_fork_gen;
static __thread unsigned t_gen = ~0u;
static __thread long t_tid;

static long thread_id(void) {
  unsigned gen = atomic_load_explicit(&g_fork_gen, memory_order_relaxed);
  if (t_gen != gen) {
    t_tid = (long)syscall(SYS_gettid);
    t_gen = gen;
  }
  return t_tid;
}

/* fork: hold every recorder's lock across it so the child never inherits
 * one mid-update; then the child drops what the parent will write. */
static void atfork_prepare(void) {
  pthread_mutex_lock(&g_reg_lock);
  for (vs_trace *t = g_reg; t; t = t->next) pthread_mutex_lock(&t->lock);
}

static void atfork_parent(void) {
  for (vs_trace *t = g_reg; t; t = t->next) pthread_mutex_unlock(&t->lock);
  pthread_mutex_unlock(&g_reg_lock);
}

static void atfork_child(void) {
  atomic_fetch_add_explicit(&g_fork_gen, 1, memory_order_relaxed);
  for (vs_trace *t = g_reg; t; t = t->next) {
    if (t->fd >= 0) close(t->fd);
    t->fd = -1;
    t->broken = 0;
    t->have_origin = 0;
    t->nrec = 0;
    t->recorded = t->dropped = 0;
    t->path[0] = 0;
    pthread_mutex_unlock(&t->lock);
  }
  pthread_mutex_unlock(&g_reg_lock);
}

static void at_exit(void) { vs_trace_flush_all(); }

/* Timestamps. Reading CLOCK_MONOTONIC costs ~35 ns even through the vDSO
 * on a VM; the TSC costs half that. Where the TSC is invariant (x86-64,
 * constant_tsc and nonstop_tsc) events store raw ticks, converted at flush
 * by interpolating between two (ticks, ns) anchors read together; else
 * they store nanoseconds and the conversion is the identity. */
static int g_use_tsc;

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ticks_now(void) {
#if defined(__x86_64__)
  if (g_use_tsc) return __rdtsc();
#endif
  return mono_ns();
}

static void detect_tsc(void) {
#if defined(__x86_64__)
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f) return;
  char line[4096];
  int constant = 0, nonstop = 0;
  while (fgets(line, sizeof line, f) && !(constant && nonstop)) {
    if (strncmp(line, "flags", 5)) continue;
    constant = strstr(line, " constant_tsc") != NULL;
    nonstop = strstr(line, " nonstop_tsc") != NULL;
    break;
  }
  fclose(f);
  g_use_tsc = constant && nonstop && !getenv("VRAMSHIM_TRACE_NO_TSC");
#endif
}

static void init_once(void) {
  detect_tsc();
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
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
  if (vs_trace_expand(t->pattern, (long)getpid(), t->card, t->path, sizeof t->path)) return -1;
  t->fd = open(t->path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0640);
  if (t->fd < 0) return -1;
  struct stat st;
  if (fstat(t->fd, &st) == 0 && st.st_size == 0) {
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

/* Under t->lock: formats the records and writes them out. */
static int flush_locked(vs_trace *t) {
  if (t->nrec == 0) return t->broken ? -1 : 0;
  if (t->broken) {
    t->nrec = 0;
    return -1;
  }
  static const char *const names[] = {"allocate", "allocate failure", "free"};
  static const size_t lens[] = {8, 16, 4};
  uint64_t now_ticks = ticks_now(), now_ns = mono_ns();
  /* ns per tick from the anchor to now; 1 when ticks are nanoseconds. */
  double span = (double)(now_ticks - t->anchor_ticks);
  double scale = g_use_tsc && span > 0 ? (double)(now_ns - t->anchor_ns) / span : 1.0;
  char *o = t->text;
  uint64_t last_us = 0;
  for (size_t i = 0; i < t->nrec; i++) {
    const trace_rec *r = &t->rec[i];
    double rel = (double)(int64_t)(r->ticks - t->anchor_ticks) * scale;
    uint64_t ns = t->anchor_ns + (rel > 0 ? (uint64_t)rel : 0);
    uint64_t us = ns > t->origin_ns ? (ns - t->origin_ns) / 1000u : 0;
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
  t->anchor_ticks = now_ticks;
  t->anchor_ns = now_ns;
  size_t len = (size_t)(o - t->text), off = 0;
  t->nrec = 0;
  if (t->fd < 0 && open_file(t)) goto fail;
  while (off < len) {
    ssize_t w = write(t->fd, t->text + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) goto fail;
    off += (size_t)w;
  }
  return 0;
fail:
  VS_WARN("trace for card %d: cannot write %s: %s; recording stops", t->card, t->path[0] ? t->path : t->pattern,
          strerror(errno));
  t->broken = 1;
  return -1;
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
  /* Stamped under the lock, so records are in time order. */
  uint64_t now = ticks_now();
  if (!t->have_origin) {
    t->anchor_ticks = now;
    t->anchor_ns = t->origin_ns = mono_ns();
    t->have_origin = 1;
  }
  t->rec[t->nrec++] = (trace_rec){now, ptr, size, stream, tid, action};
  t->recorded++;
  if (t->nrec == RECS) flush_locked(t);
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
  int rc = flush_locked(t);
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
  if (!t->path[0]) vs_trace_expand(t->pattern, (long)getpid(), t->card, t->path, sizeof t->path);
  pthread_mutex_unlock(&t->lock);
  return t->path;
}

void vs_trace_counts(vs_trace *t, uint64_t *recorded, uint64_t *dropped) {
  pthread_mutex_lock(&t->lock);
  if (recorded) *recorded = t->recorded;
  if (dropped) *dropped = t->dropped;
  pthread_mutex_unlock(&t->lock);
}

void vs_trace_destroy(vs_trace *t) {
  if (!t) return;
  pthread_mutex_lock(&g_reg_lock);
  for (vs_trace **pp = &g_reg; *pp; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  pthread_mutex_unlock(&g_reg_lock);
  vs_trace_flush(t);
  if (t->fd >= 0) close(t->fd);
  pthread_mutex_destroy(&t->lock);
  free(t);
}

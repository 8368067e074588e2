/* RMM logging CSV reader: see trace_csv.h for the format and the contract. */
#include "file.h"
#include "trace_csv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "plat_types.h" /* VS_PRINTF */

#define NCOLS 6
static const char *const HEADER = "Thread,Time,Action,Pointer,Size,Stream";

/* A live pointer of the trace: which allocation id holds it, and where. */
typedef struct live_ptr {
  uint64_t ptr;
  uint32_t id;
  size_t line;
  UT_hash_handle hh;
} live_ptr;

typedef struct reader {
  const char *name;
  size_t line;
  char *err;
  size_t errlen;
  vs_trace *t;
  size_t cap_ev, cap_alloc;
  live_ptr *live;   /* uthash head */
  live_ptr *spare;  /* recycled nodes, linked through hh.next */
  uint64_t now_us, max_us;  /* Time of the current line (days past midnight added); latest so far */
  uint64_t days_us;         /* midnights passed, in microseconds (past_midnight) */
  char shown[48];   /* see show() */
} reader;

#define HALF_DAY_US (12ull * 3600 * 1000000)

static int fail(reader *r, const char *fmt, ...) VS_PRINTF(2, 3);
static int fail(reader *r, const char *fmt, ...) {
  int n = snprintf(r->err, r->errlen, "%s:%zu: ", r->name, r->line);
  if (n < 0 || (size_t)n >= r->errlen) return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

int vs_trace_parse_u64(const char *s, size_t len, int allow_hex, uint64_t *out) {
  uint64_t v = 0;
  unsigned base = 10;
  size_t i = 0;
  if (allow_hex && len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    i = 2;
  }
  if (i >= len) return -1;
  for (; i < len; i++) {
    unsigned d;
    char c = s[i];
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (base == 16 && c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
    else if (base == 16 && c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
    else return -1;
    if (v > (UINT64_MAX - d) / base) return -2;
    v = v * base + d;
  }
  *out = v;
  return 0;
}

static int all_digits(const char *s, size_t len) {
  if (len == 0) return 0;
  for (size_t i = 0; i < len; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

static uint64_t digits_value(const char *s, size_t len) {
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) v = v * 10 + (uint64_t)(s[i] - '0');
  return v;
}

/* HH:MM:SS.ffffff (hours may have more digits; the fraction is optional).
 * 1 valid (its value in microseconds in *us), 0 not. */
static int valid_time(const char *s, size_t len, uint64_t *us) {
  const char *c1 = memchr(s, ':', len);
  if (!c1 || !all_digits(s, (size_t)(c1 - s)) || c1 - s > 9) return 0;
  const char *rest = c1 + 1;
  size_t rlen = len - (size_t)(rest - s);
  if (rlen < 5 || !all_digits(rest, 2) || rest[2] != ':' || !all_digits(rest + 3, 2)) return 0;
  if (rest[0] > '5' || rest[3] > '5') return 0;
  uint64_t sec = digits_value(s, (size_t)(c1 - s)) * 3600 + digits_value(rest, 2) * 60 + digits_value(rest + 3, 2);
  *us = sec * 1000000;
  if (rlen == 5) return 1;
  if (rest[5] != '.' || !all_digits(rest + 6, rlen - 6)) return 0;
  /* The fraction's first six digits are microseconds; more are ignored. */
  uint64_t f = 0;
  for (size_t i = 0; i < 6; i++) f = f * 10 + (6 + i < rlen ? (uint64_t)(rest[6 + i] - '0') : 0);
  *us += f;
  return 1;
}

typedef struct field {
  const char *s;
  size_t len;
} field;

/* A field as shown in a message: at most 40 characters, anything not
 * printable ASCII as '?', so a binary or hostile file can't garble a
 * terminal. One per message: the text lives in the reader. */
static const char *show(reader *r, field f) {
  char *buf = r->shown;
  size_t n = f.len > 40 ? 40 : f.len;
  for (size_t i = 0; i < n; i++) buf[i] = f.s[i] >= 0x20 && f.s[i] < 0x7f ? f.s[i] : '?';
  if (f.len > 40) memcpy(buf + n, "...", 4);
  else buf[n] = '\0';
  return buf;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap * 2 : 4096;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * elem);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

static int push_event(reader *r, uint32_t id, uint32_t is_free) {
  vs_trace *t = r->t;
  size_t cap = r->cap_ev;
  if (grow((void **)&t->ev, &cap, t->nev + 1, sizeof *t->ev) ||
      grow((void **)&t->time_us, &r->cap_ev, t->nev + 1, sizeof *t->time_us))
    return fail(r, "out of memory");
  /* Time never runs backwards in the replay: a trace whose lines are not
   * in time order (threads interleaved) keeps its order, at the latest
   * time seen so far. */
  if (r->now_us > r->max_us) r->max_us = r->now_us;
  t->time_us[t->nev] = r->max_us;
  t->ev[t->nev].id = id;
  t->ev[t->nev].free = is_free;
  t->nev++;
  return 0;
}

static int do_allocate(reader *r, uint64_t ptr, uint64_t size, uint64_t stream) {
  vs_trace *t = r->t;
  live_ptr *lp;
  HASH_FIND(hh, r->live, &ptr, sizeof ptr, lp);
  if (lp)
    return fail(r, "allocate of 0x%llx, which is still live (allocated at line %zu)", (unsigned long long)ptr,
                lp->line);
  if (t->nallocs == UINT32_MAX) return fail(r, "too many allocations (more than %u)", UINT32_MAX - 1);
  size_t cap = r->cap_alloc;
  if (grow((void **)&t->sizes, &cap, (size_t)t->nallocs + 1, sizeof *t->sizes) ||
      grow((void **)&t->streams, &r->cap_alloc, (size_t)t->nallocs + 1, sizeof *t->streams))
    return fail(r, "out of memory");
  uint32_t id = t->nallocs++;
  t->sizes[id] = size;
  t->streams[id] = stream;
  if (stream > 1) t->off_legacy++;
  if (r->spare) {
    lp = r->spare;
    r->spare = lp->hh.next;
  } else if (!(lp = malloc(sizeof *lp))) {
    return fail(r, "out of memory");
  }
  lp->ptr = ptr;
  lp->id = id;
  lp->line = r->line;
  HASH_ADD(hh, r->live, ptr, sizeof lp->ptr, lp);
  return push_event(r, id, 0);
}

static int do_free(reader *r, uint64_t ptr, uint64_t size) {
  live_ptr *lp;
  HASH_FIND(hh, r->live, &ptr, sizeof ptr, lp);
  /* The free of a 0-byte allocate (skipped as it was: RMM logs deallocate(nullptr, 0) too). */
  if (!lp && size == 0) {
    r->t->zero_skipped++;
    return 0;
  }
  if (!lp) return fail(r, "free of 0x%llx, which is not live (never allocated, or already freed)",
                       (unsigned long long)ptr);
  uint64_t want = r->t->sizes[lp->id];
  if (size != want)
    return fail(r, "free of 0x%llx with size %llu, but it was allocated with size %llu at line %zu",
                (unsigned long long)ptr, (unsigned long long)size, (unsigned long long)want, lp->line);
  uint32_t id = lp->id;
  HASH_DEL(r->live, lp);
  lp->hh.next = r->spare;
  r->spare = lp;
  r->t->nfrees++;
  return push_event(r, id, 1);
}

/* RMM's logging adaptor writes the time of day: a log that runs past
 * midnight starts again at 00:00. A step back of more than 12 hours is
 * that, not threads' lines out of order (those differ by moments); and a
 * line from before midnight written just after it belongs to that day.
 * Adds the days passed to the line's time (r->now_us). */
static void past_midnight(reader *r) {
  r->now_us += r->days_us;
  if (r->now_us + HALF_DAY_US < r->max_us) {
    r->days_us += 2 * HALF_DAY_US;
    r->now_us += 2 * HALF_DAY_US;
  } else if (r->days_us && r->now_us > r->max_us + HALF_DAY_US) {
    r->now_us -= 2 * HALF_DAY_US;
  }
}

/* A Pointer or Stream: hex (0x...) or decimal, or "(nil)": the null
 * pointer as printf's %p writes it on glibc, which RMM's logging adaptor
 * uses (an `allocate failure` line always has it; RMM's own replay reads it
 * as 0). */
static int parse_ptr(field f, uint64_t *out) {
  if (f.len == 5 && !memcmp(f.s, "(nil)", 5)) {
    *out = 0;
    return 0;
  }
  return vs_trace_parse_u64(f.s, f.len, 1, out);
}

static int parse_line(reader *r, char *s, size_t len) {
  field f[NCOLS];
  size_t n = 0, start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || s[i] == ',') {
      if (n < NCOLS) f[n] = (field){s + start, i - start};
      n++;
      start = i + 1;
    }
  }
  if (n != NCOLS) return fail(r, "expected %d columns (%s), found %zu", NCOLS, HEADER, n);

  uint64_t thread, ptr, size, stream;
  if (vs_trace_parse_u64(f[0].s, f[0].len, 1, &thread))
    return fail(r, "bad Thread '%s': not an unsigned number", show(r, f[0]));
  if (!valid_time(f[1].s, f[1].len, &r->now_us)) return fail(r, "bad Time '%s': expected HH:MM:SS.ffffff", show(r, f[1]));
  past_midnight(r);
  int rc = parse_ptr(f[3], &ptr);
  if (rc) return fail(r, "bad Pointer '%s': %s", show(r, f[3]), rc == -2 ? "out of range" : "not a number");
  rc = vs_trace_parse_u64(f[4].s, f[4].len, 0, &size);
  if (rc == -1) return fail(r, "bad Size '%s': not a decimal number of bytes", show(r, f[4]));
  if (rc == -2 || size > VS_TRACE_MAX_SIZE)
    return fail(r, "bad Size '%s': larger than %llu bytes (1 PiB)", show(r, f[4]), VS_TRACE_MAX_SIZE);
  rc = parse_ptr(f[5], &stream);
  if (rc) return fail(r, "bad Stream '%s': %s", show(r, f[5]), rc == -2 ? "out of range" : "not a number");

  const field *a = &f[2];
  if (a->len == 8 && !memcmp(a->s, "allocate", 8)) {
    /* 0 bytes hold no memory (the driver's cudaMalloc(0) and RMM's pools
     * answer a null pointer, and RMM logs the call): counted and skipped,
     * like a failure, so one such line does not stop a real log. */
    if (size == 0) {
      r->t->zero_skipped++;
      return 0;
    }
    return do_allocate(r, ptr, size, stream);
  }
  if (a->len == 16 && !memcmp(a->s, "allocate failure", 16)) {
    r->t->failures_skipped++;
    return 0;
  }
  if (a->len == 4 && !memcmp(a->s, "free", 4)) return do_free(r, ptr, size);
  return fail(r, "unknown Action '%s' (expected allocate, allocate failure or free)", show(r, *a));
}

int vs_trace_read(FILE *f, const char *name, vs_trace *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  reader r = {.name = name, .err = err, .errlen = errlen, .t = t};
  char *buf = NULL;
  size_t cap = 0;
  ssize_t got;
  int rc = 0, seen_header = 0;
  while ((got = vs_plat_getline(&buf, &cap, f)) >= 0) {
    r.line++;
    size_t len = (size_t)got;
    int complete = len > 0 && buf[len - 1] == '\n';
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) len--;
    if (memchr(buf, '\0', len)) {
      rc = fail(&r, "binary data (a NUL byte): not a CSV trace");
      break;
    }
    if (!seen_header) {
      /* A UTF-8 byte order mark before the header is tolerated. */
      char *h = buf;
      if (len >= 3 && !memcmp(h, "\xef\xbb\xbf", 3)) h += 3, len -= 3;
      if (len != strlen(HEADER) || memcmp(h, HEADER, len)) {
        rc = fail(&r, "missing header: the first line must be '%s'", HEADER);
        break;
      }
      seen_header = 1;
      continue;
    }
    if (len == 0) {
      if (!complete) break; /* nothing after the last newline */
      continue;             /* blank lines are allowed */
    }
    if ((rc = parse_line(&r, buf, len))) break;
  }
  if (!rc && ferror(f)) {
    r.line++;
    rc = fail(&r, "read error: %s", strerror(errno));
  }
  if (!rc && !seen_header) {
    r.line = 1;
    rc = fail(&r, "empty file: expected the header '%s'", HEADER);
  }
  free(buf);
  t->live_at_end = HASH_COUNT(r.live);
  live_ptr *lp, *tmp;
  HASH_ITER(hh, r.live, lp, tmp) {
    HASH_DEL(r.live, lp);
    free(lp);
  }
  while (r.spare) {
    lp = r.spare;
    r.spare = lp->hh.next;
    free(lp);
  }
  if (rc) vs_trace_free(t);
  return rc;
}

int vs_trace_load(const char *path, vs_trace *t, char *err, size_t errlen) {
  FILE *f = vs_plat_fopen_regular(path, "r");
  if (!f) {
    memset(t, 0, sizeof *t);
    snprintf(err, errlen, "%s: cannot open: %s", path, vs_plat_open_strerror(errno));
    return -1;
  }
  int rc = vs_trace_read(f, path, t, err, errlen);
  fclose(f);
  return rc;
}

void vs_trace_free(vs_trace *t) {
  free(t->ev);
  free(t->sizes);
  free(t->streams);
  free(t->time_us);
  free(t->syncs);
  memset(t, 0, sizeof *t);
}

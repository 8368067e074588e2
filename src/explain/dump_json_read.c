/* JSON text -> dump, strictly: every required field present with its type,
 * numbers in range, names known, and the map's invariants (vs_dump_check).
 * Errors name the field by path: "cards[0].regions[2].blocks[5].size". */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "dump_json.h"
#include "json.h"
#include "plat_types.h" /* VS_PRINTF */

/* Byte figures and counts above this are not plausible for any card. */
#define MAX_FIGURE (1ull << 60)

typedef struct rd {
  char *err;
  size_t errlen;
} rd;

/* A field path, cut short rather than overflowing (paths are for messages). */
static void pathf(char *out, size_t cap, const char *fmt, ...) VS_PRINTF(3, 4);
static void pathf(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, cap, fmt, ap);
  va_end(ap);
}

static int bad(rd *r, const char *path, const vs_json *v, const char *fmt, ...) VS_PRINTF(4, 5);
static int bad(rd *r, const char *path, const vs_json *v, const char *fmt, ...) {
  if (!r->err || !r->errlen) return -1;
  int n = v ? snprintf(r->err, r->errlen, "%s (line %u, column %u): ", path, v->line, v->col)
            : snprintf(r->err, r->errlen, "%s: ", path);
  if (n >= 0 && (size_t)n < r->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static const vs_json *need(rd *r, const vs_json *obj, const char *path, const char *k, vs_json_type t) {
  const vs_json *v = vs_json_get(obj, k);
  char p[320];
  pathf(p, sizeof p, "%s%s%s", path, *path ? "." : "", k);
  if (!v) {
    bad(r, p, NULL, "missing");
    return NULL;
  }
  if (v->type != t) {
    bad(r, p, v, "expected %s, found %s", vs_json_type_name(t), vs_json_type_name(v->type));
    return NULL;
  }
  return v;
}

static int num_u64(rd *r, const vs_json *v, const char *p, uint64_t max, uint64_t *out) {
  if (v->type != VS_JSON_NUMBER)
    return bad(r, p, v, "expected a number, found %s", vs_json_type_name(v->type));
  if (vs_json_u64(v, out))
    return bad(r, p, v, "expected a non-negative integer of at most 64 bits, found %s", v->str);
  if (*out > max) return bad(r, p, v, "%s is implausibly large (at most %llu)", v->str, (unsigned long long)max);
  return 0;
}

/* Required (opt = 0) or optional (opt = 1, *out kept when absent) integer. */
static int get_u64(rd *r, const vs_json *obj, const char *path, const char *k, uint64_t max, uint64_t *out, int opt) {
  char p[320];
  pathf(p, sizeof p, "%s%s%s", path, *path ? "." : "", k);
  const vs_json *v = vs_json_get(obj, k);
  if (!v) return opt ? 0 : bad(r, p, NULL, "missing");
  return num_u64(r, v, p, max, out);
}

static int get_str(rd *r, const vs_json *obj, const char *path, const char *k, char *out, size_t cap) {
  const vs_json *v = need(r, obj, path, k, VS_JSON_STRING);
  if (!v) return -1;
  if (v->len >= cap) return bad(r, k, v, "string of %zu bytes is longer than %zu", v->len, cap - 1);
  memcpy(out, v->str, v->len + 1);
  return 0;
}

static int parse_hex_addr(const char *s, uint64_t *out) {
  if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !s[2]) return -1;
  uint64_t v = 0;
  size_t n = 0;
  for (const char *c = s + 2; *c; c++, n++) {
    unsigned d;
    if (*c >= '0' && *c <= '9') d = (unsigned)(*c - '0');
    else if (*c >= 'a' && *c <= 'f') d = (unsigned)(*c - 'a' + 10);
    else if (*c >= 'A' && *c <= 'F') d = (unsigned)(*c - 'A' + 10);
    else return -1;
    if (v >> 60) return -1;
    v = (v << 4) | d;
  }
  *out = v;
  return n <= 16 ? 0 : -1;
}

static int read_region(rd *r, const vs_json *jr, const char *path, vs_dump_card *c) {
  if (jr->type != VS_JSON_OBJECT) return bad(r, path, jr, "expected object, found %s", vs_json_type_name(jr->type));
  const vs_json *jb = need(r, jr, path, "base", VS_JSON_STRING);
  const vs_json *jk = need(r, jr, path, "kind", VS_JSON_STRING);
  const vs_json *jbl = need(r, jr, path, "blocks", VS_JSON_ARRAY);
  if (!jb || !jk || !jbl) return -1;
  uint64_t base, size = 0, class_size = 0;
  char p[320];
  pathf(p, sizeof p, "%s.base", path);
  if (parse_hex_addr(jb->str, &base)) return bad(r, p, jb, "expected a hex address like \"0x7f0000000000\"");
  if (get_u64(r, jr, path, "size", MAX_FIGURE, &size, 0) || get_u64(r, jr, path, "class_size", MAX_FIGURE, &class_size, 1))
    return -1;
  vs_dump_region_kind kind;
  pathf(p, sizeof p, "%s.kind", path);
  if (vs_dump_region_kind_parse(jk->str, &kind))
    return bad(r, p, jk, "unknown region kind \"%s\" (slab, chunk, vmm_range, dedicated, allocation)", jk->str);
  vs_dump_region *reg = vs_dump_card_add_region(c, base, size, kind, class_size);
  if (!reg) return bad(r, path, NULL, "out of memory");
  for (size_t i = 0; i < jbl->n; i++) {
    const vs_json *b = &jbl->items[i];
    pathf(p, sizeof p, "%s.blocks[%zu]", path, i);
    if (b->type != VS_JSON_OBJECT) return bad(r, p, b, "expected object, found %s", vs_json_type_name(b->type));
    uint64_t off, sz;
    const vs_json *js = need(r, b, p, "state", VS_JSON_STRING);
    if (!js || get_u64(r, b, p, "offset", MAX_FIGURE, &off, 0) || get_u64(r, b, p, "size", MAX_FIGURE, &sz, 0)) return -1;
    vs_dump_block_state st;
    if (vs_dump_block_state_parse(js->str, &st))
      return bad(r, p, js, "unknown block state \"%s\" (free, live, pending)", js->str);
    if (vs_dump_region_add_block(reg, off, sz, st)) return bad(r, p, NULL, "out of memory");
  }
  return 0;
}

static int read_card(rd *r, const vs_json *jc, const char *path, vs_dump *d) {
  if (jc->type != VS_JSON_OBJECT) return bad(r, path, jc, "expected object, found %s", vs_json_type_name(jc->type));
  uint64_t index;
  if (get_u64(r, jc, path, "index", 1023, &index, 0)) return -1;
  vs_dump_card *c = vs_dump_add_card(d, (int)index);
  if (!c) return bad(r, path, NULL, "out of memory");
  char p[320];
  if (get_str(r, jc, path, "arena", c->arena, sizeof c->arena)) return -1;
  if (strcmp(c->arena, "vmm") && strcmp(c->arena, "chunks") && strcmp(c->arena, "off")) {
    pathf(p, sizeof p, "%s.arena", path);
    return bad(r, p, vs_json_get(jc, "arena"), "unknown arena \"%s\" (vmm, chunks, off)", c->arena);
  }
  struct { const char *k; uint64_t *v; int opt; } figs[] = {
      {"capacity", &c->capacity, 0}, {"live_bytes", &c->live_bytes, 0}, {"live_count", &c->live_count, 0},
      {"peak_live_bytes", &c->peak_live_bytes, 0}, {"reserved_bytes", &c->reserved_bytes, 0},
      {"peak_reserved_bytes", &c->peak_reserved_bytes, 0}, {"internal_waste", &c->internal_waste, 0},
      {"free_bytes", &c->free_bytes, 0}, {"pending_bytes", &c->pending_bytes, 0},
      {"largest_free", &c->largest_free, 0}, {"requests", &c->requests, 1},
      {"served_from_cache", &c->served_from_cache, 1},
      /* 1.1: absent from 1.0 dumps (nothing spilled) */
      {"spilled_bytes", &c->spilled_bytes, 1}, {"peak_spilled_bytes", &c->peak_spilled_bytes, 1},
      {"spilled_count", &c->spilled_count, 1},
      /* 1.3: absent before (no driver pool figures) */
      {"pool_reserved_bytes", &c->pool_reserved_bytes, 1}, {"graph_reserved_bytes", &c->graph_reserved_bytes, 1}};
  for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++)
    if (get_u64(r, jc, path, figs[i].k, MAX_FIGURE, figs[i].v, figs[i].opt)) return -1;

  const vs_json *jf = need(r, jc, path, "external_fragmentation", VS_JSON_NUMBER);
  if (!jf) return -1;
  pathf(p, sizeof p, "%s.external_fragmentation", path);
  if (vs_json_double(jf, &c->external_fragmentation) || c->external_fragmentation < 0 || c->external_fragmentation > 1)
    return bad(r, p, jf, "expected a number from 0 to 1, found %s", jf->str);

  const vs_json *jd = need(r, jc, path, "driver_calls", VS_JSON_OBJECT);
  if (!jd) return -1;
  for (size_t i = 0; i < jd->n; i++) {
    pathf(p, sizeof p, "%s.driver_calls.%s", path, jd->keys[i]);
    uint64_t n;
    if (strlen(jd->keys[i]) >= sizeof c->calls->name) return bad(r, p, &jd->items[i], "name too long");
    if (num_u64(r, &jd->items[i], p, MAX_FIGURE, &n)) return -1;
    if (vs_dump_card_add_call(c, jd->keys[i], n)) return bad(r, p, NULL, "out of memory");
  }

  const vs_json *jh = need(r, jc, path, "free_histogram", VS_JSON_ARRAY);
  if (!jh) return -1;
  int seen[VS_DUMP_HIST_BUCKETS] = {0};
  for (size_t i = 0; i < jh->n; i++) {
    const vs_json *e = &jh->items[i];
    pathf(p, sizeof p, "%s.free_histogram[%zu]", path, i);
    if (e->type != VS_JSON_OBJECT) return bad(r, p, e, "expected object, found %s", vs_json_type_name(e->type));
    uint64_t lg, cnt, bytes;
    if (get_u64(r, e, p, "log2", VS_DUMP_HIST_BUCKETS - 1, &lg, 0) || get_u64(r, e, p, "count", MAX_FIGURE, &cnt, 0) ||
        get_u64(r, e, p, "bytes", MAX_FIGURE, &bytes, 0))
      return -1;
    if (seen[lg]++) return bad(r, p, e, "bucket log2 = %llu appears twice", (unsigned long long)lg);
    c->hist_count[lg] = cnt;
    c->hist_bytes[lg] = bytes;
  }

  const vs_json *js = need(r, jc, path, "size_classes", VS_JSON_ARRAY);
  if (!js) return -1;
  for (size_t i = 0; i < js->n; i++) {
    const vs_json *e = &js->items[i];
    pathf(p, sizeof p, "%s.size_classes[%zu]", path, i);
    if (e->type != VS_JSON_OBJECT) return bad(r, p, e, "expected object, found %s", vs_json_type_name(e->type));
    uint64_t sz, live, slots;
    if (get_u64(r, e, p, "size", MAX_FIGURE, &sz, 0) || get_u64(r, e, p, "live", MAX_FIGURE, &live, 0) ||
        get_u64(r, e, p, "slots", MAX_FIGURE, &slots, 0))
      return -1;
    if (vs_dump_card_add_class(c, sz, live, slots)) return bad(r, p, NULL, "out of memory");
  }

  const vs_json *jt = vs_json_get(jc, "tenant");
  if (jt) {
    pathf(p, sizeof p, "%s.tenant", path);
    if (jt->type != VS_JSON_OBJECT) return bad(r, p, jt, "expected object, found %s", vs_json_type_name(jt->type));
    c->tenant.present = 1;
    const vs_json *jl = vs_json_get(jt, "limit");
    c->tenant.limit = VS_DUMP_UNLIMITED;
    if (get_u64(r, jt, p, "reserve", MAX_FIGURE, &c->tenant.reserve, 0) ||
        get_u64(r, jt, p, "usage", MAX_FIGURE, &c->tenant.usage, 0) ||
        get_u64(r, jt, p, "spilled", MAX_FIGURE, &c->tenant.spilled, 1) ||   /* 1.1 */
        get_u64(r, jt, p, "overhead", MAX_FIGURE, &c->tenant.overhead, 1))   /* 1.2 */
      return -1;
    const vs_json *jm = vs_json_get(jt, "spill_max");
    if (jm && jm->type != VS_JSON_NULL) {
      char pm[340];
      pathf(pm, sizeof pm, "%s.spill_max", p);
      if (num_u64(r, jm, pm, MAX_FIGURE, &c->tenant.spill_max)) return -1;
    }
    if (!jl) return bad(r, p, jt, "limit missing (null when there is none)");
    if (jl->type != VS_JSON_NULL) {
      char pl[340];
      pathf(pl, sizeof pl, "%s.limit", p);
      if (num_u64(r, jl, pl, MAX_FIGURE, &c->tenant.limit)) return -1;
    }
  }

  const vs_json *jr = need(r, jc, path, "regions", VS_JSON_ARRAY);
  if (!jr) return -1;
  for (size_t i = 0; i < jr->n; i++) {
    pathf(p, sizeof p, "%s.regions[%zu]", path, i);
    if (read_region(r, &jr->items[i], p, c)) return -1;
  }

  const vs_json *jtl = need(r, jc, path, "timeline", VS_JSON_ARRAY);
  if (!jtl) return -1;
  if (jtl->n) {
    c->samples = calloc(jtl->n, sizeof *c->samples);
    if (!c->samples) return bad(r, path, NULL, "out of memory");
  }
  for (size_t i = 0; i < jtl->n; i++) {
    const vs_json *e = &jtl->items[i];
    pathf(p, sizeof p, "%s.timeline[%zu]", path, i);
    if (e->type != VS_JSON_OBJECT) return bad(r, p, e, "expected object, found %s", vs_json_type_name(e->type));
    vs_dump_sample *s = &c->samples[i];
    if (get_u64(r, e, p, "t_ms", MAX_FIGURE, &s->t_ms, 0) || get_u64(r, e, p, "live", MAX_FIGURE, &s->live, 0) ||
        get_u64(r, e, p, "reserved", MAX_FIGURE, &s->reserved, 0) ||
        get_u64(r, e, p, "largest_free", MAX_FIGURE, &s->largest_free, 0) ||
        get_u64(r, e, p, "spilled", MAX_FIGURE, &s->spilled, 1))   /* 1.1 */
      return -1;
    if (i && s->t_ms < c->samples[i - 1].t_ms) return bad(r, p, e, "samples out of time order");
    c->nsamples = i + 1;
  }
  return 0;
}

static int read_doc(rd *r, const vs_json *root, vs_dump *d) {
  if (root->type != VS_JSON_OBJECT)
    return bad(r, "(document)", root, "expected an object, found %s", vs_json_type_name(root->type));
  const vs_json *jv = need(r, root, "", "schema_version", VS_JSON_STRING);
  if (!jv) return -1;
  unsigned major, minor;
  char tail;
  if (sscanf(jv->str, "%u.%u%c", &major, &minor, &tail) != 2 || jv->str[0] < '0' || jv->str[0] > '9')
    return bad(r, "schema_version", jv, "expected \"MAJOR.MINOR\", found \"%s\"", jv->str);
  if (major != VS_DUMP_SCHEMA_MAJOR)
    return bad(r, "schema_version", jv, "version %u.%u is not readable by this tool (reads %u.x)", major, minor,
               VS_DUMP_SCHEMA_MAJOR);
  d->schema_major = major;
  d->schema_minor = minor;
  if (get_u64(r, root, "", "time_unix_ms", MAX_FIGURE, &d->time_unix_ms, 0)) return -1;
  const vs_json *jp = need(r, root, "", "process", VS_JSON_OBJECT);
  if (!jp) return -1;
  uint64_t pid;
  if (get_u64(r, jp, "process", "pid", INT32_MAX, &pid, 0)) return -1;
  d->pid = (int64_t)pid;
  if (get_str(r, jp, "process", "exe", d->exe, sizeof d->exe)) return -1;
  if (get_str(r, root, "", "tenant", d->tenant, sizeof d->tenant)) return -1;
  if (vs_json_get(root, "reason") && get_str(r, root, "", "reason", d->reason, sizeof d->reason)) return -1;
  const vs_json *jc = need(r, root, "", "cards", VS_JSON_ARRAY);
  if (!jc) return -1;
  for (size_t i = 0; i < jc->n; i++) {
    char p[32];
    pathf(p, sizeof p, "cards[%zu]", i);
    if (read_card(r, &jc->items[i], p, d)) return -1;
  }
  return 0;
}

int vs_dump_from_json(const char *text, size_t len, vs_dump *out, char *err, size_t errlen) {
  vs_json root;
  vs_dump_init(out, 0, "", "", "manual", 0);
  if (vs_json_parse(text, len, &root, err, errlen)) return -1;
  rd r = {err, errlen};
  int rc = read_doc(&r, &root, out);
  vs_json_free(&root);
  if (rc == 0) {
    char why[256];
    if (vs_dump_check(out, why, sizeof why)) {
      if (err && errlen) snprintf(err, errlen, "inconsistent memory map: %s", why);
      rc = -1;
    }
  }
  if (rc) vs_dump_free(out);
  return rc;
}

int vs_dump_read_file(const char *path, vs_dump *out, char *err, size_t errlen) {
  int fd = vs_plat_open_regular(path, O_RDONLY, 0);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open: %s", vs_plat_open_strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "not a regular file");
    close(fd);
    return -1;
  }
  if ((uint64_t)st.st_size > VS_DUMP_MAX_FILE) {
    snprintf(err, errlen, "file of %lld bytes is larger than a dump can be", (long long)st.st_size);
    close(fd);
    return -1;
  }
  size_t len = (size_t)st.st_size, got = 0;
  char *text = malloc(len + 1);
  if (!text) {
    snprintf(err, errlen, "out of memory reading %zu bytes", len);
    close(fd);
    return -1;
  }
  while (got < len) {
    ssize_t n = read(fd, text + got, len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (got == 0) {
    free(text);
    snprintf(err, errlen, "empty file");
    return -1;
  }
  int rc = vs_dump_from_json(text, got, out, err, errlen);
  free(text);
  return rc;
}

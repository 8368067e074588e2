/* The diff view: what changed between two dumps ("day 1 vs day 60"). */
#include <string.h>
#include <time.h>

#include "render.h"
#include "timeutil.h"

static void signed_bytes(char *buf, size_t len, uint64_t a, uint64_t b) {
  char t[32];
  if (b >= a) snprintf(buf, len, "+%s", vs_fmt_short(b - a, t, sizeof t));
  else snprintf(buf, len, "-%s", vs_fmt_short(a - b, t, sizeof t));
}

static void row_bytes(FILE *out, const char *name, uint64_t a, uint64_t b) {
  char x[32], y[32], d[40];
  signed_bytes(d, sizeof d, a, b);
  fprintf(out, "  %-24s %12s -> %-12s %12s%s\n", name, vs_fmt_short(a, x, sizeof x), vs_fmt_short(b, y, sizeof y), d,
          a == b ? "" : (b > a ? "  up" : "  down"));
}

static void row_count(FILE *out, const char *name, uint64_t a, uint64_t b) {
  fprintf(out, "  %-24s %12llu -> %-12llu %+12lld\n", name, (unsigned long long)a, (unsigned long long)b,
          (long long)(b - a));
}

static const vs_dump_card *find_card(const vs_dump *d, int index) {
  for (size_t i = 0; i < d->ncards; i++)
    if (d->cards[i].index == index) return &d->cards[i];
  return NULL;
}

static const vs_dump_class *find_class(const vs_dump_card *c, uint64_t size) {
  for (size_t i = 0; i < c->nclasses; i++)
    if (c->classes[i].size == size) return &c->classes[i];
  return NULL;
}

static uint64_t find_call(const vs_dump_card *c, const char *name, int *found) {
  for (size_t i = 0; i < c->ncalls; i++)
    if (!strcmp(c->calls[i].name, name)) {
      if (found) *found = 1;
      return c->calls[i].count;
    }
  return 0;
}

static void diff_card(FILE *out, const vs_dump_card *a, const vs_dump_card *b) {
  static const vs_dump_card empty;
  if (!a) a = &empty;
  if (!b) b = &empty;
  fprintf(out, "\ncard %d%s%s\n", a != &empty ? a->index : b->index, a == &empty ? " (only in B)" : "",
          b == &empty ? " (only in A)" : "");
  fprintf(out, "  %-24s %12s    %-12s %12s\n", "", "A", "B", "B - A");
  row_bytes(out, "reserved", a->reserved_bytes, b->reserved_bytes);
  row_bytes(out, "live", a->live_bytes, b->live_bytes);
  row_count(out, "live allocations", a->live_count, b->live_count);
  row_bytes(out, "peak reserved", a->peak_reserved_bytes, b->peak_reserved_bytes);
  row_bytes(out, "peak live", a->peak_live_bytes, b->peak_live_bytes);
  row_bytes(out, "free (reserved - live)", a->free_bytes, b->free_bytes);
  row_bytes(out, "largest free extent", a->largest_free, b->largest_free);
  row_bytes(out, "internal waste", a->internal_waste, b->internal_waste);
  char fa[16], fb[16];
  snprintf(fa, sizeof fa, "%.1f%%", 100 * a->external_fragmentation);
  snprintf(fb, sizeof fb, "%.1f%%", 100 * b->external_fragmentation);
  fprintf(out, "  %-24s %12s -> %-12s %+8.1f pts%s\n", "external fragmentation", fa, fb,
          100 * (b->external_fragmentation - a->external_fragmentation),
          b->external_fragmentation > a->external_fragmentation + 0.0005   ? "  up"
          : b->external_fragmentation < a->external_fragmentation - 0.0005 ? "  down"
                                                                           : "");
  row_count(out, "regions", a->nregions, b->nregions);
  /* 1.3: the driver's pools, where either side has them */
  if (a->pool_reserved_bytes || b->pool_reserved_bytes)
    row_bytes(out, "driver memory pools", a->pool_reserved_bytes, b->pool_reserved_bytes);
  if (a->graph_reserved_bytes || b->graph_reserved_bytes)
    row_bytes(out, "graph memory pool", a->graph_reserved_bytes, b->graph_reserved_bytes);
  if (a->reserved_bytes && b->reserved_bytes && a->live_bytes && b->live_bytes)
    fprintf(out, "  %-24s %12.3f -> %-12.3f\n", "reserved / live", (double)a->reserved_bytes / (double)a->live_bytes,
            (double)b->reserved_bytes / (double)b->live_bytes);

  fprintf(out, "\n  free extents by size        count A -> B          bytes A -> B\n");
  int any = 0;
  for (int i = 0; i < VS_DUMP_HIST_BUCKETS; i++) {
    if (!a->hist_count[i] && !b->hist_count[i]) continue;
    any = 1;
    char lo[32], hi[32], x[32], y[32];
    fprintf(out, "    %8s - %-8s %7llu -> %-7llu %10s -> %-10s %s\n", vs_fmt_short(1ull << i, lo, sizeof lo),
            vs_fmt_short(1ull << (i + 1), hi, sizeof hi), (unsigned long long)a->hist_count[i],
            (unsigned long long)b->hist_count[i], vs_fmt_short(a->hist_bytes[i], x, sizeof x),
            vs_fmt_short(b->hist_bytes[i], y, sizeof y),
            b->hist_bytes[i] > a->hist_bytes[i] ? "more" : b->hist_bytes[i] < a->hist_bytes[i] ? "less" : "");
  }
  if (!any) fprintf(out, "    (no free extents in either)\n");

  if (a->nclasses || b->nclasses) {
    fprintf(out, "\n  size classes       live A -> B        slots A -> B\n");
    for (int pass = 0; pass < 2; pass++) {
      const vs_dump_card *p = pass ? b : a, *q = pass ? a : b;
      for (size_t i = 0; i < p->nclasses; i++) {
        const vs_dump_class *k = &p->classes[i], *o = find_class(q, k->size);
        if (pass && o) continue;   /* printed in the first pass */
        const vs_dump_class *ka = pass ? o : k, *kb = pass ? k : o;
        /* A class with no slab in either dump says nothing. */
        if ((!ka || (!ka->live && !ka->slots)) && (!kb || (!kb->live && !kb->slots))) continue;
        char s[32];
        fprintf(out, "    %10s   %7llu -> %-7llu %7llu -> %-7llu\n", vs_fmt_short(k->size, s, sizeof s),
                (unsigned long long)(ka ? ka->live : 0), (unsigned long long)(kb ? kb->live : 0),
                (unsigned long long)(ka ? ka->slots : 0), (unsigned long long)(kb ? kb->slots : 0));
      }
    }
  }

  if (a->ncalls || b->ncalls) {
    fprintf(out, "\n  driver calls           A -> B\n");
    for (int pass = 0; pass < 2; pass++) {
      const vs_dump_card *p = pass ? b : a, *q = pass ? a : b;
      for (size_t i = 0; i < p->ncalls; i++) {
        int in_q = 0;
        uint64_t other = find_call(q, p->calls[i].name, &in_q);
        if (pass && in_q) continue;
        uint64_t va = pass ? other : p->calls[i].count, vb = pass ? p->calls[i].count : other;
        fprintf(out, "    %-20s %8llu -> %-8llu %+lld\n", p->calls[i].name, (unsigned long long)va,
                (unsigned long long)vb, (long long)(vb - va));
      }
    }
  }
}

static void when(uint64_t ms, char *buf, size_t len) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  vs_plat_gmtime(t, &tm);
  strftime(buf, len, "%Y-%m-%d %H:%M UTC", &tm);
}

int vs_render_diff(FILE *out, const vs_dump *a, const vs_dump *b) {
  char wa[40], wb[40];
  when(a->time_unix_ms, wa, sizeof wa);
  when(b->time_unix_ms, wb, sizeof wb);
  double hours = ((double)b->time_unix_ms - (double)a->time_unix_ms) / 3600000.0;
  fprintf(out, "vramshim: diff of A = pid %lld (%s, tenant %s) and B = pid %lld (%s, tenant %s), %.1f %s apart\n",
          (long long)a->pid, wa, a->tenant, (long long)b->pid, wb, b->tenant, hours >= 48 || hours <= -48 ? hours / 24 : hours,
          hours >= 48 || hours <= -48 ? "days" : "hours");
  for (size_t i = 0; i < a->ncards; i++) diff_card(out, &a->cards[i], find_card(b, a->cards[i].index));
  for (size_t i = 0; i < b->ncards; i++)
    if (!find_card(a, b->cards[i].index)) diff_card(out, NULL, &b->cards[i]);
  return ferror(out) ? -1 : 0;
}

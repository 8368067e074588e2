/* The text view of a dump. */
#include <string.h>
#include <time.h>

#include "log.h"
#include "text_escape.h"
#include "render.h"
#include "timeutil.h"

/* arena = off: allocation lines shown before the rest is summed up. */
#define VS_TEXT_MAX_ALLOCS 40

const char *vs_fmt_short(uint64_t bytes, char *buf, size_t len) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    u++;
  }
  if (u == 0) snprintf(buf, len, "%llu B", (unsigned long long)bytes);
  else if (v >= 100) snprintf(buf, len, "%.0f %s", v, units[u]);
  else if (v >= 10) snprintf(buf, len, "%.1f %s", v, units[u]);
  else snprintf(buf, len, "%.2f %s", v, units[u]);
  return buf;
}

uint64_t vs_render_map_line(const vs_dump_region *r, char *buf, size_t width) {
  if (width > VS_MAP_WIDTH) width = VS_MAP_WIDTH;
  if (width == 0 || r->size == 0) {
    buf[0] = 0;
    return 0;
  }
  /* Cell: the smallest power of two (>= 512 B) that fits the region in width. */
  uint64_t cell = 512;
  while (r->size / cell + (r->size % cell != 0) > width) cell *= 2;
  size_t ncell = (size_t)(r->size / cell + (r->size % cell != 0));
  uint64_t live[VS_MAP_WIDTH] = {0}, pend[VS_MAP_WIDTH] = {0}, covered[VS_MAP_WIDTH] = {0};
  for (size_t j = 0; j < r->nblocks; j++) {
    const vs_dump_block *b = &r->blocks[j];
    uint64_t s = b->offset, e = b->offset + b->size;
    if (s >= r->size) continue;
    if (e > r->size) e = r->size;
    for (uint64_t c = s / cell; c < ncell && c * cell < e; c++) {
      uint64_t cs = c * cell, ce = cs + cell;
      uint64_t part = (e < ce ? e : ce) - (s > cs ? s : cs);
      covered[c] += part;
      if (b->state == VS_DUMP_LIVE) live[c] += part;
      else if (b->state == VS_DUMP_PENDING) pend[c] += part;
    }
  }
  for (size_t c = 0; c < ncell; c++) {
    uint64_t csize = (c + 1 == ncell && r->size % cell) ? r->size % cell : cell;
    char ch = ' ';
    if (live[c] * 2 >= csize && live[c]) ch = '#';
    else if (live[c]) ch = '+';
    else if (pend[c]) ch = '~';
    else if (covered[c]) ch = '.';
    buf[c] = ch;
  }
  buf[ncell] = 0;
  return cell;
}

/* One line per series over the timeline, each scaled from its own lowest
 * to its highest value (eight levels), so a slow drift shows as a slope;
 * at most 60 columns, each the mean of its samples. */
static uint64_t series(const vs_dump_sample *s, int k) {
  return k == 0 ? s->reserved : k == 1 ? s->live : s->largest_free;
}

static void sparklines(FILE *out, const vs_dump_card *c) {
  static const char levels[] = "_.-~=+*#";
  static const char *const names[] = {"reserved", "live", "largest free"};
  if (c->nsamples < 2) return;
  size_t cols = c->nsamples < 60 ? c->nsamples : 60;
  for (int k = 0; k < 3; k++) {
    double v[60], lo = 0, hi = 0;
    for (size_t col = 0; col < cols; col++) {
      size_t a = col * c->nsamples / cols, b = (col + 1) * c->nsamples / cols;
      double sum = 0;
      for (size_t i = a; i < b; i++) sum += (double)series(&c->samples[i], k);
      v[col] = sum / (double)(b - a);
      if (!col || v[col] < lo) lo = v[col];
      if (!col || v[col] > hi) hi = v[col];
    }
    char line[61], l1[32], l2[32];
    for (size_t col = 0; col < cols; col++) {
      int lv = hi > lo ? (int)((v[col] - lo) / (hi - lo) * 7.0 + 0.5) : 0;
      line[col] = levels[lv < 0 ? 0 : lv > 7 ? 7 : lv];
    }
    line[cols] = 0;
    fprintf(out, "    %-12s |%s| %s .. %s\n", names[k], line, vs_fmt_short((uint64_t)lo, l1, sizeof l1),
            vs_fmt_short((uint64_t)hi, l2, sizeof l2));
  }
}

static void print_card(FILE *out, const vs_dump_card *c) {
  char a[32], b[32], x[32];
  char arena[4 * sizeof c->arena];
  fprintf(out, "\ncard %d (arena %s, capacity %s)\n", c->index, vs_text_escape(c->arena, arena, sizeof arena),
          c->capacity ? vs_fmt_short(c->capacity, a, sizeof a) : "unknown");
  fprintf(out, "  live        %10s in %llu allocations (peak %s)\n", vs_fmt_short(c->live_bytes, a, sizeof a),
          (unsigned long long)c->live_count, vs_fmt_short(c->peak_live_bytes, b, sizeof b));
  fprintf(out, "  reserved    %10s (peak %s)\n", vs_fmt_short(c->reserved_bytes, a, sizeof a),
          vs_fmt_short(c->peak_reserved_bytes, b, sizeof b));
  uint64_t extents = 0;
  for (int i = 0; i < VS_DUMP_HIST_BUCKETS; i++) extents += c->hist_count[i];
  fprintf(out, "  free        %10s in %llu extents, largest %s, pending %s\n", vs_fmt_short(c->free_bytes, a, sizeof a),
          (unsigned long long)extents, vs_fmt_short(c->largest_free, b, sizeof b),
          vs_fmt_short(c->pending_bytes, x, sizeof x));
  fprintf(out, "  external fragmentation %.1f%% (1 - largest free / free), internal waste %s\n",
          100.0 * c->external_fragmentation, vs_fmt_short(c->internal_waste, a, sizeof a));
  /* on_limit = spill: host memory served in place of device memory (not in the figures above) */
  if (c->spilled_bytes || c->peak_spilled_bytes)
    fprintf(out, "  spilled     %10s to host memory in %llu blocks (peak %s)\n", vs_fmt_short(c->spilled_bytes, a, sizeof a),
            (unsigned long long)c->spilled_count, vs_fmt_short(c->peak_spilled_bytes, b, sizeof b));
  /* The driver's pools: memory the process holds through the driver, charged to its tenant. */
  if (c->pool_reserved_bytes)
    fprintf(out, "  pools       %10s reserved by the driver's memory pools (their blocks are in live and reserved)\n",
            vs_fmt_short(c->pool_reserved_bytes, a, sizeof a));
  if (c->graph_reserved_bytes)
    fprintf(out, "  graphs      %10s reserved by the graph memory pool for graphs' allocation nodes "
                 "(not in reserved)\n",
            vs_fmt_short(c->graph_reserved_bytes, a, sizeof a));
  if (c->requests)
    fprintf(out, "  requests    %llu, served from cache %.1f%%\n", (unsigned long long)c->requests,
            100.0 * (double)c->served_from_cache / (double)c->requests);
  if (c->tenant.present) {
    fprintf(out, "  tenant      usage %s, reserve %s, limit %s\n", vs_fmt_short(c->tenant.usage, a, sizeof a),
            vs_fmt_short(c->tenant.reserve, b, sizeof b),
            c->tenant.limit == VS_DUMP_UNLIMITED ? "none" : vs_fmt_short(c->tenant.limit, x, sizeof x));
    if (c->tenant.spill_max)
      fprintf(out, "  tenant      spilled %s of at most %s (all its processes)\n", vs_fmt_short(c->tenant.spilled, a, sizeof a),
              vs_fmt_short(c->tenant.spill_max, b, sizeof b));
    if (c->tenant.overhead)
      fprintf(out, "  tenant      overhead %s of its usage: what its processes hold beyond their allocations "
                   "(contexts, modules, workspaces)\n", vs_fmt_short(c->tenant.overhead, a, sizeof a));
  }
  if (c->ncalls) {
    fprintf(out, "  driver calls");
    for (size_t i = 0; i < c->ncalls; i++)
      fprintf(out, "%s %s %llu", i ? "," : "", c->calls[i].name, (unsigned long long)c->calls[i].count);
    fprintf(out, "\n");
  }

  uint64_t maxb = 0;
  for (int i = 0; i < VS_DUMP_HIST_BUCKETS; i++)
    if (c->hist_bytes[i] > maxb) maxb = c->hist_bytes[i];
  fprintf(out, "\n  free extents by size     count        bytes\n");
  if (!maxb) fprintf(out, "    (none)\n");
  for (int i = 0; i < VS_DUMP_HIST_BUCKETS; i++) {
    if (!c->hist_count[i]) continue;
    char lo[32], hi[32], bar[41];
    int n = (int)(40.0 * (double)c->hist_bytes[i] / (double)maxb + 0.5);
    if (n < 1) n = 1;
    memset(bar, '#', (size_t)n);
    bar[n] = 0;
    fprintf(out, "    %8s - %-8s %7llu %12s  %s\n", vs_fmt_short(1ull << i, lo, sizeof lo),
            i + 1 < 64 ? vs_fmt_short(1ull << (i + 1), hi, sizeof hi) : "", (unsigned long long)c->hist_count[i],
            vs_fmt_short(c->hist_bytes[i], a, sizeof a), bar);
  }

  if (c->nclasses) {
    fprintf(out, "\n  size classes     live / slots\n");
    for (size_t i = 0; i < c->nclasses; i++) {
      const vs_dump_class *k = &c->classes[i];
      if (!k->slots && !k->live) continue;   /* a class no slab serves now */
      fprintf(out, "    %10s   %7llu / %-7llu %5.1f%%\n", vs_fmt_short(k->size, a, sizeof a),
              (unsigned long long)k->live, (unsigned long long)k->slots,
              k->slots ? 100.0 * (double)k->live / (double)k->slots : 0.0);
    }
  }

  fprintf(out, "\n  memory map: %zu regions  ('#' live, '+' partly live, '~' pending, '.' free)\n", c->nregions);
  size_t shown_allocs = 0, hidden = 0;
  uint64_t hidden_bytes = 0;
  for (size_t i = 0; i < c->nregions; i++) {
    const vs_dump_region *r = &c->regions[i];
    /* arena = off: thousands of one-block regions say little line by line. */
    if (r->kind == VS_DUMP_REGION_ALLOCATION && shown_allocs++ >= VS_TEXT_MAX_ALLOCS) {
      hidden++;
      hidden_bytes += r->size;
      continue;
    }
    char line[VS_MAP_WIDTH + 1];
    uint64_t cell = vs_render_map_line(r, line, VS_MAP_WIDTH);
    fprintf(out, "    0x%012llx %-10s %9s  1 char = %-8s |%s|\n", (unsigned long long)r->base,
            vs_dump_region_kind_name(r->kind), vs_fmt_short(r->size, a, sizeof a), vs_fmt_short(cell, b, sizeof b),
            line);
  }

  if (hidden)
    fprintf(out, "    ... and %zu more allocations, %s (--json lists them all)\n", hidden,
            vs_fmt_short(hidden_bytes, a, sizeof a));

  if (c->nsamples) {
    const vs_dump_sample *f = &c->samples[0], *l = &c->samples[c->nsamples - 1];
    char a2[32], b2[32], c2[32];
    fprintf(out, "\n  timeline: %zu samples over %.1f min\n", c->nsamples, (double)(l->t_ms - f->t_ms) / 60000.0);
    fprintf(out, "    live %s -> %s, reserved %s -> %s, largest free %s -> %s\n", vs_fmt_short(f->live, a, sizeof a),
            vs_fmt_short(l->live, a2, sizeof a2), vs_fmt_short(f->reserved, b, sizeof b),
            vs_fmt_short(l->reserved, b2, sizeof b2), vs_fmt_short(f->largest_free, x, sizeof x),
            vs_fmt_short(l->largest_free, c2, sizeof c2));
    if (f->spilled || l->spilled)
      fprintf(out, "    spilled %s -> %s\n", vs_fmt_short(f->spilled, a, sizeof a), vs_fmt_short(l->spilled, a2, sizeof a2));
    sparklines(out, c);
  }
}

int vs_render_text(FILE *out, const vs_dump *d) {
  time_t t = (time_t)(d->time_unix_ms / 1000);
  struct tm tm;
  char when[40];
  vs_plat_gmtime(t, &tm);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  /* names read from the file: control characters escaped (text_escape.h) */
  char exe[4 * sizeof d->exe], tenant[4 * sizeof d->tenant], reason[4 * sizeof d->reason];
  fprintf(out, "vramshim: dump of pid %lld (%s), tenant %s, %s, reason %s, schema %u.%u\n", (long long)d->pid,
          d->exe[0] ? vs_text_escape(d->exe, exe, sizeof exe) : "?",
          d->tenant[0] ? vs_text_escape(d->tenant, tenant, sizeof tenant) : "?", when,
          vs_text_escape(d->reason, reason, sizeof reason), d->schema_major, d->schema_minor);
  if (!d->ncards) fprintf(out, "\n(no cards in use)\n");
  for (size_t i = 0; i < d->ncards; i++) print_card(out, &d->cards[i]);
  return ferror(out) ? -1 : 0;
}

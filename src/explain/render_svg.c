/* The SVG picture of a dump: per card a summary line, the memory map (one
 * row per region, every block a rect, free space neutral grey) and the
 * timeline plot. Coordinates are written locale-free. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "render.h"
#include "sbuf.h"
#include "timeutil.h"

#define W 1200
#define X0 280.0          /* left edge of map bars and plot */
#define X1 1170.0         /* right edge */
#define ROW_H 16.0
#define ROW_GAP 6.0
#define PLOT_H 220.0

#define C_LIVE "#3b6fb6"
#define C_PEND "#f0a030"
#define C_FREE "#d4d4d4"
#define C_RES "#222222"
#define C_LFREE "#3a9a4a"

static void num(vs_sbuf *b, double v) { vs_sb_fixed(b, v, 1); }

static void text(vs_sbuf *b, double x, double y, const char *cls, const char *anchor, const char *s) {
  vs_sb_puts(b, "<text x=\"");
  num(b, x);
  vs_sb_puts(b, "\" y=\"");
  num(b, y);
  vs_sb_printf(b, "\" class=\"%s\"", cls);
  if (anchor) vs_sb_printf(b, " text-anchor=\"%s\"", anchor);
  vs_sb_puts(b, ">");
  vs_sb_xml_str(b, s);
  vs_sb_puts(b, "</text>\n");
}

static void rect(vs_sbuf *b, const char *cls, double x, double y, double w, double h, const char *title) {
  vs_sb_printf(b, "<rect class=\"%s\" x=\"", cls);
  num(b, x);
  vs_sb_puts(b, "\" y=\"");
  num(b, y);
  vs_sb_puts(b, "\" width=\"");
  vs_sb_fixed(b, w, 2);
  vs_sb_puts(b, "\" height=\"");
  num(b, h);
  if (title) {
    vs_sb_puts(b, "\"><title>");
    vs_sb_xml_str(b, title);
    vs_sb_puts(b, "</title></rect>\n");
  } else {
    vs_sb_puts(b, "\"/>\n");
  }
}

static void line(vs_sbuf *b, const char *cls, double x1, double y1, double x2, double y2) {
  vs_sb_printf(b, "<line class=\"%s\" x1=\"", cls);
  num(b, x1);
  vs_sb_puts(b, "\" y1=\"");
  num(b, y1);
  vs_sb_puts(b, "\" x2=\"");
  num(b, x2);
  vs_sb_puts(b, "\" y2=\"");
  num(b, y2);
  vs_sb_puts(b, "\"/>\n");
}

static double draw_legend(vs_sbuf *b, double y) {
  static const struct { const char *cls, *label; } items[] = {
      {"key live", "live (in use)"}, {"key pending", "pending (freed, waiting for sync)"},
      {"key free", "free (reserved, unused)"}, {"key region", "region outline (slab, chunk, VMM range, allocation)"}};
  double x = 20;
  for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
    rect(b, items[i].cls, x, y - 11, 14, 14, NULL);
    text(b, x + 20, y, "legend", NULL, items[i].label);
    x += 20 + 7.0 * (double)strlen(items[i].label) + 30;
  }
  return y + 22;
}

static const char *block_class(vs_dump_block_state st) {
  return st == VS_DUMP_LIVE ? "blk live" : st == VS_DUMP_PENDING ? "blk pending" : "blk free";
}

static void scale_axis(vs_sbuf *b, double y, uint64_t maxsize, const char *what) {
  char s1[32];
  line(b, "tick", X0, y, X1, y);
  for (int i = 0; i <= 4; i++) {
    double gx = X0 + (X1 - X0) * i / 4.0;
    line(b, "tick", gx, y, gx, y + 5);
    text(b, gx, y + 17, "axis", i == 0 ? "start" : i == 4 ? "end" : "middle",
         vs_fmt_short((uint64_t)((double)maxsize * i / 4.0), s1, sizeof s1));
  }
  text(b, X0 - 8, y + 17, "axis", "end", what);
}

static int cmp_base(const void *a, const void *b) {
  const vs_dump_region *x = *(vs_dump_region *const *)a, *y = *(vs_dump_region *const *)b;
  return x->base < y->base ? -1 : x->base > y->base;
}

/* Rows of regions (one per region, address order) at one shared scale: the
 * section's largest region spans the full width. A region narrower than
 * 40 px is widened to stay readable and marked with '*'. */
static double draw_rows(vs_sbuf *b, const vs_dump_region **v, size_t n, const char *heading, double y) {
  char s1[32], s2[32], title[160];
  uint64_t maxsize = 0;
  int widened = 0;
  for (size_t i = 0; i < n; i++)
    if (v[i]->size > maxsize) maxsize = v[i]->size;
  text(b, 20, y + 4, "h4", NULL, heading);
  y += 12;
  for (size_t i = 0; i < n; i++) {
    const vs_dump_region *r = v[i];
    double width = (X1 - X0) * (double)r->size / (double)maxsize;
    int wide = width < 40;
    if (wide) width = 40, widened = 1;
    double scale = width / (double)r->size;
    char label[96], kind[48];
    if (r->kind == VS_DUMP_REGION_SLAB && r->class_size)
      snprintf(kind, sizeof kind, "slab[%s]", vs_fmt_short(r->class_size, s2, sizeof s2));
    else
      snprintf(kind, sizeof kind, "%s", vs_dump_region_kind_name(r->kind));
    snprintf(label, sizeof label, "0x%llx %s %s%s", (unsigned long long)r->base, kind,
             vs_fmt_short(r->size, s1, sizeof s1), wide ? "*" : "");
    text(b, X0 - 8, y + ROW_H - 4, "rlabel", "end", label);
    snprintf(title, sizeof title, "%s at 0x%llx, %s", vs_dump_region_kind_name(r->kind), (unsigned long long)r->base,
             vs_fmt_short(r->size, s1, sizeof s1));
    rect(b, "region", X0, y, width, ROW_H, title);
    for (size_t j = 0; j < r->nblocks; j++) {
      const vs_dump_block *k = &r->blocks[j];
      double bw = (double)k->size * scale;
      snprintf(title, sizeof title, "%s block at +%s, %s", vs_dump_block_state_name(k->state),
               vs_fmt_short(k->offset, s1, sizeof s1), vs_fmt_short(k->size, s2, sizeof s2));
      rect(b, block_class(k->state), X0 + (double)k->offset * scale, y, bw < 0.6 ? 0.6 : bw, ROW_H, title);
    }
    y += ROW_H + ROW_GAP;
  }
  scale_axis(b, y, maxsize, widened ? "offset in region (* widened)" : "offset in region");
  return y + 30;
}

/* arena = off: each allocation is its own region, possibly thousands. They
 * are drawn end to end in address order as one strip, wrapped over rows,
 * each allocation's width in proportion to its size; an allocation that
 * wraps continues on the next row ("blk live cont"). */
static double draw_strip(vs_sbuf *b, const vs_dump_region **v, size_t n, double y) {
  char s1[32], s2[32], title[160];
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) total += v[i]->size;
  size_t rows = n < 8 ? 1 : n < 200 ? 4 : 12;
  double per_row = (double)total / (double)rows, full = X1 - X0;
  snprintf(title, sizeof title, "%zu allocations end to end in address order, %s in all (arena off: one region each)",
           n, vs_fmt_short(total, s1, sizeof s1));
  text(b, 20, y + 4, "h4", NULL, title);
  y += 12;
  double pos = 0;   /* bytes before this allocation in the strip */
  for (size_t i = 0; i < n; i++) {
    const vs_dump_region *r = v[i];
    double start = pos, end = pos + (double)r->size;
    snprintf(title, sizeof title, "allocation at 0x%llx, %s", (unsigned long long)r->base,
             vs_fmt_short(r->size, s2, sizeof s2));
    for (int piece = 0; start < end - 1e-9; piece++) {
      size_t row = (size_t)(start / per_row);
      if (row >= rows) row = rows - 1;
      double row_end = (double)(row + 1) * per_row, stop = end < row_end || row + 1 == rows ? end : row_end;
      double x = X0 + (start - (double)row * per_row) / per_row * full, w = (stop - start) / per_row * full;
      rect(b, piece ? "blk live cont" : "blk live", x, y + (double)row * (ROW_H + ROW_GAP), w < 0.6 ? 0.6 : w, ROW_H,
           title);
      start = stop;
    }
    pos = end;
  }
  for (size_t row = 0; row < rows; row++) {
    snprintf(title, sizeof title, "from %s", vs_fmt_short((uint64_t)(per_row * (double)row), s1, sizeof s1));
    text(b, X0 - 8, y + (double)row * (ROW_H + ROW_GAP) + ROW_H - 4, "rlabel", "end", title);
  }
  y += (double)rows * (ROW_H + ROW_GAP);
  scale_axis(b, y, (uint64_t)per_row, "bytes along each row");
  return y + 30;
}

static double draw_map(vs_sbuf *b, const vs_dump_card *c, double y) {
  char title[160];
  snprintf(title, sizeof title, "Memory map: %zu regions; 0 at the left of each row, length = size", c->nregions);
  text(b, 20, y, "h3", NULL, title);
  y += 12;
  if (!c->nregions) {
    text(b, X0, y + 12, "note", NULL, "(no regions: nothing allocated on this card)");
    return y + 28;
  }
  /* Sections: heap regions (chunks, VMM ranges, dedicated), slabs, plain
   * allocations; each in address order. */
  const vs_dump_region **v = malloc(c->nregions * sizeof *v);
  if (!v) {
    b->failed = 1;
    return y;
  }
  static const struct { int kinds; const char *heading; } sections[] = {
      {(1 << VS_DUMP_REGION_CHUNK) | (1 << VS_DUMP_REGION_VMM_RANGE) | (1 << VS_DUMP_REGION_DEDICATED),
       "Heap: chunks and VMM ranges (slabs are carved from their live blocks)"},
      {1 << VS_DUMP_REGION_SLAB, "Slabs: small-object regions, one slot per block"},
      {1 << VS_DUMP_REGION_ALLOCATION, NULL}};
  for (size_t s = 0; s < sizeof sections / sizeof sections[0]; s++) {
    size_t n = 0;
    for (size_t i = 0; i < c->nregions; i++)
      if (sections[s].kinds & (1 << c->regions[i].kind)) v[n++] = &c->regions[i];
    if (!n) continue;
    qsort(v, n, sizeof *v, cmp_base);
    y = sections[s].heading ? draw_rows(b, v, n, sections[s].heading, y) : draw_strip(b, v, n, y);
  }
  free(v);
  return y;
}

/* A "nice" axis maximum: 1, 2 or 5 times a power of 1024-friendly step. */
static uint64_t nice_max(uint64_t v) {
  if (v == 0) return 1024;
  uint64_t unit = 1;
  while (unit <= v / 1024) unit *= 1024;
  /* v / unit in [1, 1024): pick from a ladder of round numbers. */
  static const uint64_t ladder[] = {1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 40, 50, 64, 80, 100, 128, 160, 200, 256,
                                    320, 400, 512, 640, 800, 1024};
  for (size_t i = 0; i < sizeof ladder / sizeof ladder[0]; i++)
    if (ladder[i] * unit >= v) return ladder[i] * unit;
  return 1024 * unit;
}

/* Axis labels: ticks are a fifth of the span apart, so spans under 10 s
 * need tenths (or they read "0 s, 0 s, 1 s, 1 s"). */
static void fmt_dur(double ms, char *buf, size_t len) {
  if (ms < 1000) snprintf(buf, len, "%.0f ms", ms);
  else if (ms < 10000) snprintf(buf, len, "%.1f s", ms / 1000);
  else if (ms < 120000) snprintf(buf, len, "%.0f s", ms / 1000);
  else if (ms < 7200000) snprintf(buf, len, "%.0f min", ms / 60000);
  else if (ms < 172800000) snprintf(buf, len, "%.1f h", ms / 3600000);
  else snprintf(buf, len, "%.1f d", ms / 86400000);
}

static void polyline(vs_sbuf *b, const char *cls, const vs_dump_card *c, int which, uint64_t t0, double tspan,
                     double ymax, double top) {
  vs_sb_printf(b, "<polyline class=\"%s\" points=\"", cls);
  for (size_t i = 0; i < c->nsamples; i++) {
    const vs_dump_sample *s = &c->samples[i];
    uint64_t v = which == 0 ? s->live : which == 1 ? s->reserved : s->largest_free;
    double x = X0 + (X1 - X0) * (double)(s->t_ms - t0) / tspan;
    double y = top + PLOT_H - PLOT_H * (double)v / ymax;
    if (i) vs_sb_puts(b, " ");
    num(b, x);
    vs_sb_puts(b, ",");
    num(b, y);
  }
  vs_sb_puts(b, "\"/>\n");
}

static double draw_timeline(vs_sbuf *b, const vs_dump_card *c, double y) {
  char s1[32], label[96];
  text(b, 20, y, "h3", NULL, "Timeline: live, reserved and largest free extent over time");
  y += 14;
  if (c->nsamples < 2) {
    text(b, X0, y + 12, "note", NULL, "(fewer than two timeline samples: see timeline_interval)");
    return y + 30;
  }
  double top = y + 26;   /* room for the legend above the plot */
  uint64_t t0 = c->samples[0].t_ms, vmax = 0;
  double tspan = (double)(c->samples[c->nsamples - 1].t_ms - t0);
  if (tspan <= 0) tspan = 1;
  for (size_t i = 0; i < c->nsamples; i++) {
    const vs_dump_sample *s = &c->samples[i];
    if (s->live > vmax) vmax = s->live;
    if (s->reserved > vmax) vmax = s->reserved;
    if (s->largest_free > vmax) vmax = s->largest_free;
  }
  double ymax = (double)nice_max(vmax);
  rect(b, "plot", X0, top, X1 - X0, PLOT_H, NULL);
  for (int i = 0; i <= 4; i++) {
    double gy = top + PLOT_H - PLOT_H * i / 4.0;
    if (i) line(b, "grid", X0, gy, X1, gy);
    text(b, X0 - 6, gy + 4, "axis", "end", vs_fmt_short((uint64_t)(ymax * i / 4.0), s1, sizeof s1));
  }
  for (int i = 0; i <= 5; i++) {
    double gx = X0 + (X1 - X0) * i / 5.0;
    line(b, "tick", gx, top + PLOT_H, gx, top + PLOT_H + 5);
    fmt_dur(tspan * i / 5.0, label, sizeof label);
    text(b, gx, top + PLOT_H + 18, "axis", "middle", label);
  }
  text(b, (X0 + X1) / 2, top + PLOT_H + 34, "axis", "middle", "time since the first sample");
  polyline(b, "tl reserved", c, 1, t0, tspan, ymax, top);
  polyline(b, "tl live", c, 0, t0, tspan, ymax, top);
  polyline(b, "tl lfree", c, 2, t0, tspan, ymax, top);
  /* Legend above the plot, so no line runs under it. */
  static const struct { const char *cls, *label; } keys[] = {
      {"tl reserved", "reserved"}, {"tl live", "live"}, {"tl lfree", "largest free extent"}};
  double lx = X0;
  for (int i = 0; i < 3; i++) {
    line(b, keys[i].cls, lx, top - 10, lx + 24, top - 10);
    text(b, lx + 30, top - 6, "legend", NULL, keys[i].label);
    lx += 30 + 7.0 * (double)strlen(keys[i].label) + 24;
  }
  return top + PLOT_H + 52;
}

char *vs_render_svg(const vs_dump *d, size_t *len) {
  vs_sbuf body = {0};
  char s1[32], s2[32], s3[32], s4[32], s5[32], s6[32], line1[512];
  time_t t = (time_t)(d->time_unix_ms / 1000);
  struct tm tm;
  char when[40];
  vs_plat_gmtime(t, &tm);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  snprintf(line1, sizeof line1, "vramshim dump: pid %lld (%s), tenant %s", (long long)d->pid, d->exe[0] ? d->exe : "?",
           d->tenant[0] ? d->tenant : "?");
  text(&body, 20, 30, "h1", NULL, line1);
  snprintf(line1, sizeof line1, "%s, reason: %s, schema %u.%u", when, d->reason, d->schema_major, d->schema_minor);
  text(&body, 20, 50, "sub", NULL, line1);
  double y = draw_legend(&body, 78);
  for (size_t i = 0; i < d->ncards; i++) {
    const vs_dump_card *c = &d->cards[i];
    y += 16;
    snprintf(line1, sizeof line1, "Card %d: arena %s, capacity %s", c->index, c->arena,
             c->capacity ? vs_fmt_short(c->capacity, s1, sizeof s1) : "unknown");
    text(&body, 20, y, "h2", NULL, line1);
    y += 20;
    snprintf(line1, sizeof line1,
             "live %s (peak %s)  \xc2\xb7  reserved %s (peak %s)  \xc2\xb7  free %s, largest free extent %s",
             vs_fmt_short(c->live_bytes, s1, sizeof s1), vs_fmt_short(c->peak_live_bytes, s2, sizeof s2),
             vs_fmt_short(c->reserved_bytes, s3, sizeof s3), vs_fmt_short(c->peak_reserved_bytes, s4, sizeof s4),
             vs_fmt_short(c->free_bytes, s5, sizeof s5), vs_fmt_short(c->largest_free, s6, sizeof s6));
    text(&body, 20, y, "fig", NULL, line1);
    y += 18;
    snprintf(line1, sizeof line1, "external fragmentation %.1f%%  \xc2\xb7  internal waste %s  \xc2\xb7  %llu live allocations",
             100.0 * c->external_fragmentation, vs_fmt_short(c->internal_waste, s1, sizeof s1),
             (unsigned long long)c->live_count);
    if (c->tenant.present) {
      size_t n = strlen(line1);
      snprintf(line1 + n, sizeof line1 - n, "  \xc2\xb7  tenant usage %s / limit %s", vs_fmt_short(c->tenant.usage, s1, sizeof s1),
               c->tenant.limit == VS_DUMP_UNLIMITED ? "none" : vs_fmt_short(c->tenant.limit, s2, sizeof s2));
    }
    text(&body, 20, y, "fig", NULL, line1);
    y += 26;
    y = draw_map(&body, c, y);
    y += 14;
    y = draw_timeline(&body, c, y);
  }
  if (body.failed) {
    vs_sb_free(&body);
    return NULL;
  }
  vs_sbuf b = {0};
  vs_sb_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
                   "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", W, (int)y + 10, W, (int)y + 10);
  vs_sb_puts(&b,
             "<style>\n"
             "text { font-family: DejaVu Sans, Arial, sans-serif; fill: #222; }\n"
             ".h1 { font-size: 18px; font-weight: bold; } .sub { font-size: 13px; fill: #555; }\n"
             ".h2 { font-size: 16px; font-weight: bold; } .h3 { font-size: 13px; font-weight: bold; fill: #333; }\n"
             ".h4 { font-size: 12px; font-style: italic; fill: #444; }\n"
             ".fig { font-size: 13px; } .legend { font-size: 12px; } .note { font-size: 12px; fill: #777; }\n"
             ".rlabel { font-size: 11px; font-family: DejaVu Sans Mono, monospace; }\n"
             ".axis { font-size: 11px; fill: #444; }\n"
             ".region { fill: #ffffff; stroke: #555; stroke-width: 1; }\n"
             ".blk { stroke: #ffffff; stroke-width: 0.4; } .key { stroke: #555; stroke-width: 0.5; } .live { fill: " C_LIVE "; } .pending { fill: " C_PEND "; }"
             " .free { fill: " C_FREE "; }\n"
             ".plot { fill: #fafafa; stroke: #888; } .grid { stroke: #ddd; } .tick { stroke: #888; }\n"
             ".tl { fill: none; stroke-width: 2; } .tl.live { stroke: " C_LIVE "; fill: none; }"
             " .tl.reserved { stroke: " C_RES "; fill: none; } .tl.lfree { stroke: " C_LFREE
             "; stroke-dasharray: 6 3; fill: none; }\n"
             "</style>\n<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
  vs_sb_put(&b, body.p, body.len);
  vs_sb_free(&body);
  vs_sb_puts(&b, "</svg>\n");
  return vs_sb_take(&b, len);
}

/* What `vramshim history` prints: plain text an operator can act on, one
 * JSON document (schema docs/schemas/history.schema.json), or an SVG with
 * one panel per tenant. All three from the same vs_history. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "history.h"
#include "json.h"
#include "log.h"
#include "sbuf.h"
#include "timeutil.h"

static const char *bytes(double b, char buf[32]) { return vs_fmt_bytes(b > 0 ? (uint64_t)(b + 0.5) : 0, buf, 32); }

/* "+612 MiB" / "-3.00 GiB" */
static const char *signed_bytes(double b, char buf[40]) {
  char t[32];
  snprintf(buf, 40, "%s%s", b < 0 ? "-" : "+", bytes(fabs(b), t));
  return buf;
}

static const char *date_of(int64_t ms, char buf[32], const char *fmt) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  vs_plat_gmtime(t, &tm);
  strftime(buf, 32, fmt, &tm);
  return buf;
}
#define DAY(ms, b) date_of(ms, b, "%Y-%m-%d")
#define MINUTE(ms, b) date_of(ms, b, "%Y-%m-%d %H:%M UTC")
#define ISO(ms, b) date_of(ms, b, "%Y-%m-%dT%H:%M:%SZ")

/* Weighted means of the series in n equal buckets of time; returns how
 * many buckets hold points (out has room for n). */
static int downsample(const vs_hist_tenant *x, int n, vs_hist_point *out) {
  if (!x->npts) return 0;
  double span = (double)(x->last - x->first) + 1;
  int k = 0;
  for (int i = 0, b = -1; i < x->npts; i++) {
    const vs_hist_point *p = &x->pts[i];
    int bb = (int)((double)(p->t - x->first) / span * n);
    if (bb >= n) bb = n - 1;
    if (bb != b) {
      if (b >= 0) {
        out[k - 1].used /= out[k - 1].w;
        out[k - 1].cached /= out[k - 1].w;
        out[k - 1].t = (int64_t)((double)out[k - 1].t / out[k - 1].w);
      }
      out[k++] = (vs_hist_point){0, 0, 0, 0, 0};
      b = bb;
    }
    vs_hist_point *o = &out[k - 1];
    o->t += (int64_t)((double)p->t * p->w);
    o->used += p->used * p->w;
    o->cached += p->cached * p->w;
    o->w += p->w;
    if (p->used_max > o->used_max) o->used_max = p->used_max;
  }
  out[k - 1].used /= out[k - 1].w;
  out[k - 1].cached /= out[k - 1].w;
  out[k - 1].t = (int64_t)((double)out[k - 1].t / out[k - 1].w);
  return k;
}

/* ---- Text ------------------------------------------------------------------ */
static void advice(const vs_hist_tenant *x, FILE *out) {
  char a[32], b[32], d[32];
  switch (x->drift) {
    case VS_DRIFT_LEAK:
      fprintf(out, "  what to do: find what keeps growing (take `vramshim dump --tenant %s --json` now and again in a "
                   "day, then `vramshim dump --diff`)", x->tenant);
      if (x->has_forecast && x->days_to_limit > 0)
        fprintf(out, ", or raise its limit and reservation before %s", DAY(x->limit_at, d));
      fprintf(out, "\n");
      break;
    case VS_DRIFT_FRAGMENTATION:
      fprintf(out, "  what to do: its processes hold more and more memory they do not use: lower release_threshold, "
                   "use arena = vmm, or restart them at a quiet hour (`vramshim dump --tenant %s` shows the free "
                   "extents)\n", x->tenant);
      break;
    case VS_DRIFT_FLAT:
      fprintf(out, "  usage stays between %s and %s", bytes(x->used_min, a), bytes(x->used_max, b));
      if (x->limit != UINT64_MAX)
        fprintf(out, "; its limit leaves %s of room above the highest", bytes((double)x->limit - x->used_max, d));
      fprintf(out, "\n");
      break;
    case VS_DRIFT_FALLING: fprintf(out, "  usage is falling over the window\n"); break;
    case VS_DRIFT_NOT_ENOUGH_DATA:
      fprintf(out, "  keep `vramshim record` running: a verdict needs at least 6 hours of samples\n");
      break;
  }
}

static void weeks(const vs_hist_tenant *x, FILE *out) {
  char a[32], b[32], c[32], d[32];
  fprintf(out, "  %-12s %12s %12s %12s %9s\n", "week of", "mean held", "max held", "mean cached",
          x->limit != UINT64_MAX ? "of limit" : "");
  for (int64_t w0 = x->first; w0 <= x->last; w0 += VS_HIST_WEEK_MS) {
    double sw = 0, su = 0, sc = 0, mx = 0;
    for (int i = 0; i < x->npts; i++) {
      const vs_hist_point *p = &x->pts[i];
      if (p->t < w0 || p->t >= w0 + VS_HIST_WEEK_MS) continue;
      sw += p->w, su += p->w * p->used, sc += p->w * p->cached;
      if (p->used_max > mx) mx = p->used_max;
    }
    if (sw <= 0) continue;
    fprintf(out, "  %-12s %12s %12s %12s", DAY(w0, d), bytes(su / sw, a), bytes(mx, b), bytes(sc / sw, c));
    if (x->limit != UINT64_MAX && x->limit) fprintf(out, " %8.0f%%", 100.0 * mx / (double)x->limit);
    fprintf(out, "%s\n", x->reserve && mx > (double)x->reserve ? "  above its reservation" : "");
  }
}

void vs_history_text(const vs_history *h, FILE *out) {
  char a[32], b[32], c[32], d[40], e[40], f[40];
  fprintf(out, "vramshim: history from %s, %s to %s\n", h->db, MINUTE(h->since, a), MINUTE(h->until, b));
  if (!h->n) fprintf(out, "\nno samples in this window (is `vramshim record` running? --since 60d looks further back)\n");
  for (int i = 0; i < h->n; i++) {
    const vs_hist_tenant *x = &h->t[i];
    fprintf(out, "\ncard %s, tenant %s: limit %s, reserve %s", x->card, x->tenant,
            x->limit == UINT64_MAX ? "none" : bytes((double)x->limit, a), bytes((double)x->reserve, b));
    if (x->npts)
      fprintf(out, "; samples from %s to %s (%.1f days)\n", MINUTE(x->first, c), MINUTE(x->last, d),
              (double)(x->last - x->first) / VS_STORE_DAY_MS);
    else
      fprintf(out, "; no samples in the window, only events\n");
    if (x->npts) {
      fprintf(out, "  now: %s held (%s live, %s cached by its processes)", bytes(x->used_now, a),
              bytes(x->used_now - x->cached_now, b), bytes(x->cached_now, c));
      if (x->limit != UINT64_MAX && x->limit) fprintf(out, ", %.0f%% of its limit", 100.0 * x->used_now / (double)x->limit);
      if (x->reserve) fprintf(out, ", %s its reservation", x->used_now > (double)x->reserve ? "above" : "within");
      fprintf(out, "\n  drift: %s", vs_drift_text(x->drift));
      if (x->drift != VS_DRIFT_NOT_ENOUGH_DATA)
        fprintf(out, " (per week: held %s, live %s, cached %s)", signed_bytes(x->slope_used, d),
                signed_bytes(x->slope_live, e), signed_bytes(x->slope_cached, f));
      fprintf(out, "\n");
      if (x->has_forecast && x->days_to_limit > 0)
        fprintf(out, "  forecast: at this slope it reaches its limit of %s in %.0f days, on %s\n",
                bytes((double)x->limit, a), x->days_to_limit, DAY(x->limit_at, b));
      else if (x->has_forecast)
        fprintf(out, "  forecast: at its limit of %s now\n", bytes((double)x->limit, a));
      else if (x->drift != VS_DRIFT_NOT_ENOUGH_DATA)
        fprintf(out, "  forecast: none (%s)\n", x->forecast_note);
      advice(x, out);
      weeks(x, out);
    }
    if (x->ndays) {
      fprintf(out, "  refusals and warnings per day:\n");
      for (int k = 0; k < x->ndays; k++) {
        const vs_hist_day *dd = &x->days[k];
        fprintf(out, "    %s  %d refusal%s, %d warning%s", dd->date, dd->refusals, dd->refusals == 1 ? "" : "s",
                dd->warnings, dd->warnings == 1 ? "" : "s");
        if (dd->spills) fprintf(out, ", %d spill%s", dd->spills, dd->spills == 1 ? "" : "s");
        fprintf(out, "\n");
      }
    } else {
      fprintf(out, "  no refusals or warnings in the window\n");
    }
    if (x->nacts) {
      fprintf(out, "  threshold actions:\n");
      for (int k = 0; k < x->nacts; k++) {
        const vs_hist_action *ac = &x->acts[k];
        fprintf(out, "    %s  on_%s %s: ", MINUTE(ac->t, a), ac->event, ac->program);
        if (!strcmp(ac->status, "ok")) fprintf(out, "done in %.1f s\n", (double)ac->duration_ms / 1000);
        else if (!strcmp(ac->status, "timeout"))
          fprintf(out, "FAILED: killed at its timeout after %.1f s\n", (double)ac->duration_ms / 1000);
        else if (!strcmp(ac->status, "not-started")) fprintf(out, "FAILED: not started: %s\n", ac->output);
        else if (ac->exit_code < 0) fprintf(out, "FAILED: killed by signal %d\n", -ac->exit_code);
        else fprintf(out, "FAILED: exit status %d\n", ac->exit_code);
      }
    }
  }
}

/* ---- JSON ------------------------------------------------------------------ */
/* docs/schemas/history.schema.json; written by the project's one JSON writer
 * (src/explain/json_write.c). A field added keeps the major version. */
#define HISTORY_SCHEMA_VERSION "1.0"

static void j_time(vs_jw *w, const char *k, int64_t ms, int have) {
  char t[32];
  vs_jw_key(w, k);
  if (have) vs_jw_str(w, ISO(ms, t));
  else vs_jw_null(w);
}
static uint64_t u(double v) { return v > 0 ? (uint64_t)(v + 0.5) : 0; }

static void j_tenant(vs_jw *w, const vs_hist_tenant *x, vs_hist_point *ds) {
  vs_jw_object(w, VS_JSON_BLOCK);
  vs_jw_kstr(w, "card", x->card);
  vs_jw_kstr(w, "tenant", x->tenant);
  vs_jw_ku64_or_null(w, "limit", x->limit, UINT64_MAX);
  vs_jw_ku64(w, "reserve", x->reserve);
  j_time(w, "first", x->first, x->npts > 0);
  j_time(w, "last", x->last, x->npts > 0);
  vs_jw_ku64(w, "points", (uint64_t)x->npts);
  vs_jw_key(w, "usage");
  vs_jw_object(w, VS_JSON_INLINE);
  vs_jw_ku64(w, "now", u(x->used_now));
  vs_jw_ku64(w, "live_now", u(x->used_now - x->cached_now));
  vs_jw_ku64(w, "cached_now", u(x->cached_now));
  vs_jw_ku64(w, "min", u(x->used_min));
  vs_jw_ku64(w, "mean", u(x->used_mean));
  vs_jw_ku64(w, "max", u(x->used_max));
  vs_jw_end(w);
  vs_jw_key(w, "drift");
  vs_jw_object(w, VS_JSON_INLINE);
  vs_jw_kstr(w, "verdict", vs_drift_name(x->drift));
  vs_jw_kstr(w, "text", vs_drift_text(x->drift));
  vs_jw_kfixed(w, "used_per_week", x->slope_used, 3);
  vs_jw_kfixed(w, "live_per_week", x->slope_live, 3);
  vs_jw_kfixed(w, "cached_per_week", x->slope_cached, 3);
  vs_jw_end(w);
  vs_jw_key(w, "forecast");
  vs_jw_object(w, VS_JSON_INLINE);
  j_time(w, "limit_at", x->limit_at, x->has_forecast);
  vs_jw_key(w, "days_to_limit");
  if (x->has_forecast) vs_jw_fixed(w, x->days_to_limit, 3);
  else vs_jw_null(w);
  vs_jw_key(w, "note");
  if (x->forecast_note) vs_jw_str(w, x->forecast_note);
  else vs_jw_null(w);
  vs_jw_end(w);
  vs_jw_key(w, "days");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (int d = 0; d < x->ndays; d++) {
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_kstr(w, "date", x->days[d].date);
    vs_jw_ku64(w, "refusals", (uint64_t)x->days[d].refusals);
    vs_jw_ku64(w, "warnings", (uint64_t)x->days[d].warnings);
    vs_jw_ku64(w, "spills", (uint64_t)x->days[d].spills);
    vs_jw_end(w);
  }
  vs_jw_end(w);
  vs_jw_key(w, "actions");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (int d = 0; d < x->nacts; d++) {
    const vs_hist_action *ac = &x->acts[d];
    vs_jw_object(w, VS_JSON_INLINE);
    j_time(w, "time", ac->t, 1);
    vs_jw_kstr(w, "event", ac->event);
    vs_jw_kstr(w, "program", ac->program);
    vs_jw_kstr(w, "status", ac->status);
    vs_jw_key(w, "exit_code");
    if (ac->has_exit_code) vs_jw_i64(w, ac->exit_code);
    else vs_jw_null(w);
    vs_jw_ku64(w, "duration_ms", (uint64_t)(ac->duration_ms > 0 ? ac->duration_ms : 0));
    vs_jw_kstr(w, "output", ac->output);
    vs_jw_end(w);
  }
  vs_jw_end(w);
  vs_jw_key(w, "series");
  vs_jw_array(w, VS_JSON_BLOCK);
  int n = downsample(x, 200, ds);
  for (int d = 0; d < n; d++) {
    vs_jw_object(w, VS_JSON_INLINE);
    j_time(w, "time", ds[d].t, 1);
    vs_jw_ku64(w, "used", u(ds[d].used));
    vs_jw_ku64(w, "cached", u(ds[d].cached));
    vs_jw_end(w);
  }
  vs_jw_end(w);
  vs_jw_end(w);
}

int vs_history_json(const vs_history *h, FILE *out) {
  vs_hist_point *ds = malloc(200 * sizeof *ds);
  if (!ds) return -1;
  vs_jw w;
  vs_jw_init(&w, 0);
  vs_jw_object(&w, VS_JSON_BLOCK);
  vs_jw_kstr(&w, "schema_version", HISTORY_SCHEMA_VERSION);
  vs_jw_kstr(&w, "generator", "vramshim");
  vs_jw_kstr(&w, "db", h->db);
  j_time(&w, "since", h->since, 1);
  j_time(&w, "until", h->until, 1);
  vs_jw_key(&w, "tenants");
  vs_jw_array(&w, VS_JSON_BLOCK);
  for (int i = 0; i < h->n; i++) j_tenant(&w, &h->t[i], ds);
  vs_jw_end(&w);
  vs_jw_end(&w);
  free(ds);
  return vs_jw_print(&w, out);
}

/* ---- SVG ------------------------------------------------------------------- */
#define SVG_W 960
#define PANEL_H 280
#define PX0 90
#define PX1 930
#define PY0 52
#define PY1 240
#define SVG_POINTS 600

static void panel(vs_sbuf *b, const vs_hist_tenant *x, int y0, vs_hist_point *ds) {
  char a[32], c[32], d[32];
  double ymax = x->used_max;
  if (x->limit != UINT64_MAX && (double)x->limit > ymax) ymax = (double)x->limit;
  if ((double)x->reserve > ymax) ymax = (double)x->reserve;
  ymax = ymax > 0 ? ymax * 1.05 : 1;
  int64_t t0 = x->npts ? x->first : x->nmarks ? x->marks[0].t : 0;
  int64_t t1 = x->npts ? x->last : t0;
  for (int i = 0; i < x->nmarks; i++) {
    if (x->marks[i].t < t0) t0 = x->marks[i].t;
    if (x->marks[i].t > t1) t1 = x->marks[i].t;
  }
  if (t1 <= t0) t1 = t0 + 1;
#define X(t) (PX0 + (double)((t) - t0) / (double)(t1 - t0) * (PX1 - PX0))
#define Y(v) (y0 + PY1 - (v) / ymax * (PY1 - PY0))
  vs_sb_printf(b, "<g class=\"tenant\"><text class=\"title\" x=\"%d\" y=\"%d\">", PX0, y0 + 22);
  vs_sb_xml_str(b, x->tenant);
  vs_sb_puts(b, " on card ");
  vs_sb_xml_str(b, x->card);
  vs_sb_printf(b, "</text>\n<text class=\"verdict\" x=\"%d\" y=\"%d\">%s</text>\n", PX0, y0 + 38,
               vs_drift_text(x->drift));
  vs_sb_printf(b, "<rect class=\"plot\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n", PX0, y0 + PY0, PX1 - PX0,
               PY1 - PY0);
  vs_sb_printf(b, "<text class=\"axis\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", PX0 - 6, Y(ymax / 1.05) + 4,
               bytes(ymax / 1.05, a));
  vs_sb_printf(b, "<text class=\"axis\" x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>\n", PX0 - 6, y0 + PY1 + 4);
  vs_sb_printf(b, "<text class=\"axis\" x=\"%d\" y=\"%d\">%s</text>\n", PX0, y0 + PY1 + 18, MINUTE(t0, c));
  vs_sb_printf(b, "<text class=\"axis\" x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", PX1, y0 + PY1 + 18,
               MINUTE(t1, d));
  if (x->limit != UINT64_MAX)
    vs_sb_printf(b, "<line class=\"limit\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"><title>limit %s</title></line>\n",
                 PX0, PX1, Y((double)x->limit), Y((double)x->limit), bytes((double)x->limit, a));
  if (x->reserve)
    vs_sb_printf(b,
                 "<line class=\"reserve\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"><title>reservation %s</title></line>\n",
                 PX0, PX1, Y((double)x->reserve), Y((double)x->reserve), bytes((double)x->reserve, a));
  int n = downsample(x, SVG_POINTS, ds);
  for (int line = 0; line < 2; line++) {
    vs_sb_printf(b, "<polyline class=\"%s\" points=\"", line ? "cache" : "usage");
    for (int i = 0; i < n; i++)
      vs_sb_printf(b, "%s%.1f,%.1f", i ? " " : "", X(ds[i].t), Y(line ? ds[i].cached : ds[i].used));
    vs_sb_puts(b, "\"/>\n");
  }
  for (int i = 0; i < x->nmarks; i++) {
    const vs_hist_mark *m = &x->marks[i];
    const char *cls = !strcmp(m->kind, "limit") ? "refusal" : m->kind;
    double mx = X(m->t);
    vs_sb_printf(b, "<path class=\"mark %s\" d=\"M%.1f,%d l-4,-8 h8 z\"><title>%s %s</title></path>\n", cls, mx,
                 y0 + PY0, !strcmp(m->kind, "limit") ? "refusal" : m->kind, MINUTE(m->t, a));
  }
  /* Legend */
  static const char *const leg[][2] = {{"usage", "held (usage)"}, {"cache", "cached (held - live)"},
                                       {"limit", "limit"}, {"reserve", "reservation"},
                                       {"refusal", "refusal"}, {"warn", "warning"}};
  static const int at[6] = {0, 140, 320, 400, 530, 630};
  for (int i = 0; i < 6; i++) {
    int lx = PX0 + at[i];
    if (i < 4)
      vs_sb_printf(b, "<line class=\"%s\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>", leg[i][0], lx, lx + 20,
                   y0 + PY1 + 34, y0 + PY1 + 34);
    else
      vs_sb_printf(b, "<path class=\"mark %s\" d=\"M%d,%d l-4,-8 h8 z\"/>", leg[i][0], lx + 10, y0 + PY1 + 38);
    vs_sb_printf(b, "<text class=\"legend\" x=\"%d\" y=\"%d\">%s</text>\n", lx + 26, y0 + PY1 + 38, leg[i][1]);
  }
  vs_sb_puts(b, "</g>\n");
#undef X
#undef Y
}

int vs_history_svg(const vs_history *h, FILE *out) {
  vs_sbuf b = {0};
  int height = 20 + (h->n ? h->n : 1) * (PANEL_H + 30);
  vs_sb_printf(&b,
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<style>\n"
               ".title{font-size:14px;font-weight:bold} .verdict{fill:#222} .axis,.legend{fill:#444}\n"
               ".plot{fill:#fafafa;stroke:#ccc} .usage{fill:none;stroke:#1f77b4;stroke-width:1.5}\n"
               ".cache{fill:none;stroke:#ff7f0e;stroke-width:1.2} .limit{stroke:#d62728;stroke-dasharray:6 3}\n"
               ".reserve{stroke:#2ca02c;stroke-dasharray:2 3} .mark.refusal{fill:#d62728} .mark.warn{fill:#e6a800}\n"
               ".mark.spill{fill:#9467bd}\n</style>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
               SVG_W, height, SVG_W, height);
  vs_hist_point *ds = malloc(SVG_POINTS * sizeof *ds);
  if (!h->n) vs_sb_puts(&b, "<text x=\"20\" y=\"40\">no samples in this window</text>\n");
  for (int i = 0; i < h->n && ds; i++) panel(&b, &h->t[i], 10 + i * (PANEL_H + 30), ds);
  vs_sb_puts(&b, "</svg>\n");
  int bad = !ds || b.failed;
  free(ds);
  if (!bad) bad = fputs(b.p, out) < 0;
  vs_sb_free(&b);
  return bad ? -1 : 0;
}

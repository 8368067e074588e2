/* The history of each tenant, read from the database, and its fit: the
 * series (raw samples where they are kept, else hourly, else daily
 * aggregates, each weighted by the samples it stands for), a weighted
 * least-squares line through used, live (used - cached) and cached, and
 * what the slopes say. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"

/* A slope counts as rising (or falling) from this share of the scale (the
 * limit, else the highest usage) per week, and at least MIN_SLOPE: noise
 * and a few MiB of churn are no drift. */
#define DRIFT_SHARE_PER_WEEK 0.005
#define MIN_SLOPE (1024.0 * 1024.0)
/* A verdict needs this much of a window: a slope over minutes says nothing about weeks. */
#define MIN_SPAN_MS (6 * VS_STORE_HOUR_MS)
#define MIN_POINTS 3

const char *vs_drift_name(vs_drift d) {
  static const char *const n[] = {"not_enough_data", "flat", "leak_or_growth", "fragmentation_or_caching", "falling"};
  return n[d];
}

const char *vs_drift_text(vs_drift d) {
  static const char *const n[] = {
      "not enough data for a verdict (less than 6 hours)",
      "flat: no drift",
      "live memory rising: a leak or a growing workload",
      "held minus live rising while live memory is flat: fragmentation or caching",
      "falling",
  };
  return n[d];
}

static int push_point(vs_hist_tenant *x, int *cap, int64_t t, double used, double cached, double w, double used_max) {
  if (x->npts == *cap) {
    int nc = *cap ? *cap * 2 : 1024;
    vs_hist_point *p = realloc(x->pts, (size_t)nc * sizeof *p);
    if (!p) return -1;
    x->pts = p;
    *cap = nc;
  }
  x->pts[x->npts++] = (vs_hist_point){t, used, cached, w, used_max};
  return 0;
}

static int64_t min_t(vs_store *s, const char *sql, const vs_hist_tenant *x) {
  sqlite3_stmt *st;
  int64_t v = INT64_MAX;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL)) return v;
  sqlite3_bind_text(st, 1, x->card, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, x->tenant, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* Appends rows (t, used, cached, w, used_max, lim, reserve) of sql, whose
 * ?1 ?2 are card and tenant, ?3 ?4 the window, t shifted by mid. */
static int load_rows(vs_store *s, vs_hist_tenant *x, int *cap, const char *sql, int64_t from, int64_t to, int64_t mid) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL)) return -1;
  sqlite3_bind_text(st, 1, x->card, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, x->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, from);
  sqlite3_bind_int64(st, 4, to);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (push_point(x, cap, sqlite3_column_int64(st, 0) + mid, sqlite3_column_double(st, 1),
                   sqlite3_column_double(st, 2), sqlite3_column_double(st, 3), sqlite3_column_double(st, 4))) {
      rc = SQLITE_NOMEM;
      break;
    }
    x->limit = sqlite3_column_type(st, 5) == SQLITE_NULL ? UINT64_MAX : (uint64_t)sqlite3_column_int64(st, 5);
    x->reserve = (uint64_t)sqlite3_column_int64(st, 6);
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 0 : -1;
}

/* Weighted least squares of y(p) over t: the slope per ms, and the line's value at t_at. */
static void fit(const vs_hist_tenant *x, int which, int64_t t_at, double *slope, double *at) {
  double sw = 0, st = 0, sy = 0;
  int64_t t0 = x->pts[0].t;
  for (int i = 0; i < x->npts; i++) {
    const vs_hist_point *p = &x->pts[i];
    double y = which == 0 ? p->used : which == 1 ? p->used - p->cached : p->cached;
    sw += p->w;
    st += p->w * (double)(p->t - t0);
    sy += p->w * y;
  }
  double mt = st / sw, my = sy / sw, sxx = 0, sxy = 0;
  for (int i = 0; i < x->npts; i++) {
    const vs_hist_point *p = &x->pts[i];
    double y = which == 0 ? p->used : which == 1 ? p->used - p->cached : p->cached;
    double dt = (double)(p->t - t0) - mt;
    sxx += p->w * dt * dt;
    sxy += p->w * dt * (y - my);
  }
  *slope = sxx > 0 ? sxy / sxx : 0;
  *at = my + *slope * ((double)(t_at - t0) - mt);
}

static void judge(vs_hist_tenant *x) {
  x->drift = VS_DRIFT_NOT_ENOUGH_DATA;
  x->forecast_note = "not enough data";
  if (!x->npts) return;
  x->first = x->pts[0].t;
  x->last = x->pts[x->npts - 1].t;
  x->used_now = x->pts[x->npts - 1].used;
  x->cached_now = x->pts[x->npts - 1].cached;
  double sw = 0, sy = 0;
  x->used_min = x->used_max = x->pts[0].used;
  for (int i = 0; i < x->npts; i++) {
    const vs_hist_point *p = &x->pts[i];
    if (p->used < x->used_min) x->used_min = p->used;
    if (p->used_max > x->used_max) x->used_max = p->used_max;
    if (p->used > x->used_max) x->used_max = p->used;
    sw += p->w;
    sy += p->w * p->used;
  }
  x->used_mean = sw > 0 ? sy / sw : 0;
  if (x->npts < MIN_POINTS || x->last - x->first < MIN_SPAN_MS) return;
  double su, sl, sc, at_used, at;
  fit(x, 0, x->last, &su, &at_used);
  fit(x, 1, x->last, &sl, &at);
  fit(x, 2, x->last, &sc, &at);
  x->slope_used = su * (double)VS_HIST_WEEK_MS;
  x->slope_live = sl * (double)VS_HIST_WEEK_MS;
  x->slope_cached = sc * (double)VS_HIST_WEEK_MS;
  double scale = x->limit != UINT64_MAX ? (double)x->limit : x->used_max;
  double thr = fmax(scale * DRIFT_SHARE_PER_WEEK, MIN_SLOPE);
  if (x->slope_live >= thr) x->drift = VS_DRIFT_LEAK;
  else if (x->slope_cached >= thr) x->drift = VS_DRIFT_FRAGMENTATION;
  else if (x->slope_used <= -thr) x->drift = VS_DRIFT_FALLING;
  else x->drift = VS_DRIFT_FLAT;
  if (x->limit == UINT64_MAX) {
    x->forecast_note = "no limit";
  } else if (x->slope_used < thr) {
    x->forecast_note = "usage is not rising";
  } else if (at_used >= (double)x->limit) {
    x->has_forecast = 1;
    x->limit_at = x->last;
    x->days_to_limit = 0;
    x->forecast_note = "at its limit now";
  } else {
    double ms = ((double)x->limit - at_used) / su;
    x->has_forecast = 1;
    x->days_to_limit = ms / (double)VS_STORE_DAY_MS;
    x->limit_at = x->last + (int64_t)ms;
    x->forecast_note = NULL;
  }
}

static int load_events(vs_store *s, vs_hist_tenant *x, int64_t since, int64_t until) {
  sqlite3_stmt *st;
  const char *sql =
      "SELECT strftime('%Y-%m-%d', time_ns / 1000000000, 'unixepoch') AS d, sum(kind = 'limit'), sum(kind = 'warn'),"
      " sum(kind = 'spill') FROM events WHERE card = ?1 AND tenant = ?2 AND time_ns >= ?3 * 1000000 AND"
      " time_ns < ?4 * 1000000 AND kind IN ('limit', 'warn', 'spill') GROUP BY d ORDER BY d";
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL)) return -1;
  sqlite3_bind_text(st, 1, x->card, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, x->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, since);
  sqlite3_bind_int64(st, 4, until);
  int cap = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (x->ndays == cap) {
      cap = cap ? cap * 2 : 64;
      vs_hist_day *d = realloc(x->days, (size_t)cap * sizeof *d);
      if (!d) break;
      x->days = d;
    }
    vs_hist_day *d = &x->days[x->ndays++];
    snprintf(d->date, sizeof d->date, "%s", (const char *)sqlite3_column_text(st, 0));
    d->refusals = sqlite3_column_int(st, 1);
    d->warnings = sqlite3_column_int(st, 2);
    d->spills = sqlite3_column_int(st, 3);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return -1;
  /* The marks on the plot: the newest 2000 refusals, warnings and spills. */
  if (sqlite3_prepare_v2(s->db,
                         "SELECT time_ns / 1000000, kind FROM (SELECT * FROM events WHERE card = ?1 AND tenant = ?2"
                         " AND time_ns >= ?3 * 1000000 AND time_ns < ?4 * 1000000 AND kind IN ('limit', 'warn', 'spill')"
                         " ORDER BY time_ns DESC LIMIT 2000) ORDER BY time_ns",
                         -1, &st, NULL))
    return -1;
  sqlite3_bind_text(st, 1, x->card, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, x->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, since);
  sqlite3_bind_int64(st, 4, until);
  x->marks = calloc(2000, sizeof *x->marks);
  while (x->marks && (rc = sqlite3_step(st)) == SQLITE_ROW && x->nmarks < 2000) {
    vs_hist_mark *m = &x->marks[x->nmarks++];
    m->t = sqlite3_column_int64(st, 0);
    snprintf(m->kind, sizeof m->kind, "%s", (const char *)sqlite3_column_text(st, 1));
  }
  sqlite3_finalize(st);
  /* The actions run for it. */
  if (sqlite3_prepare_v2(s->db,
                         "SELECT t, event, program, status, exit_code, duration_ms, output FROM actions WHERE card = ?1"
                         " AND tenant = ?2 AND t >= ?3 AND t < ?4 ORDER BY t",
                         -1, &st, NULL))
    return -1;
  sqlite3_bind_text(st, 1, x->card, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, x->tenant, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, since);
  sqlite3_bind_int64(st, 4, until);
  cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (x->nacts == cap) {
      cap = cap ? cap * 2 : 16;
      vs_hist_action *a = realloc(x->acts, (size_t)cap * sizeof *a);
      if (!a) break;
      x->acts = a;
    }
    vs_hist_action *a = &x->acts[x->nacts++];
    memset(a, 0, sizeof *a);
    a->t = sqlite3_column_int64(st, 0);
    snprintf(a->event, sizeof a->event, "%s", (const char *)sqlite3_column_text(st, 1));
    snprintf(a->program, sizeof a->program, "%s", (const char *)sqlite3_column_text(st, 2));
    snprintf(a->status, sizeof a->status, "%s", (const char *)sqlite3_column_text(st, 3));
    a->has_exit_code = sqlite3_column_type(st, 4) != SQLITE_NULL;
    a->exit_code = sqlite3_column_int(st, 4);
    a->duration_ms = sqlite3_column_int64(st, 5);
    snprintf(a->output, sizeof a->output, "%s", (const char *)sqlite3_column_text(st, 6));
  }
  sqlite3_finalize(st);
  return 0;
}

static int cmp_point(const void *a, const void *b) {
  const vs_hist_point *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t;
}

int vs_history_load(vs_store *s, int64_t since, int64_t until, const char *tenant, const char *card, vs_history *h,
                    char *err, size_t errlen) {
  memset(h, 0, sizeof *h);
  snprintf(h->db, sizeof h->db, "%s", s->path);
  h->since = since;
  h->until = until;
  sqlite3_stmt *st;
  const char *keys =
      "SELECT card, tenant FROM (SELECT card, tenant FROM samples WHERE pid = 0 AND t >= ?1 AND t < ?2 UNION"
      " SELECT card, tenant FROM agg WHERE t >= ?1 - 86400000 AND t < ?2 UNION SELECT card, tenant FROM events"
      " WHERE time_ns >= ?1 * 1000000 AND time_ns < ?2 * 1000000 AND tenant != '')"
      " WHERE (?3 IS NULL OR tenant = ?3) AND (?4 IS NULL OR card = ?4 OR card IN (SELECT card FROM cards WHERE"
      " CAST(card_index AS TEXT) = ?4)) ORDER BY card, tenant";
  if (sqlite3_prepare_v2(s->db, keys, -1, &st, NULL)) goto fail;
  sqlite3_bind_int64(st, 1, since);
  sqlite3_bind_int64(st, 2, until);
  if (tenant) sqlite3_bind_text(st, 3, tenant, -1, SQLITE_STATIC);
  if (card) sqlite3_bind_text(st, 4, card, -1, SQLITE_STATIC);
  int cap = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (h->n == cap) {
      cap = cap ? cap * 2 : 16;
      vs_hist_tenant *t = realloc(h->t, (size_t)cap * sizeof *t);
      if (!t) break;
      h->t = t;
    }
    vs_hist_tenant *x = &h->t[h->n++];
    memset(x, 0, sizeof *x);
    x->limit = UINT64_MAX;
    snprintf(x->card, sizeof x->card, "%s", (const char *)sqlite3_column_text(st, 0));
    snprintf(x->tenant, sizeof x->tenant, "%s", (const char *)sqlite3_column_text(st, 1));
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) goto fail;
  for (int i = 0; i < h->n; i++) {
    vs_hist_tenant *x = &h->t[i];
    int pcap = 0;
    int64_t raw_first = min_t(s, "SELECT min(t) FROM samples WHERE pid = 0 AND card = ?1 AND tenant = ?2", x);
    int64_t hour_first = min_t(s, "SELECT min(t) FROM agg WHERE level = 1 AND card = ?1 AND tenant = ?2", x);
    /* Daily where no hourly is kept, hourly (whole hours) where no raw is:
     * each period counted once, at its middle. */
    if (load_rows(s, x, &pcap,
                  "SELECT t, used_mean, cached_mean, n, used_max, lim, reserve FROM agg WHERE level = 2 AND card = ?1"
                  " AND tenant = ?2 AND t >= ?3 AND t + 86400000 <= ?4 ORDER BY t",
                  since, hour_first < until ? hour_first : until, VS_STORE_DAY_MS / 2) ||
        load_rows(s, x, &pcap,
                  "SELECT t, used_mean, cached_mean, n, used_max, lim, reserve FROM agg WHERE level = 1 AND card = ?1"
                  " AND tenant = ?2 AND t >= ?3 AND t + 3600000 <= ?4 ORDER BY t",
                  since, raw_first < until ? raw_first : until, VS_STORE_HOUR_MS / 2) ||
        load_rows(s, x, &pcap,
                  "SELECT t, used, cached, 1, used, lim, reserve FROM samples WHERE pid = 0 AND card = ?1"
                  " AND tenant = ?2 AND t >= ?3 AND t < ?4 ORDER BY t",
                  since, until, 0) ||
        load_events(s, x, since, until))
      goto fail;
    qsort(x->pts, (size_t)x->npts, sizeof *x->pts, cmp_point);
    judge(x);
  }
  return 0;
fail:
  snprintf(err, errlen, "history database %s: %s", s->path, sqlite3_errmsg(s->db));
  vs_history_free(h);
  return -1;
}

void vs_history_free(vs_history *h) {
  for (int i = 0; i < h->n; i++) {
    free(h->t[i].pts);
    free(h->t[i].days);
    free(h->t[i].marks);
    free(h->t[i].acts);
  }
  free(h->t);
  memset(h, 0, sizeof *h);
}

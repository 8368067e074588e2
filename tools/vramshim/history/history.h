/* vramshim history (issue 26): what the history database says about each
 * tenant over a window: its usage against reserve and limit, a drift
 * verdict, the slope per week, when it reaches its limit at that slope,
 * refusals and warnings per day, and the threshold actions run. Loading
 * and fitting in history_fit.c; text, JSON and SVG in history_out.c. */
#ifndef VS_HISTORY_H
#define VS_HISTORY_H
#include <stdint.h>
#include <stdio.h>

#include "store.h"

#define VS_HIST_WEEK_MS (7 * VS_STORE_DAY_MS)

/* One point of a tenant's series: a raw sample (w = 1) or an aggregate's
 * mean at the middle of its hour or day (w = its samples). */
typedef struct vs_hist_point {
  int64_t t;
  double used, cached, w;
  double used_max;
} vs_hist_point;

typedef struct vs_hist_day {
  char date[12];                /* YYYY-MM-DD, UTC */
  int refusals, warnings, spills;
} vs_hist_day;

typedef struct vs_hist_mark {   /* an event on the plot */
  int64_t t;
  char kind[12];                /* "limit" (a refusal), "warn", "spill" */
} vs_hist_mark;

typedef struct vs_hist_action {
  int64_t t, duration_ms;
  char event[12], status[16], program[256], output[2048];
  int exit_code, has_exit_code;
} vs_hist_action;

typedef enum {
  VS_DRIFT_NOT_ENOUGH_DATA,
  VS_DRIFT_FLAT,
  VS_DRIFT_LEAK,                /* live memory rising: a leak or a growing workload */
  VS_DRIFT_FRAGMENTATION,       /* held - live rising while live is flat: fragmentation or caching */
  VS_DRIFT_FALLING,
} vs_drift;

typedef struct vs_hist_tenant {
  char card[64], tenant[64];
  uint64_t limit, reserve;      /* the latest; limit UINT64_MAX = none */
  vs_hist_point *pts;
  int npts;
  int64_t first, last;
  double used_now, cached_now, used_min, used_max, used_mean;
  double slope_used, slope_live, slope_cached; /* bytes per week */
  vs_drift drift;
  int has_forecast;             /* at the used slope it reaches the limit */
  int64_t limit_at;
  double days_to_limit;         /* from the last sample */
  const char *forecast_note;    /* why there is none, or "at its limit now" */
  vs_hist_day *days;
  int ndays;
  vs_hist_mark *marks;
  int nmarks;
  vs_hist_action *acts;
  int nacts;
} vs_hist_tenant;

typedef struct vs_history {
  char db[512];
  int64_t since, until;         /* the window asked for (Unix ms) */
  vs_hist_tenant *t;
  int n;
} vs_history;

/* Loads every (card, tenant) of the window, filtered by tenant and card
 * when not NULL, and fits each. 0, or -1 with err. */
int vs_history_load(vs_store *s, int64_t since, int64_t until, const char *tenant, const char *card, vs_history *h,
                    char *err, size_t errlen);
void vs_history_free(vs_history *h);
const char *vs_drift_name(vs_drift d);   /* the JSON word */
const char *vs_drift_text(vs_drift d);   /* plain words */

void vs_history_text(const vs_history *h, FILE *out);
/* 0, or -1 (out of memory, write error). */
int vs_history_json(const vs_history *h, FILE *out);
int vs_history_svg(const vs_history *h, FILE *out);
#endif

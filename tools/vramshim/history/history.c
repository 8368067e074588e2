/* vramshim history [--db FILE] [--tenant T] [--card C] [--since 60d] [--json] [--svg FILE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "commands.h"
#include "file.h"
#include "history.h"
#include "units.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: vramshim history [--db FILE] [--tenant T] [--card C] [--since 60d] [--json] [--svg FILE]\n"
          "  What `vramshim record` kept: per tenant, usage against its reservation and limit\n"
          "  over the window, a drift verdict (live memory rising: a leak or a growing workload;\n"
          "  held minus live rising while live is flat: fragmentation or caching; flat), the\n"
          "  slope per week, when the tenant reaches its limit at that slope, refusals and\n"
          "  warnings per day, and the threshold actions run (and whether they failed).\n"
          "  --since D   the window: 90m, 12h, 60d, 8w (default 60d)\n"
          "  --card C    a card by its id (as `vramshim status` shows it) or its index\n"
          "  --json      one JSON document (docs/schemas/history.schema.json)\n"
          "  --svg FILE  a plot per tenant: usage, cache, limit, reservation, events\n");
}

/* 90m, 12h, 60d, 8w, or what the config's durations take (ms, s, min). */
static int parse_since(const char *v, int64_t *ms) {
  char *end;
  double n = strtod(v, &end);
  if (end == v || n <= 0) return -1;
  double unit = !strcmp(end, "d") ? 86400e3 : !strcmp(end, "h") ? 3600e3 : !strcmp(end, "w") ? 7 * 86400e3
                : !strcmp(end, "m") ? 60e3 : 0;
  if (unit) {
    *ms = (int64_t)(n * unit);
    return 0;
  }
  uint64_t d;
  if (vs_parse_duration_ms(v, &d)) return -1;
  *ms = (int64_t)d;
  return 0;
}

int cmd_history(int argc, char **argv) {
  char db[512] = "";
  const char *tenant = NULL, *card = NULL, *svg = NULL;
  int64_t window = 60 * VS_STORE_DAY_MS;
  int json = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--json")) {
      json = 1;
    } else if (v && !strcmp(a, "--db")) {
      snprintf(db, sizeof db, "%s", v), i++;
    } else if (v && !strcmp(a, "--tenant")) {
      tenant = v, i++;
    } else if (v && !strcmp(a, "--card")) {
      card = v, i++;
    } else if (v && !strcmp(a, "--svg")) {
      svg = v, i++;
    } else if (v && !strcmp(a, "--since")) {
      if (parse_since(v, &window)) {
        fprintf(stderr, "vramshim: history: bad --since '%s': expected e.g. 90m, 12h, 60d, 8w\n", v);
        return 2;
      }
      i++;
    } else {
      fprintf(stderr, "vramshim: history: unexpected argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  int fallback;
  if (!db[0]) vs_store_default_path(0, db, sizeof db, &fallback);
  vs_store st;
  char err[1024];
  if (vs_store_open_reader(db, &st, err, sizeof err)) {
    fprintf(stderr, "vramshim: %s\n", err);
    return 1;
  }
  int64_t until = (int64_t)(vs_clock_ns(CLOCK_REALTIME) / 1000000ull) + 1;
  vs_history h;
  if (vs_history_load(&st, until - window, until, tenant, card, &h, err, sizeof err)) {
    fprintf(stderr, "vramshim: %s\n", err);
    vs_store_close(&st);
    return 1;
  }
  vs_store_close(&st);
  int rc = 0;
  if (svg) {
    FILE *f = vs_plat_fopen_regular(svg, "w");
    if (!f || vs_history_svg(&h, f) || fclose(f)) {
      fprintf(stderr, "vramshim: cannot write %s\n", svg);
      rc = 1;
    } else if (!json) {
      fprintf(stderr, "vramshim: wrote %s (%d tenant%s)\n", svg, h.n, h.n == 1 ? "" : "s");
    }
  }
  if (json) {
    if (vs_history_json(&h, stdout)) rc = 1;
  } else if (!svg) {
    vs_history_text(&h, stdout);
  }
  vs_history_free(&h);
  return rc;
}

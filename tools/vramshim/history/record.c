/* vramshim record: samples every card's ledger into the history database
 * (store.h) every --interval, runs the threshold actions (actions.h), and
 * aggregates and prunes as it goes. Reads the ledgers only through the
 * public read path `vramshim status` uses (ledger_read.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "action.h"
#include "actions.h"
#include "clock.h"
#include "commands.h"
#include "config.h"
#include "ledger_read.h"
#include "log.h"
#include "store.h"

#define MAX_LEDGERS 64
#define CONFIG_RELOAD_MS 30000
#define MAX_FAILED_PASSES 3   /* passes in a row that fail, each after a reopen, before the recorder stops */

static volatile sig_atomic_t stop_flag;
static void on_stop(int sig) {
  (void)sig;
  stop_flag = 1;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: vramshim record [--interval 10s] [--db FILE] [--ledger-dir DIR] [--config FILE]\n"
          "                       [--action-timeout 30s] [--once]\n"
          "  Samples every card's ledger every interval into FILE (SQLite; default\n"
          "  $VRAMSHIM_HISTORY_DB, else /var/lib/vramshim/history.db, else a per-user file):\n"
          "  per card, tenant and process the bytes used, cached, spilled, the limit and the\n"
          "  reserve, and every ledger event. Raw samples are kept 14 days, hourly aggregates\n"
          "  90 days, daily ones a year. Runs the config's on_warn / on_refuse actions once per\n"
          "  crossing. One recorder per database. Read it with `vramshim history`.\n"
          "  --once  one pass (sample, actions, aggregation), then exit\n");
}

static int64_t now_ms(void) { return (int64_t)(vs_clock_ns(CLOCK_REALTIME) / 1000000ull); }

static void sleep_ms(uint64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000l};
  while (!stop_flag && nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

/* The config for the actions and warn_at: --config, else the one the shim
 * loads. NULL (no actions) when there is none or it does not parse. */
static vs_config *load_config(const char *file, vs_config *cfg, uint64_t *gen_seen) {
  char err[VS_ERR_MAX];
  int r = file ? vs_config_parse_file(file, cfg, err, sizeof err) : vs_config_load_env(cfg, err, sizeof err);
  if (r < 0) {
    if (*gen_seen != 1) VS_ERROR("%s; threshold actions are off until it is fixed", err);
    *gen_seen = 1;
    return NULL;
  }
  if (cfg->generation != *gen_seen && *gen_seen)
    VS_WARN("config %s (generation %016llx) loaded for the threshold actions", cfg->file,
            (unsigned long long)cfg->generation);
  *gen_seen = cfg->generation;
  return r == 1 ? NULL : cfg;
}

/* One pass: a snapshot of every ledger in one transaction. 0, -1 with err
 * (the database failed). */
static int pass(vs_store *st, const char *dir, vs_ledger_snapshot *snap, vs_actions_state *acts, const vs_config *cfg,
                int64_t t, uint64_t act_from_ns, char *err, size_t errlen) {
  static char ids[MAX_LEDGERS][VS_NAME_MAX];
  char lerr[VS_ERR_MAX];
  int n = vs_ledger_list(dir, ids, MAX_LEDGERS, lerr, sizeof lerr);
  if (n < 0) n = 0; /* no ledger yet: nothing to record */
  if (vs_store_exec(st, "BEGIN IMMEDIATE", err, errlen)) goto db_fail;
  for (int c = 0; c < n; c++) {
    if (vs_ledger_snapshot_read(dir, ids[c], snap, lerr, sizeof lerr)) continue;
    if (vs_store_card(st, t, snap->card_id, snap->card_index, snap->capacity, snap->headroom)) goto db_fail;
    const vs_snap_event *fresh[VS_SNAP_EVENTS];
    int nfresh = 0;
    for (int e = 0; e < snap->nevents; e++) {
      const vs_snap_event *ev = &snap->events[e];
      int r = vs_store_event(st, ev->time_ns, snap->card_id, ev->tenant, ev->pid, ev->kind, ev->bytes, ev->used,
                             ev->limit);
      if (r < 0) goto db_fail;
      /* Stored once; acted on only when it happened while recording (an old
       * refusal in the ring of a first pass is history, not a crossing). */
      if (r && ev->time_ns >= act_from_ns) fresh[nfresh++] = ev;
    }
    for (int k = 0; k < snap->ntenants; k++) {
      const vs_snap_tenant *x = &snap->tenants[k];
      uint64_t cached = 0;
      for (int p = 0; p < snap->nprocs; p++) {
        const vs_snap_proc *q = &snap->procs[p];
        if (!q->alive || strcmp(q->tenant, x->name)) continue;
        uint64_t qc = q->held > q->live ? q->held - q->live : 0;
        cached += qc;
        if (vs_store_sample(st, t, snap->card_id, x->name, q->pid, q->held, qc, q->spilled, 0, x->limit, x->reserve))
          goto db_fail;
      }
      if (vs_store_sample(st, t, snap->card_id, x->name, 0, x->used, cached, x->spilled, 0, x->limit, x->reserve))
        goto db_fail;
    }
    vs_actions_pass(acts, st, cfg, snap, fresh, nfresh, t);
  }
  return vs_store_exec(st, "COMMIT", err, errlen);
db_fail:
  if (!err[0] || !strstr(err, "history database"))
    snprintf(err, errlen, "history database %s: %s", st->path, sqlite3_errmsg(st->db));
  sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
  return -1;
}

int cmd_record(int argc, char **argv) {
  char db[512] = "", dir[VS_PATH_MAX] = "";
  const char *config = NULL;
  uint64_t interval = 10000, timeout = 30000;
  int once = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--once")) {
      once = 1;
    } else if (v && (!strcmp(a, "--interval") || !strcmp(a, "--action-timeout"))) {
      uint64_t *dst = a[2] == 'i' ? &interval : &timeout;
      if (vs_parse_duration_ms(v, dst) || !*dst) {
        fprintf(stderr, "vramshim: record: bad duration '%s' for %s: expected e.g. 200ms, 10s, 1min\n", v, a);
        return 2;
      }
      i++;
    } else if (v && !strcmp(a, "--db")) {
      snprintf(db, sizeof db, "%s", v), i++;
    } else if (v && !strcmp(a, "--ledger-dir")) {
      snprintf(dir, sizeof dir, "%s", v), i++;
    } else if (v && !strcmp(a, "--config")) {
      config = v, i++;
    } else {
      fprintf(stderr, "vramshim: record: unexpected argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  char err[1024], note[1024];
  int fallback = 0;
  if (!db[0]) {
    vs_store_default_path(1, db, sizeof db, &fallback);
    if (fallback)
      fprintf(stderr, "vramshim: %s is not writable by this user; recording into %s\n", vs_plat_system_state_dir(), db);
  }
  if (!dir[0] && vs_config_ledger_dir(dir, sizeof dir, err, sizeof err))
    fprintf(stderr, "vramshim: %s\nvramshim: using the default ledger dir %s\n", err, dir);
  vs_store st;
  int r = vs_store_open_writer(db, &st, note, sizeof note, err, sizeof err);
  if (r) {
    fprintf(stderr, "vramshim: %s\n", err);
    return r == VS_STORE_BUSY ? 3 : 1;
  }
  if (note[0]) fprintf(stderr, "vramshim: %s\n", note);
  vs_ledger_snapshot *snap = malloc(sizeof *snap);
  vs_config *cfgbuf = malloc(sizeof *cfgbuf);
  vs_actions_state *acts = vs_actions_new(timeout, db);
  if (!snap || !cfgbuf || !acts) {
    fprintf(stderr, "vramshim: out of memory\n");
    return 1;
  }
  signal(SIGINT, on_stop);
  signal(SIGTERM, on_stop);
  uint64_t gen = 0;
  const vs_config *cfg = load_config(config, cfgbuf, &gen);
  if (!once)
    fprintf(stderr, "vramshim: recording the ledgers of %s into %s every %.3g s\n", dir, db, (double)interval / 1000.0);
  int64_t last_hour = -1;
  /* Events from one interval before the start on are acted on. */
  uint64_t act_from_ns = vs_clock_ns(CLOCK_REALTIME) - interval * 1000000ull;
  uint64_t next = vs_mono_ns(), last_cfg = vs_mono_ns();
  int rc = 0, failed_passes = 0;
  while (!stop_flag) {
    int64_t t = now_ms();
    if (vs_mono_ns() - last_cfg > CONFIG_RELOAD_MS * 1000000ull) {
      cfg = load_config(config, cfgbuf, &gen);
      last_cfg = vs_mono_ns();
    }
    if (!vs_store_still_there(&st)) {
      /* Removed or replaced under the recorder (an operator's rm, a
       * restore): writing on would go into a file nobody can read. */
      fprintf(stderr, "vramshim: history database %s was removed or replaced while recording; opening it again\n", db);
      vs_store_close(&st);
      r = vs_store_open_writer(db, &st, note, sizeof note, err, sizeof err);
      if (r) {
        fprintf(stderr, "vramshim: %s\n", err);
        rc = r == VS_STORE_BUSY ? 3 : 1;
        break;
      }
    }
    err[0] = 0;
    if (pass(&st, dir, snap, acts, cfg, t, act_from_ns, err, sizeof err)) {
      /* The pass is lost; the database is opened again and recording goes
       * on: damaged, opening moves it aside and makes it anew; removed in
       * the middle of the pass (SQLite refuses to write into an unlinked
       * file), or a passing error, it is simply opened again. Only a
       * database that cannot be opened, or passes that keep failing
       * (MAX_FAILED_PASSES in a row), stop the recorder. */
      fprintf(stderr, "vramshim: %s\n", err);
      vs_store_close(&st);
      if (++failed_passes >= MAX_FAILED_PASSES || vs_store_open_writer(db, &st, note, sizeof note, err, sizeof err)) {
        if (failed_passes < MAX_FAILED_PASSES) fprintf(stderr, "vramshim: %s\n", err);
        else fprintf(stderr, "vramshim: %d passes in a row failed; stopping\n", failed_passes);
        rc = 1;
        break;
      }
      fprintf(stderr, "vramshim: %s\n", note[0] ? note : "history database reopened");
    } else {
      failed_passes = 0;
    }
    vs_actions_poll(acts, &st);
    if (t / VS_STORE_HOUR_MS != last_hour) {
      if (vs_store_maintain(&st, t, err, sizeof err)) fprintf(stderr, "vramshim: %s\n", err);
      last_hour = t / VS_STORE_HOUR_MS;
    }
    if (once) {
      /* The actions this pass started: waited for, within their timeout. */
      while (vs_actions_running(acts)) {
        sleep_ms(20);
        vs_actions_poll(acts, &st);
      }
      break;
    }
    next += interval * 1000000ull;
    uint64_t now = vs_mono_ns();
    if (next < now) next = now; /* a slow pass: the next one starts at once, none are caught up */
    /* Actions are polled every 50 ms while they run (their timeouts and
     * output). The clock is read once per turn: read twice (once to test,
     * once for what is left), a turn that crossed `next` between the two
     * made `next - now` wrap around and slept for centuries -- the
     * recorder stopped recording without a word until it was signalled
     * (history_record and history_actions, rarely, on a loaded machine). */
    for (;;) {
      uint64_t at = vs_mono_ns();
      if (stop_flag || at >= next) break;
      uint64_t left = (next - at) / 1000000ull;
      sleep_ms(vs_actions_running(acts) && left > 50 ? 50 : left);
      vs_actions_poll(acts, &st);
    }
  }
  vs_actions_poll(acts, &st);
  vs_actions_free(acts);
  vs_store_close(&st);
  free(snap);
  free(cfgbuf);
  return rc;
}

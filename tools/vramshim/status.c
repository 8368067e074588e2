/* vramshim status: every card's ledger, read without taking any lock a
 * writer waits on. Table (default), --json, --prometheus; --events adds the
 * event ring. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "config.h"
#include "json.h"
#include "ledger_read.h"
#include "log.h"
#include "text_escape.h"
#include "sbuf.h"
#include "timeutil.h"

#define MAX_LEDGERS 64

enum fmt { FMT_TABLE, FMT_JSON, FMT_PROM };

static void usage(FILE *out) {
  fprintf(out,
          "usage: vramshim status [--ledger-dir DIR] [--json | --prometheus] [--events]\n"
          "  Usage of every tenant and process on each card, from the ledgers in DIR\n"
          "  (default: ledger_dir of $VRAMSHIM_CONFIG or /etc/vramshim.conf, else %s).\n"
          "  --json        one JSON document (docs/schemas/status.schema.json)\n"
          "  --prometheus  text exposition format (node_exporter textfile collector)\n"
          "  --events      also the recent events: warn, limit, reclaim, spill, unanswered\n",
          VS_DEFAULT_LEDGER_DIR);
}

static const char *bytes(uint64_t b, char buf[32]) { return vs_bytes_or_none(b, buf, 32); }

/* A name or path read from a ledger file, control characters escaped
 * (text_escape.h): the table's lines stay the table's. Four buffers in turn. */
static const char *esc(const char *s) {
  static char buf[4][4 * VS_PATH_MAX];
  static int k;
  k = (k + 1) % 4;
  return vs_text_escape(s, buf[k], sizeof buf[k]);
}

static void fmt_time(uint64_t ns, char *buf, size_t len) {
  time_t t = (time_t)(ns / 1000000000ull);
  struct tm tm;
  vs_plat_localtime(t, &tm);
  size_t n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(buf + n, len - n, ".%03u", (unsigned)(ns / 1000000ull % 1000));
}

/* ---- Table --------------------------------------------------------------- */
static void print_table(const char *dir, const vs_ledger_snapshot *s, int events) {
  char a[32], b[32], c[32], d[32];
  printf("card %s: capacity %s, headroom %s (%s/card-%s.ledger)\n", esc(s->card_id), bytes(s->capacity, a),
         bytes(s->headroom, b), esc(dir), esc(s->card_id));
  /* Columns only on a card where some tenant needs them, so other tables
   * stay as they were: spilled host bytes (on_limit = spill, issue 13)
   * where some tenant spills; the true footprint's overhead, part of used
   * (issue 24), where some process has any; arena caches the processes
   * would give back when asked, where some process keeps one. */
  int spill = 0, over = 0, cache = 0;
  for (int t = 0; t < s->ntenants; t++) {
    spill |= s->tenants[t].spill_max || s->tenants[t].spilled;
    over |= s->tenants[t].overhead != 0;
    cache |= s->tenants[t].cached != 0;
  }
  printf("  %-16s %12s %12s %12s %12s %7s %6s", "tenant", "reserve", "limit", "used", "peak", "share", "procs");
  if (over) printf(" %12s", "overhead");
  if (cache) printf(" %12s", "cached");
  if (spill) printf(" %12s %12s", "spilled", "spill max");
  printf("\n");
  uint64_t taken = s->headroom, used = 0, spilled = 0;
  for (int t = 0; t < s->ntenants; t++) {
    const vs_snap_tenant *x = &s->tenants[t];
    printf("  %-16s %12s %12s %12s %12s %6.1f%% %6d", esc(x->name), bytes(x->reserve, a), bytes(x->limit, b),
           bytes(x->used, c), bytes(x->peak, d), s->capacity ? 100.0 * (double)x->used / (double)s->capacity : 0.0,
           x->nprocs);
    if (over) printf(" %12s", bytes(x->overhead, a));
    if (cache) printf(" %12s", bytes(x->cached, a));
    if (spill) printf(" %12s %12s", bytes(x->spilled, a), x->spill_max ? bytes(x->spill_max, b) : "-");
    printf("\n");
    taken += x->used > x->reserve ? x->used : x->reserve;
    used += x->used;
    spilled += x->spilled;
  }
  printf("  used by tenants %s; free for any tenant (outside reservations and headroom) %s\n", bytes(used, a),
         bytes(taken < s->capacity ? s->capacity - taken : 0, b));
  if (spilled)
    printf("  spilled to host memory %s (not on the card: served over the bus, slowly)\n", bytes(spilled, a));
  if (over)
    printf("  overhead: what the driver says the processes hold beyond their allocations (contexts, modules, "
           "libraries' workspaces), part of used (docs/nvml.md)\n");
  if (cache)
    printf("  cached: free memory the processes' arenas keep in whole free chunks or handles, part of used; given back "
           "when another process needs it (docs/config.md, \"The admission rule\"); free space beside live blocks in "
           "a chunk or handle is not in it (held - live - overhead - cached; vramshim dump shows where)\n");
  /* Where each reservation comes from: it holds while a live process runs
   * under a config that has it, and ends with the last one. */
  for (int t = 0; t < s->ntenants; t++) {
    const vs_snap_tenant *x = &s->tenants[t];
    if (!x->reserve_procs) continue;
    printf("  reservation of %s (%s) held by the config of %d live process%s: pid", esc(x->name), bytes(x->reserve, a),
           x->reserve_procs, x->reserve_procs == 1 ? "" : "es");
    for (int k = 0; k < x->reserve_procs && k < VS_SNAP_RESERVE_PIDS; k++) printf("%s %d", k ? "," : "", x->reserve_pids[k]);
    printf("%s\n", x->reserve_procs > VS_SNAP_RESERVE_PIDS ? ", ..." : "");
  }
  if (s->nprocs) {
    printf("  %-8s %-16s %12s %12s %12s  %-16s", "pid", "tenant", "held", "live", "peak", "config");
    if (over) printf(" %12s", "overhead");
    if (cache) printf(" %12s", "cached");
    if (spill) printf(" %12s", "spilled");
    printf("\n");
    for (int i = 0; i < s->nprocs; i++) {
      const vs_snap_proc *p = &s->procs[i];
      printf("  %-8d %-16s %12s %12s %12s  %016" PRIx64, p->pid, esc(p->tenant), bytes(p->held, a), bytes(p->live, b),
             bytes(p->peak, c), p->generation);
      if (over) printf(" %12s", bytes(p->overhead, d));
      if (cache) printf(" %12s", bytes(p->cached, d));
      if (spill) printf(" %12s", bytes(p->spilled, d));
      printf("%s\n", p->alive ? "" : "  (dead, reclaim pending)");
    }
  } else {
    printf("  no process is using this card\n");
  }
  if (s->generations > 1)
    printf("  note: processes on this card run %d different config generations; the newest plan is %016" PRIx64
           " (restart the others to apply it)\n",
           s->generations, s->generation);
  if (s->dead_bytes)
    printf("  note: dead processes still hold %s in the ledger; it is reclaimed at the next allocation on the card\n",
           bytes(s->dead_bytes, a));
  if (!s->consistent) printf("  note: the ledger was changing while read (or a writer died mid-update); figures may be off\n");
  if (events) {
    if (!s->nevents) printf("  no events\n");
    else printf("  %-23s %-8s %-16s %-8s %12s %12s %12s\n", "time", "pid", "tenant", "event", "bytes", "used", "limit");
    for (int e = 0; e < s->nevents; e++) {
      const vs_snap_event *ev = &s->events[e];
      char when[48];
      fmt_time(ev->time_ns, when, sizeof when);
      printf("  %-23s %-8d %-16s %-8s %12s %12s %12s\n", when, ev->pid, esc(ev->tenant), ev->kind, bytes(ev->bytes, a),
             bytes(ev->used, b), bytes(ev->limit, c));
    }
  }
}

/* After the tables: each failed threshold action of the last day (issue 26). */
static void print_failed_actions(const vs_failed_action *fa, int nfa) {
  for (int i = 0; i < nfa; i++) {
    const vs_failed_action *a = &fa[i];
    time_t t = (time_t)(a->t_ms / 1000);
    struct tm tm;
    char when[32], how[64];
    vs_plat_localtime(t, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    if (a->has_exit_code) snprintf(how, sizeof how, "exit status %d", a->exit_code);
    else snprintf(how, sizeof how, "%s", a->status);
    printf("vramshim: threshold action on_%s of tenant %s on card %s failed at %s (%s): %s; see `vramshim history`\n",
           a->event, a->tenant, a->card, when, how, a->program);
  }
}

/* ---- JSON ------------------------------------------------------------------ */
/* docs/schemas/status.schema.json; a field added keeps the major version
 * (1.1: actions_failed; 1.2: a card's index may be null; 1.3: overhead;
 * 1.4: cached, 1.5: the event kind unanswered). */
#define STATUS_SCHEMA_VERSION "1.5"

static void json_card(vs_jw *w, const vs_ledger_snapshot *s, int events) {
  vs_jw_object(w, VS_JSON_BLOCK);
  vs_jw_kstr(w, "card", s->card_id);
  /* The card's physical index (CUDA's number for it without CUDA_VISIBLE_DEVICES); null until a process
   * that knows it has used the card (docs/config.md, "Cards"). */
  if (s->card_index >= 0) vs_jw_ki64(w, "index", s->card_index);
  else {
    vs_jw_key(w, "index");
    vs_jw_null(w);
  }
  vs_jw_ku64(w, "capacity", s->capacity);
  vs_jw_ku64(w, "headroom", s->headroom);
  vs_jw_key(w, "generation");
  vs_jw_strf(w, "%016" PRIx64, s->generation);
  vs_jw_ki64(w, "generations", s->generations);
  vs_jw_kbool(w, "consistent", s->consistent);
  vs_jw_ku64(w, "dead_bytes", s->dead_bytes);
  vs_jw_ku64(w, "dead_spilled", s->dead_spilled);
  vs_jw_key(w, "tenants");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (int t = 0; t < s->ntenants; t++) {
    const vs_snap_tenant *x = &s->tenants[t];
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_kstr(w, "name", x->name);
    vs_jw_ku64(w, "reserve", x->reserve);
    vs_jw_ku64_or_null(w, "limit", x->limit, VS_NO_LIMIT);
    vs_jw_ku64(w, "used", x->used);
    vs_jw_ku64(w, "peak", x->peak);
    vs_jw_kfixed(w, "share", s->capacity ? (double)x->used / (double)s->capacity : 0.0, 4);
    vs_jw_ki64(w, "processes", x->nprocs);
    /* issue 24: of used, the processes' footprint beyond what the shim counted */
    vs_jw_ku64(w, "overhead", x->overhead);
    /* of used, what its processes' arenas would give back when asked */
    vs_jw_ku64(w, "cached", x->cached);
    /* The reservation's holders: how many live processes, the first pids. */
    vs_jw_ki64(w, "reserve_processes", x->reserve_procs);
    vs_jw_key(w, "reserve_held_by");
    vs_jw_array(w, VS_JSON_INLINE);
    for (int k = 0; k < x->reserve_procs && k < VS_SNAP_RESERVE_PIDS; k++) vs_jw_i64(w, x->reserve_pids[k]);
    vs_jw_end(w);
    /* on_limit = spill (issue 13): host bytes, never part of used; spill_max null when the tenant does not spill */
    vs_jw_ku64(w, "spilled", x->spilled);
    vs_jw_ku64(w, "spill_peak", x->spill_peak);
    vs_jw_ku64_or_null(w, "spill_max", x->spill_max, 0);
    vs_jw_end(w);
  }
  vs_jw_end(w);
  vs_jw_key(w, "processes");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (int i = 0; i < s->nprocs; i++) {
    const vs_snap_proc *p = &s->procs[i];
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_ki64(w, "pid", p->pid);
    vs_jw_kstr(w, "tenant", p->tenant);
    vs_jw_ku64(w, "held", p->held);
    vs_jw_ku64(w, "live", p->live);
    vs_jw_ku64(w, "peak", p->peak);
    vs_jw_key(w, "generation");
    vs_jw_strf(w, "%016" PRIx64, p->generation);
    vs_jw_kbool(w, "alive", p->alive);
    vs_jw_ku64(w, "spilled", p->spilled);
    vs_jw_ku64(w, "spill_peak", p->spill_peak);
    vs_jw_ku64(w, "overhead", p->overhead);
    vs_jw_ku64(w, "cached", p->cached);
    vs_jw_end(w);
  }
  vs_jw_end(w);
  if (events) {
    vs_jw_key(w, "events");
    vs_jw_array(w, VS_JSON_BLOCK);
    for (int e = 0; e < s->nevents; e++) {
      const vs_snap_event *ev = &s->events[e];
      vs_jw_object(w, VS_JSON_INLINE);
      vs_jw_ku64(w, "time_ns", ev->time_ns);
      vs_jw_ki64(w, "pid", ev->pid);
      vs_jw_kstr(w, "tenant", ev->tenant);
      vs_jw_kstr(w, "kind", ev->kind);
      vs_jw_ku64(w, "bytes", ev->bytes);
      vs_jw_ku64(w, "used", ev->used);
      vs_jw_ku64_or_null(w, "limit", ev->limit, VS_NO_LIMIT);
      vs_jw_end(w);
    }
    vs_jw_end(w);
  }
  vs_jw_end(w);
}

static int print_json(const char *dir, vs_ledger_snapshot **snaps, int n, int events, const vs_failed_action *fa,
                      int nfa) {
  vs_jw w;
  vs_jw_init(&w, 0);
  vs_jw_object(&w, VS_JSON_BLOCK);
  vs_jw_kstr(&w, "schema_version", STATUS_SCHEMA_VERSION);
  vs_jw_kstr(&w, "generator", "vramshim");
  vs_jw_kstr(&w, "ledger_dir", dir);
  vs_jw_key(&w, "cards");
  vs_jw_array(&w, VS_JSON_BLOCK);
  for (int i = 0; i < n; i++) json_card(&w, snaps[i], events);
  vs_jw_end(&w);
  vs_jw_key(&w, "actions_failed");
  vs_jw_array(&w, VS_JSON_BLOCK);
  for (int i = 0; i < nfa; i++) {
    const vs_failed_action *a = &fa[i];
    vs_jw_object(&w, VS_JSON_INLINE);
    vs_jw_ku64(&w, "time_ns", a->t_ms > 0 ? (uint64_t)a->t_ms * 1000000ull : 0);
    vs_jw_kstr(&w, "card", a->card);
    vs_jw_kstr(&w, "tenant", a->tenant);
    vs_jw_kstr(&w, "event", a->event);
    vs_jw_kstr(&w, "program", a->program);
    vs_jw_kstr(&w, "status", a->status);
    vs_jw_key(&w, "exit_code");
    if (a->has_exit_code) vs_jw_i64(&w, a->exit_code);
    else vs_jw_null(&w);
    vs_jw_ku64(&w, "duration_ms", a->duration_ms > 0 ? (uint64_t)a->duration_ms : 0);
    vs_jw_kstr(&w, "output", a->output);
    vs_jw_end(&w);
  }
  vs_jw_end(&w);
  vs_jw_end(&w);
  if (vs_jw_print(&w, stdout)) {
    fprintf(stderr, "vramshim: status: out of memory writing the JSON\n");
    return 1;
  }
  return 0;
}

/* ---- Prometheus -------------------------------------------------------------- */
static void prom_label(const char *s) {
  for (; *s; s++) {
    if (*s == '\\' || *s == '"') printf("\\%c", *s);
    else if (*s == '\n') printf("\\n");
    else putchar(*s);
  }
}

enum { M_CAP, M_HEAD, M_GENS, M_DEAD, M_RES, M_LIM, M_USED, M_PEAK, M_PROCS, M_SPILLED, M_SPILL_MAX, M_TOVER,
       M_TCACHED, M_HELD, M_LIVE, M_PSPILLED, M_POVER, M_PCACHED, M_EVENTS, M_ACTIONS_FAILED, M_N };
static const char *const prom_names[M_N][2] = {
    {"vramshim_card_capacity_bytes", "Capacity of the card in the newest process's plan."},
    {"vramshim_card_headroom_bytes", "Headroom of the card: never given to any tenant."},
    {"vramshim_card_config_generations", "Distinct config generations among the processes on the card."},
    {"vramshim_card_dead_bytes", "Bytes held by dead processes, not yet reclaimed."},
    {"vramshim_tenant_reserve_bytes", "Bytes reserved for the tenant on the card."},
    {"vramshim_tenant_limit_bytes", "Limit of the tenant on the card (absent when none)."},
    {"vramshim_tenant_used_bytes", "Device bytes held by the tenant's live processes."},
    {"vramshim_tenant_peak_bytes", "Highest usage of the tenant since the ledger was created."},
    {"vramshim_tenant_processes", "Live processes of the tenant on the card."},
    {"vramshim_tenant_spilled_bytes", "Host bytes the tenant's live processes serve in place of device memory (on_limit = spill)."},
    {"vramshim_tenant_spill_max_bytes", "Most host bytes the tenant may spill on the card (absent when on_limit is not spill)."},
    {"vramshim_tenant_overhead_bytes", "Of the tenant's used bytes: what its processes hold beyond what the shim counted (contexts' own memory, as the driver reports it)."},
    {"vramshim_tenant_cached_bytes", "Of the tenant's used bytes: free memory its processes' arenas keep and would give back when another process needs it."},
    {"vramshim_process_held_bytes", "Device bytes held by the process (its arena cache included)."},
    {"vramshim_process_live_bytes", "Bytes of the process's live allocations."},
    {"vramshim_process_spilled_bytes", "Host bytes the process serves in place of device memory (on_limit = spill)."},
    {"vramshim_process_overhead_bytes", "Of the process's held bytes: what the driver says it holds beyond what the shim counted."},
    {"vramshim_process_cached_bytes", "Of the process's held bytes: free memory its arenas keep and would give back when another process needs it."},
    {"vramshim_events_recent", "Events of each kind in the card's event ring (the most recent 256)."},
    {"vramshim_threshold_actions_failed", "Threshold actions (on_warn, on_refuse) that failed in the last 24 hours, from the history database."},
};

/* vramshim_threshold_actions_failed: one sample per (card, tenant, event)
 * with failures, from the history database rather than a ledger (a card
 * may have no ledger any more). */
static void prom_failed_actions(const vs_failed_action *fa, int nfa) {
  for (int i = 0; i < nfa; i++) {
    int seen = 0, count = 0;
    for (int k = 0; k < nfa; k++) {
      int same = !strcmp(fa[k].card, fa[i].card) && !strcmp(fa[k].tenant, fa[i].tenant) &&
                 !strcmp(fa[k].event, fa[i].event);
      if (same && k < i) seen = 1;
      count += same;
    }
    if (seen) continue;   /* counted at its first one */
    printf("%s{card=\"", prom_names[M_ACTIONS_FAILED][0]);
    prom_label(fa[i].card);
    printf("\",tenant=\"");
    prom_label(fa[i].tenant);
    printf("\",event=\"");
    prom_label(fa[i].event);
    printf("\"} %d\n", count);
  }
}

static void print_prom(vs_ledger_snapshot **snaps, int n, const vs_failed_action *fa, int nfa) {
  for (int m = 0; m < M_N; m++) {
    printf("# HELP %s %s\n# TYPE %s gauge\n", prom_names[m][0], prom_names[m][1], prom_names[m][0]);
    if (m == M_ACTIONS_FAILED) {
      prom_failed_actions(fa, nfa);
      continue;
    }
    for (int c = 0; c < n; c++) {
      const vs_ledger_snapshot *s = snaps[c];
      if (m <= M_DEAD) {
        uint64_t v = m == M_CAP ? s->capacity : m == M_HEAD ? s->headroom : m == M_GENS ? (uint64_t)s->generations
                                                                                        : s->dead_bytes;
        printf("%s{card=\"", prom_names[m][0]);
        prom_label(s->card_id);
        printf("\"} %" PRIu64 "\n", v);
      } else if (m <= M_TCACHED) {
        for (int t = 0; t < s->ntenants; t++) {
          const vs_snap_tenant *x = &s->tenants[t];
          uint64_t v = m == M_RES ? x->reserve : m == M_LIM ? x->limit : m == M_USED ? x->used
                       : m == M_PEAK ? x->peak : m == M_SPILLED ? x->spilled : m == M_SPILL_MAX ? x->spill_max
                       : m == M_TOVER ? x->overhead : m == M_TCACHED ? x->cached : (uint64_t)x->nprocs;
          if (m == M_LIM && v == VS_NO_LIMIT) continue;
          if (m == M_SPILL_MAX && v == 0) continue;
          printf("%s{card=\"", prom_names[m][0]);
          prom_label(s->card_id);
          printf("\",tenant=\"");
          prom_label(x->name);
          printf("\"} %" PRIu64 "\n", v);
        }
      } else if (m <= M_PCACHED) {
        for (int i = 0; i < s->nprocs; i++) {
          const vs_snap_proc *p = &s->procs[i];
          if (!p->alive) continue;
          printf("%s{card=\"", prom_names[m][0]);
          prom_label(s->card_id);
          printf("\",tenant=\"");
          prom_label(p->tenant);
          printf("\",pid=\"%d\"} %" PRIu64 "\n", p->pid,
                 m == M_HELD ? p->held : m == M_LIVE ? p->live : m == M_POVER ? p->overhead
                 : m == M_PCACHED ? p->cached : p->spilled);
        }
      } else {
        for (int k = 0; k < VS_SNAP_EVENT_KINDS; k++) {
          int count = 0;
          for (int e = 0; e < s->nevents; e++) count += !strcmp(s->events[e].kind, vs_snap_event_kinds[k]);
          printf("%s{card=\"", prom_names[m][0]);
          prom_label(s->card_id);
          printf("\",kind=\"%s\"} %d\n", vs_snap_event_kinds[k], count);
        }
      }
    }
  }
}

int cmd_status(int argc, char **argv) {
  char dir[VS_PATH_MAX] = "";
  enum fmt fmt = FMT_TABLE;
  int events = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--json")) fmt = FMT_JSON;
    else if (!strcmp(argv[i], "--prometheus")) fmt = FMT_PROM;
    else if (!strcmp(argv[i], "--events")) events = 1;
    else if (!strcmp(argv[i], "--ledger-dir") && i + 1 < argc) snprintf(dir, sizeof dir, "%s", argv[++i]);
    else if (!strncmp(argv[i], "--ledger-dir=", 13)) snprintf(dir, sizeof dir, "%s", argv[i] + 13);
    else {
      fprintf(stderr, "vramshim: status: unexpected argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  static char ids[MAX_LEDGERS][VS_NAME_MAX];
  char err[VS_ERR_MAX];
  if (!dir[0] && vs_config_ledger_dir(dir, sizeof dir, err, sizeof err))
    fprintf(stderr, "vramshim: %s\nvramshim: using the default ledger dir %s\n", err, dir);
  int n = vs_ledger_list(dir, ids, MAX_LEDGERS, err, sizeof err);
  if (n < 0) {
    fprintf(stderr, "vramshim: no ledger: %s\nvramshim: no process with the shim has used a card yet, or it uses "
                    "another ledger_dir (--ledger-dir DIR)\n", err);
    return 1;
  }
  if (n == 0) {
    fprintf(stderr, "vramshim: no ledger in %s: no process with the shim has used a card yet, or it uses another "
                    "ledger_dir (--ledger-dir DIR)\n", dir);
    return 1;
  }
  vs_ledger_snapshot *snaps[MAX_LEDGERS];
  int got = 0, rc = 0;
  for (int i = 0; i < n; i++) {
    snaps[got] = malloc(sizeof *snaps[got]);
    if (snaps[got] && vs_ledger_snapshot_read(dir, ids[i], snaps[got], err, sizeof err) == 0) got++;
    else {
      fprintf(stderr, "vramshim: %s\n", snaps[got] ? err : "out of memory");
      free(snaps[got]);
      rc = 1;
    }
  }
  vs_failed_action *fa;
  int nfa = vs_history_failed_actions(&fa); /* threshold actions (issue 26) */
  if (fmt == FMT_JSON) {
    if (print_json(dir, snaps, got, events, fa, nfa)) rc = 1;
  } else if (fmt == FMT_PROM) {
    print_prom(snaps, got, fa, nfa);
  } else {
    for (int i = 0; i < got; i++) {
      if (i) printf("\n");
      print_table(dir, snaps[i], events);
    }
    print_failed_actions(fa, nfa);
  }
  free(fa);
  for (int i = 0; i < got; i++) free(snaps[i]);
  return rc;
}

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
#include "ledger_read.h"
#include "log.h"
#include "sbuf.h"
#include "timeutil.h"

#define MAX_LEDGERS 64

enum fmt { FMT_TABLE, FMT_JSON, FMT_PROM };

static void usage(FILE *out) {
  fprintf(out,
          "usage: vramshim status [--ledger-dir DIR] [--json | --prometheus] [--events]\n"
          "  Usage of every tenant and process on each card, from the ledgers in DIR\n"
          "  (default: ledger_dir of $VRAMSHIM_CONFIG or /etc/vramshim.conf, else %s).\n"
          "  --json        one JSON document\n"
          "  --prometheus  text exposition format (node_exporter textfile collector)\n"
          "  --events      also the recent events: warn, limit, reclaim, spill\n",
          VS_DEFAULT_LEDGER_DIR);
}

static const char *bytes(uint64_t b, char buf[32]) { return vs_bytes_or_none(b, buf, 32); }

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
  printf("card %s: capacity %s, headroom %s (%s/card-%s.ledger)\n", s->card_id, bytes(s->capacity, a),
         bytes(s->headroom, b), dir, s->card_id);
  /* Spilled host bytes (on_limit = spill, issue 13) get columns of their own
   * only on a card where some tenant spills: other tables stay as they were. */
  int spill = 0;
  for (int t = 0; t < s->ntenants; t++) spill |= s->tenants[t].spill_max || s->tenants[t].spilled;
  /* The true footprint (issue 24): overhead, part of used, gets a column
   * only on a card where some process has any. */
  int over = 0;
  for (int t = 0; t < s->ntenants; t++) over |= s->tenants[t].overhead != 0;
  printf("  %-16s %12s %12s %12s %12s %7s %6s", "tenant", "reserve", "limit", "used", "peak", "share", "procs");
  if (over) printf(" %12s", "overhead");
  if (spill) printf(" %12s %12s", "spilled", "spill max");
  printf("\n");
  uint64_t taken = s->headroom, used = 0, spilled = 0;
  for (int t = 0; t < s->ntenants; t++) {
    const vs_snap_tenant *x = &s->tenants[t];
    printf("  %-16s %12s %12s %12s %12s %6.1f%% %6d", x->name, bytes(x->reserve, a), bytes(x->limit, b),
           bytes(x->used, c), bytes(x->peak, d), s->capacity ? 100.0 * (double)x->used / (double)s->capacity : 0.0,
           x->nprocs);
    if (over) printf(" %12s", bytes(x->overhead, a));
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
  /* Where each reservation comes from: it holds while a live process runs
   * under a config that has it, and ends with the last one. */
  for (int t = 0; t < s->ntenants; t++) {
    const vs_snap_tenant *x = &s->tenants[t];
    if (!x->reserve_procs) continue;
    printf("  reservation of %s (%s) held by the config of %d live process%s: pid", x->name, bytes(x->reserve, a),
           x->reserve_procs, x->reserve_procs == 1 ? "" : "es");
    for (int k = 0; k < x->reserve_procs && k < VS_SNAP_RESERVE_PIDS; k++) printf("%s %d", k ? "," : "", x->reserve_pids[k]);
    printf("%s\n", x->reserve_procs > VS_SNAP_RESERVE_PIDS ? ", ..." : "");
  }
  if (s->nprocs) {
    printf("  %-8s %-16s %12s %12s %12s  %-16s", "pid", "tenant", "held", "live", "peak", "config");
    if (over) printf(" %12s", "overhead");
    if (spill) printf(" %12s", "spilled");
    printf("\n");
    for (int i = 0; i < s->nprocs; i++) {
      const vs_snap_proc *p = &s->procs[i];
      printf("  %-8d %-16s %12s %12s %12s  %016" PRIx64, p->pid, p->tenant, bytes(p->held, a), bytes(p->live, b),
             bytes(p->peak, c), p->generation);
      if (over) printf(" %12s", bytes(p->overhead, d));
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
      printf("  %-23s %-8d %-16s %-8s %12s %12s %12s\n", when, ev->pid, ev->tenant, ev->kind, bytes(ev->bytes, a),
             bytes(ev->used, b), bytes(ev->limit, c));
    }
  }
}

/* ---- JSON ------------------------------------------------------------------ */
/* Quoted and escaped as in dumps (vs_sb_json_str), to stdout. */
static void json_str(const char *s) {
  vs_sbuf b = {0};
  vs_sb_json_str(&b, s);
  fputs(b.failed ? "\"\"" : b.p, stdout);
  vs_sb_free(&b);
}

static void json_limit(uint64_t v) {
  if (v == VS_NO_LIMIT) printf("null");
  else printf("%" PRIu64, v);
}

static void print_json(const vs_ledger_snapshot *s, int first, int events) {
  printf("%s\n    {\"card\": ", first ? "" : ",");
  json_str(s->card_id);
  printf(", \"index\": %d, \"capacity\": %" PRIu64 ", \"headroom\": %" PRIu64 ", \"generation\": \"%016" PRIx64
         "\", \"generations\": %d, \"consistent\": %s, \"dead_bytes\": %" PRIu64 ", \"dead_spilled\": %" PRIu64
         ",\n     \"tenants\": [",
         s->card_index, s->capacity, s->headroom, s->generation, s->generations, s->consistent ? "true" : "false",
         s->dead_bytes, s->dead_spilled);
  for (int t = 0; t < s->ntenants; t++) {
    const vs_snap_tenant *x = &s->tenants[t];
    printf("%s\n       {\"name\": ", t ? "," : "");
    json_str(x->name);
    printf(", \"reserve\": %" PRIu64 ", \"limit\": ", x->reserve);
    json_limit(x->limit);
    printf(", \"used\": %" PRIu64 ", \"peak\": %" PRIu64 ", \"share\": %.4f, \"processes\": %d", x->used, x->peak,
           s->capacity ? (double)x->used / (double)s->capacity : 0.0, x->nprocs);
    /* issue 24: of used, the processes' footprint beyond what the shim counted */
    printf(", \"overhead\": %" PRIu64, x->overhead);
    /* on_limit = spill (issue 13): host bytes, never part of used; spill_max null when the tenant does not spill */
    printf(", \"spilled\": %" PRIu64 ", \"spill_peak\": %" PRIu64 ", \"spill_max\": ", x->spilled, x->spill_peak);
    if (x->spill_max) printf("%" PRIu64, x->spill_max);
    else printf("null");
    printf(", \"reserve_held_by\": [");
    for (int k = 0; k < x->reserve_procs && k < VS_SNAP_RESERVE_PIDS; k++) printf("%s%d", k ? ", " : "", x->reserve_pids[k]);
    printf("]}");
  }
  printf("],\n     \"processes\": [");
  for (int i = 0; i < s->nprocs; i++) {
    const vs_snap_proc *p = &s->procs[i];
    printf("%s\n       {\"pid\": %d, \"tenant\": ", i ? "," : "", p->pid);
    json_str(p->tenant);
    printf(", \"held\": %" PRIu64 ", \"live\": %" PRIu64 ", \"peak\": %" PRIu64 ", \"generation\": \"%016" PRIx64
           "\", \"alive\": %s, \"spilled\": %" PRIu64 ", \"overhead\": %" PRIu64 "}",
           p->held, p->live, p->peak, p->generation, p->alive ? "true" : "false", p->spilled, p->overhead);
  }
  printf("]");
  if (events) {
    printf(",\n     \"events\": [");
    for (int e = 0; e < s->nevents; e++) {
      const vs_snap_event *ev = &s->events[e];
      printf("%s\n       {\"time_ns\": %" PRIu64 ", \"pid\": %d, \"tenant\": ", e ? "," : "", ev->time_ns, ev->pid);
      json_str(ev->tenant);
      printf(", \"kind\": \"%s\", \"bytes\": %" PRIu64 ", \"used\": %" PRIu64 ", \"limit\": ", ev->kind, ev->bytes,
             ev->used);
      json_limit(ev->limit);
      printf("}");
    }
    printf("]");
  }
  printf("}");
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
       M_HELD, M_LIVE, M_PSPILLED, M_POVER, M_EVENTS, M_N };
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
    {"vramshim_process_held_bytes", "Device bytes held by the process (its arena cache included)."},
    {"vramshim_process_live_bytes", "Bytes of the process's live allocations."},
    {"vramshim_process_spilled_bytes", "Host bytes the process serves in place of device memory (on_limit = spill)."},
    {"vramshim_process_overhead_bytes", "Of the process's held bytes: what the driver says it holds beyond what the shim counted."},
    {"vramshim_events_recent", "Events of each kind in the card's event ring (the most recent 256)."},
};

static void print_prom(vs_ledger_snapshot **snaps, int n) {
  static const char *const kinds[] = {"warn", "limit", "reclaim", "spill"};
  for (int m = 0; m < M_N; m++) {
    printf("# HELP %s %s\n# TYPE %s gauge\n", prom_names[m][0], prom_names[m][1], prom_names[m][0]);
    for (int c = 0; c < n; c++) {
      const vs_ledger_snapshot *s = snaps[c];
      if (m <= M_DEAD) {
        uint64_t v = m == M_CAP ? s->capacity : m == M_HEAD ? s->headroom : m == M_GENS ? (uint64_t)s->generations
                                                                                        : s->dead_bytes;
        printf("%s{card=\"", prom_names[m][0]);
        prom_label(s->card_id);
        printf("\"} %" PRIu64 "\n", v);
      } else if (m <= M_TOVER) {
        for (int t = 0; t < s->ntenants; t++) {
          const vs_snap_tenant *x = &s->tenants[t];
          uint64_t v = m == M_RES ? x->reserve : m == M_LIM ? x->limit : m == M_USED ? x->used
                       : m == M_PEAK ? x->peak : m == M_SPILLED ? x->spilled : m == M_SPILL_MAX ? x->spill_max
                       : m == M_TOVER ? x->overhead : (uint64_t)x->nprocs;
          if (m == M_LIM && v == VS_NO_LIMIT) continue;
          if (m == M_SPILL_MAX && v == 0) continue;
          printf("%s{card=\"", prom_names[m][0]);
          prom_label(s->card_id);
          printf("\",tenant=\"");
          prom_label(x->name);
          printf("\"} %" PRIu64 "\n", v);
        }
      } else if (m <= M_POVER) {
        for (int i = 0; i < s->nprocs; i++) {
          const vs_snap_proc *p = &s->procs[i];
          if (!p->alive) continue;
          printf("%s{card=\"", prom_names[m][0]);
          prom_label(s->card_id);
          printf("\",tenant=\"");
          prom_label(p->tenant);
          printf("\",pid=\"%d\"} %" PRIu64 "\n", p->pid,
                 m == M_HELD ? p->held : m == M_LIVE ? p->live : m == M_POVER ? p->overhead : p->spilled);
        }
      } else {
        for (int k = 0; k < 4; k++) {
          int count = 0;
          for (int e = 0; e < s->nevents; e++) count += !strcmp(s->events[e].kind, kinds[k]);
          printf("%s{card=\"", prom_names[m][0]);
          prom_label(s->card_id);
          printf("\",kind=\"%s\"} %d\n", kinds[k], count);
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
  if (fmt == FMT_JSON) {
    printf("{\"schema\": \"vramshim-status/1\", \"ledger_dir\": ");
    json_str(dir);
    printf(", \"cards\": [");
    for (int i = 0; i < got; i++) print_json(snaps[i], i == 0, events);
    printf("]}\n");
  } else if (fmt == FMT_PROM) {
    print_prom(snaps, got);
  } else {
    for (int i = 0; i < got; i++) {
      if (i) printf("\n");
      print_table(dir, snaps[i], events);
    }
  }
  for (int i = 0; i < got; i++) free(snaps[i]);
  return rc;
}

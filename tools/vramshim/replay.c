/* `vramshim replay`: replays allocation traces (RMM logging CSV) through
 * allocator policies side by side, over simulated cards, and prints what
 * each would hold from the driver, the smallest card each needs, how many
 * driver calls each makes and how fast it serves. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "json.h"
#include "commands.h"
#include "log.h"
#include "replay.h"
#include "replay_floor.h"
#include "trace_syncs.h"

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)
#define MAX_POLICIES 12

static const vs_policy *const all_policies[] = {&vs_policy_off, &vs_policy_chunks, &vs_policy_vmm,
                                                &vs_policy_pytorch};
#define NPOLICIES (sizeof all_policies / sizeof all_policies[0])
/* Through the real shim in a child process (replay_shim.c): only on request. */
static const vs_policy *const shim_policies[] = {&vs_policy_shim_off, &vs_policy_shim_vmm, &vs_policy_shim_chunks,
                                                 &vs_policy_shim_vmm_async, &vs_policy_shim_chunks_async};
#define NSHIM (sizeof shim_policies / sizeof shim_policies[0])
/* The arena under a program on the stream-ordered allocator: only on request. */
static const vs_policy *const async_policies[] = {&vs_policy_chunks_async, &vs_policy_vmm_async};
#define NASYNC (sizeof async_policies / sizeof async_policies[0])
/* The baseline under another driver's address order: only on request. */
static const vs_policy *const spread_policies[] = {&vs_policy_pytorch_down};
#define NSPREAD (sizeof spread_policies / sizeof spread_policies[0])

static void usage(FILE *out) {
  fprintf(out,
          "usage: vramshim replay [OPTIONS] TRACE.csv...\n"
          "\n"
          "Replays allocation traces in the RMM logging CSV layout ('-' reads one from\n"
          "standard input, e.g. piped from tools/tracegen/tracegen.py)\n"
          "(Thread,Time,Action,Pointer,Size,Stream) through allocator policies side by\n"
          "side, over simulated cards (no device memory is used), and prints per trace\n"
          "and policy:\n"
          "  requests       allocations replayed ('allocate failure' lines are skipped)\n"
          "  peak live      most requested bytes live at once\n"
          "  peak reserved  most bytes the policy held from the driver at once\n"
          "  reserved/live  peak reserved / peak live (1.0 is the physical limit)\n"
          "  smallest card  least card capacity on which the trace runs with no refused\n"
          "                 allocation, nor on any card checked up to 10%% above it\n"
          "                 (binary search, to --resolution), and / peak live\n"
          "  from cache     share of allocations served without a driver call\n"
          "  steady         the same, among allocations that do not raise the high-water\n"
          "                 mark of live bytes (a policy starting empty must call the\n"
          "                 driver for some of those that do; these show reuse)\n"
          "  driver calls   every driver call (allocations, frees, VMM calls, syncs)\n"
          "  driver time    those calls' modeled time, from a table of per-call costs\n"
          "                 (--costs; docs/driver-costs.md)\n"
          "  floor time     the trace's floor, the same on each of its rows: the\n"
          "                 modeled time of the best VMM rule that holds at most\n"
          "                 1.03 x the live high so far (vramshim-bench-arena bound)\n"
          "  end/warm       reserved at the end / reserved after warm-up (the first\n"
          "                 10%% of the events): growth in the steady state\n"
          "  live end/warm  peak live / the live high-water mark after warm-up: how\n"
          "                 far the workload itself climbs later (no policy can\n"
          "                 hold less than live, so end/warm follows it)\n"
          "  late calls     driver calls after warm-up outside allocations that raise\n"
          "                 the high-water mark of live bytes\n"
          "  ns/request     wall time of the replay loop (allocations and their frees)\n"
          "                 divided by the allocations: about one alloc+free pair\n"
          "\n"
          "policies (default: all, in this order):\n");
  for (size_t i = 0; i < NPOLICIES; i++)
    fprintf(out, "  %-8s %s\n", all_policies[i]->name, all_policies[i]->summary);
  fprintf(out, "\nthe program on cuMemAllocAsync/cuMemFreeAsync on each allocation's stream (only when named):\n");
  for (size_t i = 0; i < NASYNC; i++)
    fprintf(out, "  %-12s %s\n", async_policies[i]->name, async_policies[i]->summary);
  fprintf(out, "\nthe baseline's spread (only when named):\n");
  for (size_t i = 0; i < NSPREAD; i++)
    fprintf(out, "  %-12s %s\n", spread_policies[i]->name, spread_policies[i]->summary);
  fprintf(out, "\nthrough the real libvramshim.so over the simulated driver (only when named):\n");
  for (size_t i = 0; i < NSHIM; i++)
    fprintf(out, "  %-17s %s\n", shim_policies[i]->name, shim_policies[i]->summary);
  fprintf(out,
          "\n"
          "options:\n"
          "  --policy LIST             comma-separated policies, e.g. --policy vmm,pytorch\n"
          "  --json                    one JSON object per line per (trace, policy), sizes in\n"
          "                            bytes (docs/schemas/replay.schema.json):\n"
          "                            schema_version, trace, policy, requests, frees, peak_live,\n"
          "                            peak_reserved, reserved_over_live, smallest_card,\n"
          "                            card_over_live, smallest_card_driver_calls and\n"
          "                            smallest_card_modeled_driver_ms (in-process\n"
          "                            policies: the calls made on the smallest card),\n"
          "                            served_from_cache (0..1),\n"
          "                            steady_requests, served_from_cache_steady (0..1),\n"
          "                            driver_calls, ns_per_request, release_threshold,\n"
          "                            calls (by driver call), modeled_driver_ms,\n"
          "                            reserved_warm, reserved_end, calls_after_warm_hwm,\n"
          "                            calls_after_warm_other, peak_live_warm, floor_growths,\n"
          "                            floor_modeled_driver_ms (the trace's floor: growths of\n"
          "                            the best VMM rule within 1.03 x the live high so far,\n"
          "                            priced by the cost table)\n"
          "  --costs FILE              per-call driver costs (default: data/driver-costs.csv\n"
          "                            of the source tree; 'none' skips the model)\n"
          "  --release-threshold SIZE  free bytes the arena keeps cached (default 1GiB)\n"
          "  --decay Nms               arena: cached memory beyond the threshold goes back\n"
          "                            once unneeded for N ms of the trace's Time (default\n"
          "                            the arena's, 10000ms; 0ms: at once)\n"
          "  --resolution SIZE         smallest-card search step (default 1MiB)\n"
          "  --no-search               skip the smallest-card search (smallest_card 0)\n"
          "  --shim PATH               shim policies: libvramshim.so to preload (default:\n"
          "                            ../../src/libvramshim.so from this binary's folder)\n"
          "  --sim-dir DIR             shim policies: folder of the simulated libcuda.so.1\n"
          "                            (default: ../../sim from this binary's folder)\n"
          "  --child PATH              shim policies: vramshim-replay-child (default:\n"
          "                            ../replay-child/vramshim-replay-child)\n"
          "  --card SIZE               shim policies: the simulated card (default: 2 x the\n"
          "                            trace's peak live, rounded up to a GiB)\n"
          "  -q, --quiet               no progress on stderr\n"
          "  -h, --help                this text\n"
          "\n"
          "SIZE: a number of bytes with an optional unit B, KiB, MiB, GiB, TiB (binary)\n"
          "or KB, MB, GB, TB (decimal).\n"
          "Exit status: 0 done; 1 a trace is malformed or a policy failed; 2 usage error\n"
          "(unknown option or policy, unreadable file).\n");
}

/* "512", "1GiB", "1.5 GiB", "100MB". 0 ok, -1 malformed or out of range. */
static int parse_size(const char *s, uint64_t *out) {
  static const struct {
    const char *unit;
    double mult;
  } units[] = {{"B", 1},           {"KiB", 1024.0},       {"MiB", 1048576.0},
               {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"KB", 1e3},
               {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
               {"", 1}};
  char *end;
  if (*s < '0' || *s > '9') return -1;
  double v = strtod(s, &end);
  while (*end == ' ') end++;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcmp(end, units[i].unit)) continue;
    double bytes = v * units[i].mult;
    if (!(bytes >= 0) || bytes > 1.8e19) return -1;
    *out = (uint64_t)bytes;
    return 0;
  }
  return -1;
}

static int parse_policies(const char *list, const vs_policy **sel, size_t *n) {
  char buf[256];
  if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf) {
    fprintf(stderr, "vramshim: --policy list too long\n");
    return -1;
  }
  *n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    const vs_policy *p = NULL;
    for (size_t i = 0; i < NPOLICIES; i++)
      if (!strcmp(tok, all_policies[i]->name)) p = all_policies[i];
    for (size_t i = 0; i < NSHIM; i++)
      if (!strcmp(tok, shim_policies[i]->name)) p = shim_policies[i];
    for (size_t i = 0; i < NASYNC; i++)
      if (!strcmp(tok, async_policies[i]->name)) p = async_policies[i];
    for (size_t i = 0; i < NSPREAD; i++)
      if (!strcmp(tok, spread_policies[i]->name)) p = spread_policies[i];
    if (!p) {
      fprintf(stderr, "vramshim: unknown policy '%s' (known: off, chunks, vmm, pytorch); on the stream-ordered "
                      "allocator: chunks-async, vmm-async; the baseline's spread: pytorch-down; through the real shim: "
                      "shim-off, shim-vmm, shim-chunks, shim-vmm-async, shim-chunks-async\n", tok);
      return -1;
    }
    for (size_t i = 0; i < *n; i++)
      if (sel[i] == p) p = NULL;
    if (p && *n < MAX_POLICIES) sel[(*n)++] = p;
  }
  if (!*n) {
    fprintf(stderr, "vramshim: --policy needs at least one policy (off, chunks, vmm, pytorch)\n");
    return -1;
  }
  return 0;
}

static const char *base_name(const char *path) { return vs_plat_base_name(path); }

static int is_arena(const vs_policy *p) {
  return p == &vs_policy_chunks || p == &vs_policy_vmm || p == &vs_policy_chunks_async || p == &vs_policy_vmm_async ||
         p == &vs_policy_shim_vmm || p == &vs_policy_shim_chunks || p == &vs_policy_shim_vmm_async ||
         p == &vs_policy_shim_chunks_async;
}

static double ratio(uint64_t a, uint64_t b) {
  return b ? (double)a / (double)b : 0.0;
}

/* One JSON object per line per (trace, policy): JSON Lines, each line a
 * document of docs/schemas/replay.schema.json. */
#define REPLAY_SCHEMA_VERSION "1.1"

static void print_json(FILE *out, const char *path, const vs_policy *p, const vs_replay_opts *o,
                       const vs_replay_result *r, double floor_ns, uint64_t floor_growths) {
  double live = r->peak_live ? (double)r->peak_live : 1.0;
  vs_jw w;
  vs_jw_init(&w, 1);
  vs_jw_object(&w, VS_JSON_INLINE);
  vs_jw_kstr(&w, "schema_version", REPLAY_SCHEMA_VERSION);
  vs_jw_kstr(&w, "trace", path);
  vs_jw_kstr(&w, "policy", p->name);
  vs_jw_ku64(&w, "requests", r->requests);
  vs_jw_ku64(&w, "frees", r->frees);
  vs_jw_ku64(&w, "peak_live", r->peak_live);
  vs_jw_ku64(&w, "peak_reserved", r->stats.peak_reserved);
  vs_jw_kfixed(&w, "reserved_over_live", (double)r->stats.peak_reserved / live, 6);
  vs_jw_ku64(&w, "smallest_card", r->smallest_card);
  vs_jw_kfixed(&w, "card_over_live", (double)r->smallest_card / live, 6);
  if (r->have_card_calls) {
    vs_jw_ku64(&w, "smallest_card_driver_calls", r->card_driver_calls);
    if (o->costs) vs_jw_kfixed(&w, "smallest_card_modeled_driver_ms", r->card_modeled_ns / 1e6, 3);
  }
  vs_jw_kfixed(&w, "served_from_cache", ratio(r->served_from_cache, r->requests), 6);
  vs_jw_ku64(&w, "steady_requests", r->steady_requests);
  vs_jw_kfixed(&w, "served_from_cache_steady", ratio(r->steady_served, r->steady_requests), 6);
  vs_jw_ku64(&w, "driver_calls", r->stats.driver_calls);
  vs_jw_kfixed(&w, "ns_per_request", r->ns_per_request, 1);
  if (is_arena(p)) vs_jw_ku64(&w, "release_threshold", o->release_threshold);
  if (!p->run) {
    vs_jw_key(&w, "calls");
    vs_jw_object(&w, VS_JSON_INLINE);
    for (int k = 0; k < VS_NCALLS; k++) vs_jw_ku64(&w, vs_call_names[k], r->stats.tally.calls[k]);
    vs_jw_end(&w);
    if (o->costs) vs_jw_kfixed(&w, "modeled_driver_ms", r->stats.tally.ns / 1e6, 3);
  }
  vs_jw_ku64(&w, "floor_growths", floor_growths);
  if (o->costs) vs_jw_kfixed(&w, "floor_modeled_driver_ms", floor_ns / 1e6, 3);
  if (r->peak_live_warm) vs_jw_ku64(&w, "peak_live_warm", r->peak_live_warm);
  if (r->have_probe) {
    vs_jw_ku64(&w, "reserved_warm", r->reserved_warm);
    vs_jw_ku64(&w, "reserved_end", r->reserved_end);
    vs_jw_ku64(&w, "calls_after_warm_hwm", r->calls_hwm_after);
    vs_jw_ku64(&w, "calls_after_warm_other", r->calls_other_after);
  }
  if (p->run) {
    vs_jw_ku64(&w, "card", r->card);
    vs_jw_ku64(&w, "child_max_rss", r->child_max_rss);
  }
  vs_jw_end(&w);
  if (vs_jw_print(&w, out)) fprintf(stderr, "vramshim: replay: out of memory writing the JSON\n");
  fflush(out);
}

/* ---- Text table --------------------------------------------------------- */
#define NCOL 17
static const char *const col_head[NCOL] = {"trace",     "policy",        "requests",  "peak live",
                                           "peak reserved", "res/live", "smallest card", "card/live",
                                           "from cache", "steady",      "driver calls", "driver time",
                                           "floor time", "end/warm", "live end/warm", "late calls",
                                           "ns/request"};

typedef struct row {
  char cell[NCOL][48];
} row;

static void make_row(row *w, const char *path, const vs_policy *p, const vs_replay_opts *o, const vs_replay_result *r,
                     double floor_ns) {
  double live = r->peak_live ? (double)r->peak_live : 1.0;
  char b[32];
  snprintf(w->cell[0], sizeof w->cell[0], "%s", base_name(path));
  snprintf(w->cell[1], sizeof w->cell[1], "%s", p->name);
  snprintf(w->cell[2], sizeof w->cell[2], "%llu", (unsigned long long)r->requests);
  snprintf(w->cell[3], sizeof w->cell[3], "%s", vs_fmt_bytes(r->peak_live, b, sizeof b));
  snprintf(w->cell[4], sizeof w->cell[4], "%s", vs_fmt_bytes(r->stats.peak_reserved, b, sizeof b));
  snprintf(w->cell[5], sizeof w->cell[5], "%.3f", (double)r->stats.peak_reserved / live);
  if (r->smallest_card) {
    snprintf(w->cell[6], sizeof w->cell[6], "%s", vs_fmt_bytes(r->smallest_card, b, sizeof b));
    snprintf(w->cell[7], sizeof w->cell[7], "%.3f", (double)r->smallest_card / live);
  } else {
    snprintf(w->cell[6], sizeof w->cell[6], "-");
    snprintf(w->cell[7], sizeof w->cell[7], "-");
  }
  snprintf(w->cell[8], sizeof w->cell[8], "%.2f%%", 100.0 * ratio(r->served_from_cache, r->requests));
  snprintf(w->cell[9], sizeof w->cell[9], "%.2f%%", 100.0 * ratio(r->steady_served, r->steady_requests));
  snprintf(w->cell[10], sizeof w->cell[10], "%llu", (unsigned long long)r->stats.driver_calls);
  if (o->costs && !p->run) snprintf(w->cell[11], sizeof w->cell[11], "%.1f ms", r->stats.tally.ns / 1e6);
  else snprintf(w->cell[11], sizeof w->cell[11], "-");
  /* The trace's floor (replay_floor.h), the same on each of its rows. */
  if (o->costs) snprintf(w->cell[12], sizeof w->cell[12], "%.1f ms", floor_ns / 1e6);
  else snprintf(w->cell[12], sizeof w->cell[12], "-");
  if (r->have_probe) {
    snprintf(w->cell[13], sizeof w->cell[13], "%.3f", ratio(r->reserved_end, r->reserved_warm));
    snprintf(w->cell[15], sizeof w->cell[15], "%llu", (unsigned long long)r->calls_other_after);
  } else {
    snprintf(w->cell[13], sizeof w->cell[13], "-");
    snprintf(w->cell[15], sizeof w->cell[15], "-");
  }
  if (r->peak_live_warm) snprintf(w->cell[14], sizeof w->cell[14], "%.3f", ratio(r->peak_live, r->peak_live_warm));
  else snprintf(w->cell[14], sizeof w->cell[14], "-"); /* shim policies: not measured */
  snprintf(w->cell[16], sizeof w->cell[16], "%.0f", r->ns_per_request);
}

static void print_table(FILE *out, const row *rows, size_t n) {
  size_t wd[NCOL];
  for (int c = 0; c < NCOL; c++) {
    wd[c] = strlen(col_head[c]);
    for (size_t i = 0; i < n; i++)
      if (strlen(rows[i].cell[c]) > wd[c]) wd[c] = strlen(rows[i].cell[c]);
  }
  /* Names left-aligned, numbers right-aligned. */
  for (int c = 0; c < NCOL; c++)
    fprintf(out, c < 2 ? "%-*s%s" : "%*s%s", (int)wd[c], col_head[c], c == NCOL - 1 ? "\n" : "  ");
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && strcmp(rows[i].cell[0], rows[i - 1].cell[0])) fputc('\n', out);
    for (int c = 0; c < NCOL; c++)
      fprintf(out, c < 2 ? "%-*s%s" : "%*s%s", (int)wd[c], rows[i].cell[c], c == NCOL - 1 ? "\n" : "  ");
  }
}

/* ---- Command ------------------------------------------------------------ */
int cmd_replay(int argc, char **argv) {
  const vs_policy *sel[MAX_POLICIES];
  size_t nsel = 0;
  int json = 0, quiet = 0, search = 1;
  vs_replay_opts opts = {.release_threshold = GIB, .decay_ms = VS_REPLAY_DECAY_DEFAULT};
  uint64_t resolution = MIB;
  const char *costs_path = NULL;
  static vs_cost_table costs;
  const char **paths = calloc((size_t)argc + 1, sizeof *paths);
  size_t npaths = 0;
  if (!paths) return 1;
  for (size_t i = 0; i < NPOLICIES; i++) sel[nsel++] = all_policies[i];

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    int takes = !strcmp(a, "--policy") || !strcmp(a, "--release-threshold") || !strcmp(a, "--resolution") ||
                !strcmp(a, "--shim") || !strcmp(a, "--sim-dir") || !strcmp(a, "--child") || !strcmp(a, "--card") ||
                !strcmp(a, "--costs") || !strcmp(a, "--decay");
    const char *eq = strchr(a, '=');
    if (!takes && eq && !strncmp(a, "--", 2)) {
      size_t k = (size_t)(eq - a);
      if ((k == 8 && !strncmp(a, "--policy", k)) || (k == 19 && !strncmp(a, "--release-threshold", k)) ||
          (k == 12 && !strncmp(a, "--resolution", k)) || (k == 6 && !strncmp(a, "--shim", k)) ||
          (k == 9 && !strncmp(a, "--sim-dir", k)) || (k == 7 && !strncmp(a, "--child", k)) ||
          (k == 6 && !strncmp(a, "--card", k)) || (k == 7 && !strncmp(a, "--costs", k)) ||
          (k == 7 && !strncmp(a, "--decay", k))) {
        takes = 1;
        val = eq + 1;
      }
    }
    if (takes && !val) {
      if (i + 1 >= argc) {
        fprintf(stderr, "vramshim: %s needs a value\n", a);
        goto usage_error;
      }
      val = argv[++i];
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      free(paths);
      return 0;
    } else if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      quiet = 1;
    } else if (!strcmp(a, "--no-search")) {
      search = 0;
    } else if (takes && !strncmp(a, "--policy", 8)) {
      if (parse_policies(val, sel, &nsel)) goto usage_error;
    } else if (takes && !strncmp(a, "--release-threshold", 19)) {
      if (parse_size(val, &opts.release_threshold)) {
        fprintf(stderr, "vramshim: bad --release-threshold '%s': expected a size such as 1GiB\n", val);
        goto usage_error;
      }
    } else if (takes && !strncmp(a, "--resolution", 12)) {
      if (parse_size(val, &resolution) || resolution == 0) {
        fprintf(stderr, "vramshim: bad --resolution '%s': expected a size above 0 such as 1MiB\n", val);
        goto usage_error;
      }
    } else if (takes && !strncmp(a, "--shim", 6)) {
      opts.shim_path = val;
    } else if (takes && !strncmp(a, "--sim-dir", 9)) {
      opts.sim_dir = val;
    } else if (takes && !strncmp(a, "--child", 7)) {
      opts.child_path = val;
    } else if (takes && !strncmp(a, "--decay", 7)) {
      char *end;
      unsigned long long ms = strtoull(val, &end, 10);
      if (end == val || strcmp(end, "ms") || ms > 1000000000ull) {
        fprintf(stderr, "vramshim: bad --decay '%s': expected milliseconds such as 10000ms (0ms: release at once)\n", val);
        goto usage_error;
      }
      opts.decay_ms = ms;
    } else if (takes && !strncmp(a, "--costs", 7)) {
      costs_path = val;
    } else if (takes && !strncmp(a, "--card", 6)) {
      if (parse_size(val, &opts.shim_card) || opts.shim_card == 0) {
        fprintf(stderr, "vramshim: bad --card '%s': expected a size above 0 such as 24GiB\n", val);
        goto usage_error;
      }
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "vramshim: unknown option '%s'\n", a);
      goto usage_error;
    } else {
      paths[npaths++] = a;
    }
  }
  if (!npaths) {
    fprintf(stderr, "vramshim: replay needs at least one trace file\n");
    goto usage_error;
  }

  {
    char cerr[512];
    int explicit = costs_path != NULL;
#ifdef VS_DRIVER_COSTS_DEFAULT
    if (!costs_path) costs_path = VS_DRIVER_COSTS_DEFAULT;
#endif
    if (costs_path && strcmp(costs_path, "none")) {
      if (vs_cost_load(costs_path, &costs, cerr, sizeof cerr) == 0) {
        opts.costs = &costs;
      } else if (explicit) {
        fprintf(stderr, "vramshim: %s\n", cerr);
        goto usage_error;
      }
      /* The default table missing (an installed binary without the source
       * tree): no modeled time, the column shows '-'. */
    }
  }

  /* Every trace is read before any replay, so a bad file is reported at once. */
  vs_trace *traces = calloc(npaths, sizeof *traces);
  row *rows = calloc(npaths * nsel, sizeof *rows);
  if (!traces || !rows) {
    fprintf(stderr, "vramshim: out of memory\n");
    free(traces);
    free(rows);
    free(paths);
    return 1;
  }
  int status = 0;
  char err[512];
  for (size_t i = 0; i < npaths && !status; i++) {
    if (!strcmp(paths[i], "-")) {
      if (vs_trace_read(stdin, "<stdin>", &traces[i], err, sizeof err)) {
        fprintf(stderr, "vramshim: %s\n", err);
        status = 1;
      }
      continue;
    }
    FILE *probe = vs_plat_fopen_regular(paths[i], "r");
    if (!probe) {
      fprintf(stderr, "vramshim: cannot open trace %s: %s\n", paths[i], vs_plat_open_strerror(errno));
      status = 2;
      break;
    }
    fclose(probe);
    if (vs_trace_load(paths[i], &traces[i], err, sizeof err)) {
      fprintf(stderr, "vramshim: %s\n", err);
      status = 1;
      break;
    }
    /* The program's synchronisations, when a sidecar lies beside it. */
    char side[4096];
    if (snprintf(side, sizeof side, "%s.syncs", paths[i]) < (int)sizeof side &&
        vs_trace_syncs_load(side, &traces[i], err, sizeof err)) {
      fprintf(stderr, "vramshim: %s\n", err);
      status = 1;
    } else if (traces[i].nsyncs && !quiet) {
      fprintf(stderr, "vramshim: %s: %zu program synchronisations from %s (the arena policies count them as "
              "their own; shim-* policies do not replay them)\n", base_name(paths[i]), traces[i].nsyncs,
              base_name(side));
    }
  }

  vs_progress pr;
  vs_progress_init(&pr, quiet);
  size_t nrows = 0;
  int loaded = status == 0;
  for (size_t i = 0; i < npaths && loaded; i++) {
    char label[160];
    snprintf(label, sizeof label, "[%zu/%zu] %s", i + 1, npaths, base_name(paths[i]));
    uint64_t floor_growths = 0;
    double floor_ns = vs_replay_floor_ns(&traces[i], opts.costs, VS_REPLAY_FLOOR_FACTOR, &floor_growths);
    for (size_t k = 0; k < nsel; k++) {
      vs_replay_result r;
      int failed;
      if (sel[k]->run) {
        failed = sel[k]->run(sel[k], paths[i], &traces[i], &opts, search ? resolution : 0, &pr, label, &r, err,
                             sizeof err);
      } else {
        failed = vs_replay_policy(sel[k], &traces[i], &opts, search ? resolution : 0, &pr, label, &r, err, sizeof err);
      }
      if (failed) {
        vs_progress_done(&pr);
        fprintf(stderr, "vramshim: %s, policy %s: %s\n", base_name(paths[i]), sel[k]->name, err);
        status = 1;
        continue;
      }
      vs_progress_done(&pr);
      if (json) print_json(stdout, paths[i], sel[k], &opts, &r, floor_ns, floor_growths);
      else make_row(&rows[nrows++], paths[i], sel[k], &opts, &r, floor_ns);
    }
  }
  vs_progress_done(&pr);
  if (!json && nrows) print_table(stdout, rows, nrows);

  for (size_t i = 0; i < npaths; i++) vs_trace_free(&traces[i]);
  free(traces);
  free(rows);
  free(paths);
  return status;

usage_error:
  fprintf(stderr, "vramshim: see 'vramshim replay --help'\n");
  free(paths);
  return 2;
}

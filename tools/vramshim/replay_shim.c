/* The shim replay policies, `shim-off`, `shim-vmm` and `shim-chunks`: the
 * trace replayed through the real libvramshim.so over the simulated driver.
 * A child process (vramshim-replay-child) makes one cuMemAlloc_v2 per
 * allocation and one cuMemFree_v2 per free, with the shim in it (the
 * platform's child launch, src/platform/child.h: LD_PRELOAD on Linux, the
 * injector on Windows), the sim as its driver (libcuda.so.1 / nvcuda.dll),
 * a card of its own (private VRAMSIM_STATE) and a config naming the arena
 * mode; it prints the shim's own counters. So these
 * rows measure the shipped code path (interposition, arena, quota ledger,
 * observation), where `off`/`chunks`/`vmm` measure the arena alone over a
 * simulated address space.
 *
 * Each run gets a private folder under $TMPDIR or %TEMP% (config, sim
 * state, ledger and dump folders), removed afterwards. The smallest-card search runs one
 * child per step, each on a card of its own. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "child.h"
#include "config.h"
#include "file.h"
#include "launch.h"
#include "log.h"
#include "procenv.h"
#include "replay.h"

/* VS_REPLAY_SHIM_REL, VS_REPLAY_SIM_REL, VS_REPLAY_CHILD_REL: the build
 * tree's layout relative to this tool (the shim, the sim's folder, the
 * replay child), set per system by tools/vramshim/CMakeLists.txt. */

#define GIB (1024ULL * 1024ULL * 1024ULL)

/* The mode in the config: the policy name without "shim-" or "-async"
 * ("shim-vmm-async" -> "vmm"; its child runs --async). */
static const char *mode_of(const vs_policy *p, char *buf, size_t len) {
  snprintf(buf, len, "%s", p->name + 5);
  char *dash = strchr(buf, '-');
  if (dash) *dash = 0;
  return buf;
}
static int is_async(const vs_policy *p) { return strstr(p->name, "-async") != NULL; }

/* Peak of live requested bytes over the trace (for the default card), and
 * of live allocations (each is a file descriptor in the sim). */
static uint64_t trace_peak_live(const vs_trace *t, uint64_t *peak_count) {
  uint64_t live = 0, peak = 0, n = 0, peak_n = 0;
  for (size_t i = 0; i < t->nev; i++) {
    uint64_t sz = t->sizes[t->ev[i].id];
    if (t->ev[i].free) {
      live -= sz;
      n--;
      continue;
    }
    if ((live += sz) > peak) peak = live;
    if (++n > peak_n) peak_n = n;
  }
  *peak_count = peak_n;
  return peak;
}

/* `given`, else `rel` beside this binary (its own folder). The default
 * layout is the build tree (VS_REPLAY_*_REL above). */
static int locate(const char *given, const char *rel, int want_dir, const char *what, const char *opt,
                  char *out, size_t len, char *err, size_t errlen) {
  if (given) {
    snprintf(out, len, "%s", given);
  } else {
    char self[4096];
    vs_plat_self_dir(self, sizeof self);
    if (!*self) {
      snprintf(err, errlen, "cannot find %s: this program's folder is unknown (give %s)", what, opt);
      return -1;
    }
    if (snprintf(out, len, "%s%s", self, rel) >= (int)len) {
      snprintf(err, errlen, "cannot find %s: path too long (give %s)", what, opt);
      return -1;
    }
  }
  struct stat sb;
  if (stat(out, &sb) != 0 || (want_dir ? !S_ISDIR(sb.st_mode) : !S_ISREG(sb.st_mode))) {
    snprintf(err, errlen, "%s not found at %s (%s; give %s)", what, out,
             given ? "as given" : "the build tree's layout", opt);
    return -1;
  }
  char real[4096];
  if (!vs_plat_realpath(out, real, sizeof real) && snprintf(out, len, "%s", real) >= (int)len) {
    snprintf(err, errlen, "%s: path too long", what);
    return -1;
  }
  return 0;
}

/* The child's shim gets the run's release_threshold and, where --decay set
 * one, its release_decay (the config's bound, a day, for a longer one: a
 * replay's wall time never comes near either). */
static int write_config(const char *path, const char *mode, const vs_replay_opts *o, const char *dir, char *err,
                        size_t errlen) {
  /* A new file, never through a link (the folder is new and ours). */
  int fd = vs_plat_open_regular(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  fprintf(f,
          "; written by vramshim replay for one shim-%s run\n"
          "[global]\narena = %s\nrelease_threshold = %llu\nledger_dir = %s/ledger\ndump_dir = %s/dumps\n",
          mode, mode, (unsigned long long)o->release_threshold, dir, dir);
  uint64_t decay = o->decay_ms < VS_CFG_RELEASE_DECAY_MAX_MS ? o->decay_ms : VS_CFG_RELEASE_DECAY_MAX_MS;
  if (o->decay_ms != VS_REPLAY_DECAY_DEFAULT) fprintf(f, "release_decay = %llums\n", (unsigned long long)decay);
  if (fclose(f) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

/* The child's environment: ours without other VRAMSHIM_ and VRAMSIM_
 * settings, which would change what is measured (VRAMSHIM_LOG is kept),
 * plus the ones this run sets (run_child). */
static int keep_env(const char *e) {
  if (!strncmp(e, "VRAMSIM_", 8)) return 0;
  return strncmp(e, "VRAMSHIM_", 9) != 0 || strncmp(e, "VRAMSHIM_LOG=", 13) == 0;
}

/* Reads "key=number" from the child's result line. */
static int field(const char *line, const char *key, double *v) {
  char pat[64];
  snprintf(pat, sizeof pat, " %s=", key);
  const char *s = strstr(line, pat);
  if (!s) return -1;
  char *end;
  *v = strtod(s + strlen(pat), &end);
  return end == s + strlen(pat) ? -1 : 0;
}

static int parse_result(const char *out, vs_replay_result *r, uint64_t *trace_peak, uint64_t *live_after,
                        char *err, size_t errlen) {
  const char *line = strstr(out, "vramshim: replay-child: result ");
  static const char *const keys[] = {"requests",        "frees",           "failed",        "peak_live",
                                     "trace_peak_live", "peak_reserved",   "driver_calls",  "served_from_cache",
                                     "steady_requests", "steady_served",   "ns_per_request", "live_after"};
  double v[12];
  for (size_t i = 0; line && i < 12; i++)
    if (field(line, keys[i], &v[i])) line = NULL;
  if (!line) {
    snprintf(err, errlen, "the replay child printed no result line");
    return -1;
  }
  r->requests = (uint64_t)v[0];
  r->frees = (uint64_t)v[1];
  r->failed = (uint64_t)v[2];
  r->peak_live = (uint64_t)v[3];
  *trace_peak = (uint64_t)v[4];
  r->stats.peak_reserved = (uint64_t)v[5];
  r->stats.driver_calls = (uint64_t)v[6];
  r->served_from_cache = (uint64_t)v[7];
  r->steady_requests = (uint64_t)v[8];
  r->steady_served = (uint64_t)v[9];
  r->ns_per_request = v[10];
  *live_after = (uint64_t)v[11];
  return 0;
}

/* What every child of one policy shares. */
typedef struct child_setup {
  const vs_policy *self;
  const char *trace;
  const vs_replay_opts *o;
  char shim[4096], simdir[4096], child[4096];
} child_setup;

/* One child run on a card of `card` bytes, in a private folder removed
 * afterwards. With `stop` the child ends at the first refusal, and the
 * shim logs only errors unless VRAMSHIM_LOG says otherwise (a search
 * refuses on purpose). 0 with the child's numbers in *r, or -1. */
static int run_child(const child_setup *cs, uint64_t card, int stop, vs_replay_result *r, uint64_t *trace_peak,
                     uint64_t *live_after, char *err, size_t errlen) {
  memset(r, 0, sizeof *r);
  r->card = card;
  char dir[4096];
  if (vs_plat_scratch_dir("vramshim-replay-", dir, sizeof dir, err, errlen)) return -1;
  int rc = -1;
  char conf[4096 + 16], sub[4096 + 16];
  snprintf(conf, sizeof conf, "%s/vramshim.conf", dir);
  snprintf(sub, sizeof sub, "%s/ledger", dir);
  int made = vs_plat_mkdir_private(sub) == 0;
  snprintf(sub, sizeof sub, "%s/dumps", dir);
  made = made && vs_plat_mkdir_private(sub) == 0;
  if (!made) {
    snprintf(err, errlen, "cannot make folders in %s: %s", dir, strerror(errno));
    goto done;
  }
  char mode[32];
  if (write_config(conf, mode_of(cs->self, mode, sizeof mode), cs->o, dir, err, errlen)) goto done;

  /* No context overhead (docs/sim.md): the rows compare the allocators'
   * card need with the arena-only policies, which have no context either. */
  char e_overhead[] = "VRAMSIM_CONTEXT_OVERHEAD=0";
  char e_cards[64], e_state[4096 + 32], e_config[4096 + 32], e_log[] = "VRAMSHIM_LOG=error";
  snprintf(e_cards, sizeof e_cards, "VRAMSIM_CARDS=%lluB", (unsigned long long)card);
  snprintf(e_state, sizeof e_state, "VRAMSIM_STATE=%s/sim.state", dir);
  snprintf(e_config, sizeof e_config, "VRAMSHIM_CONFIG=%s", conf);
  char *add[] = {e_cards, e_state, e_config, e_overhead, stop && !vs_plat_getenv("VRAMSHIM_LOG") ? e_log : NULL, NULL};
  char stop_flag[] = "--stop-at-failure", async_flag[] = "--async";
  char *argv[] = {(char *)cs->child, (char *)cs->trace, NULL, NULL, NULL};
  int na = 2;
  if (is_async(cs->self)) argv[na++] = async_flag;
  if (stop) argv[na++] = stop_flag;
  /* The child prints one line; keep the last 4 KiB of whatever it says. */
  char buf[4096];
  vs_plat_child_result res;
  char why[1024];
  if (vs_plat_run_child(cs->shim, cs->simdir, dir, argv, keep_env, add, buf, sizeof buf, &res, why, sizeof why)) {
    snprintf(err, errlen, "%s", why);
    goto done;
  }
  if (res.signal || res.exit_code != 0) {
    if (res.signal) snprintf(err, errlen, "the replay child died of signal %d", res.signal);
    else snprintf(err, errlen, "the replay child failed (exit status %d; its messages are above)", res.exit_code);
    goto done;
  }
  if (parse_result(buf, r, trace_peak, live_after, err, errlen)) goto done;
  r->card = card;
  r->child_max_rss = res.max_rss;
  rc = 0;
done:
  vs_plat_remove_tree(dir);
  return rc;
}

/* One capacity-limited run in a child, for the smallest-card search. */
typedef struct shim_probe {
  const child_setup *cs;
  uint64_t *trace_peak, *live_after;
} shim_probe;

static int probe_child(void *ctx, uint64_t capacity, int *failed, char *err, size_t errlen) {
  shim_probe *p = ctx;
  vs_replay_result r;
  if (run_child(p->cs, capacity, 1, &r, p->trace_peak, p->live_after, err, errlen)) return -1;
  *failed = r.failed != 0;
  return 0;
}

static int shim_run(const vs_policy *self, const char *path, const vs_trace *t, const vs_replay_opts *o,
                    uint64_t resolution, vs_progress *pr, const char *label, vs_replay_result *out, char *err,
                    size_t errlen) {
  memset(out, 0, sizeof *out);
  child_setup cs = {.self = self, .trace = path, .o = o};
  if (locate(o->shim_path, VS_REPLAY_SHIM_REL, 0, vs_plat_shim_file, "--shim PATH", cs.shim, sizeof cs.shim, err,
             errlen) ||
      locate(o->sim_dir, VS_REPLAY_SIM_REL, 1, "the simulated driver's folder", "--sim-dir DIR", cs.simdir,
             sizeof cs.simdir, err, errlen) ||
      locate(o->child_path, VS_REPLAY_CHILD_REL, 0, "vramshim-replay-child", "--child PATH", cs.child,
             sizeof cs.child, err, errlen))
    return -1;
  char simlib[4096 + 16];
  snprintf(simlib, sizeof simlib, "%s/%s", cs.simdir, vs_plat_driver_file);
  if (!vs_plat_readable(simlib)) {
    snprintf(err, errlen, "the simulated driver's folder %s has no %s (give --sim-dir DIR)", cs.simdir,
             vs_plat_driver_file);
    return -1;
  }
  uint64_t peak_count;
  uint64_t card = (2 * trace_peak_live(t, &peak_count) + GIB - 1) / GIB * GIB;
  if (o->shim_card) card = o->shim_card;
  if (!card) card = GIB;

  vs_progress_update(pr, "%s: %s, replaying through the shim", label, self->name);
  uint64_t trace_peak, live_after;
  if (run_child(&cs, card, 0, out, &trace_peak, &live_after, err, errlen)) return -1;
  char b[32];
  if (out->failed) {
    int fds_short = vs_plat_open_files_short(peak_count + 64);
    snprintf(err, errlen, "%llu allocations refused on a card of %s (--card sets it)%s",
             (unsigned long long)out->failed, vs_fmt_bytes(card, b, sizeof b),
             fds_short ? "; the trace holds more allocations at once than the open-file limit, and the sim "
                         "needs a descriptor for each"
                       : "");
    return -1;
  }
  if (out->peak_live != trace_peak) {
    snprintf(err, errlen, "the shim's peak live (%llu bytes) differs from the trace's (%llu bytes)",
             (unsigned long long)out->peak_live, (unsigned long long)trace_peak);
    return -1;
  }
  if (live_after) {
    snprintf(err, errlen, "the shim still counts %llu bytes live after every allocation was freed",
             (unsigned long long)live_after);
    return -1;
  }
  if (!resolution || !out->peak_live) return 0;

  /* The smallest card, searched as for the simulated policies, one child
   * per step. The sim charges cuMemAlloc in 512 B units, so even shim-off
   * needs a little more than the peak of live bytes. */
  shim_probe sp = {&cs, &trace_peak, &live_after};
  return vs_smallest_card(out->peak_live, out->stats.peak_reserved, resolution, card * 4, probe_child, &sp, pr, label,
                          self->name, &out->smallest_card, err, errlen);
}

#define SHIM_POLICY(id, nm, text)                                                     \
  const vs_policy id = {.name = nm, .summary = text, .run = shim_run}
SHIM_POLICY(vs_policy_shim_off, "shim-off",
            "the real shim, arena = off, over the simulated driver (a child process)");
SHIM_POLICY(vs_policy_shim_vmm, "shim-vmm",
            "the real shim, arena = vmm, over the simulated driver (a child process)");
SHIM_POLICY(vs_policy_shim_chunks, "shim-chunks",
            "the real shim, arena = chunks, over the simulated driver (a child process)");
SHIM_POLICY(vs_policy_shim_vmm_async, "shim-vmm-async",
            "shim-vmm, the child on cuMemAllocAsync/cuMemFreeAsync on each allocation's stream");
SHIM_POLICY(vs_policy_shim_chunks_async, "shim-chunks-async",
            "shim-chunks, the child on cuMemAllocAsync/cuMemFreeAsync on each allocation's stream");

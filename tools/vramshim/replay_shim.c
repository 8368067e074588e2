/* The shim replay policies, `shim-off`, `shim-vmm` and `shim-chunks`: the
 * trace replayed through the real libvramshim.so over the simulated driver.
 * A child process (vramshim-replay-child) makes one cuMemAlloc_v2 per
 * allocation and one cuMemFree_v2 per free, with the shim preloaded, the
 * sim as libcuda.so.1, a card of its own (private VRAMSIM_STATE) and a
 * config naming the arena mode; it prints the shim's own counters. So these
 * rows measure the shipped code path (interposition, arena, quota ledger,
 * observation), where `off`/`chunks`/`vmm` measure the arena alone over a
 * simulated address space.
 *
 * Each run gets a private folder under $TMPDIR (config, sim state, ledger
 * and dump folders), removed afterwards. The smallest-card search runs one
 * child per step, each on a card of its own. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "replay.h"

extern char **environ;

#define GIB (1024ULL * 1024ULL * 1024ULL)

/* The mode in the config: the policy name without "shim-". */
static const char *mode_of(const vs_policy *p) {
  return p->name + 5;
}

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

/* `given`, else `rel` beside this binary (/proc/self/exe's folder). The
 * default layout is the build tree: tools/vramshim/vramshim,
 * src/libvramshim.so, sim/, tools/replay-child/vramshim-replay-child. */
static int locate(const char *given, const char *rel, int want_dir, const char *what, const char *opt,
                  char *out, size_t len, char *err, size_t errlen) {
  if (given) {
    snprintf(out, len, "%s", given);
  } else {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
      snprintf(err, errlen, "cannot find %s: /proc/self/exe unreadable (give %s)", what, opt);
      return -1;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    if (snprintf(out, len, "%s/%s", exe, rel) >= (int)len) {
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
  char real[PATH_MAX];
  if (realpath(out, real) && snprintf(out, len, "%s", real) >= (int)len) {
    snprintf(err, errlen, "%s: path too long", what);
    return -1;
  }
  return 0;
}

/* The ASan runtime this tool runs with, if any: an instrumented shim
 * preloaded into the child needs it first in LD_PRELOAD. */
static int asan_runtime(char *out, size_t len) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  char line[PATH_MAX + 128];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    char *path = strchr(line, '/');
    if (!path || !strstr(path, "/libasan.so")) continue;
    path[strcspn(path, "\n")] = 0;
    snprintf(out, len, "%s", path);
    found = 1;
  }
  fclose(f);
  return found;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  (void)remove(path);
  return 0;
}

static int write_config(const char *path, const char *mode, uint64_t release_threshold, const char *dir,
                        char *err, size_t errlen) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  fprintf(f,
          "; written by vramshim replay for one shim-%s run\n"
          "[global]\narena = %s\nrelease_threshold = %llu\nledger_dir = %s/ledger\ndump_dir = %s/dumps\n",
          mode, mode, (unsigned long long)release_threshold, dir, dir);
  if (fclose(f) != 0) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

/* The child's environment: ours without the variables this run sets
 * (nor other VRAMSHIM_ and VRAMSIM_ settings, which would change what is
 * measured; VRAMSHIM_LOG is kept), plus ours. */
static char **child_env(char **add, size_t nadd) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + nadd + 1, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const char *e = environ[i];
    if (!strncmp(e, "LD_PRELOAD=", 11) || !strncmp(e, "LD_LIBRARY_PATH=", 16) || !strncmp(e, "VRAMSIM_", 8) ||
        (!strncmp(e, "VRAMSHIM_", 9) && strncmp(e, "VRAMSHIM_LOG=", 13)))
      continue;
    env[k++] = environ[i];
  }
  for (size_t i = 0; i < nadd; i++) env[k++] = add[i];
  env[k] = NULL;
  return env;
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
  char shim[PATH_MAX], simdir[PATH_MAX], child[PATH_MAX];
} child_setup;

/* One child run on a card of `card` bytes, in a private folder removed
 * afterwards. With `stop` the child ends at the first refusal, and the
 * shim logs only errors unless VRAMSHIM_LOG says otherwise (a search
 * refuses on purpose). 0 with the child's numbers in *r, or -1. */
static int run_child(const child_setup *cs, uint64_t card, int stop, vs_replay_result *r, uint64_t *trace_peak,
                     uint64_t *live_after, char *err, size_t errlen) {
  memset(r, 0, sizeof *r);
  r->card = card;
  const char *tmp = getenv("TMPDIR");
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/vramshim-replay-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    snprintf(err, errlen, "cannot make a folder under %s: %s", tmp && *tmp ? tmp : "/tmp", strerror(errno));
    return -1;
  }
  int rc = -1;
  char conf[PATH_MAX + 16], sub[PATH_MAX + 16];
  snprintf(conf, sizeof conf, "%s/vramshim.conf", dir);
  snprintf(sub, sizeof sub, "%s/ledger", dir);
  int made = mkdir(sub, 0700) == 0;
  snprintf(sub, sizeof sub, "%s/dumps", dir);
  made = made && mkdir(sub, 0700) == 0;
  if (!made) {
    snprintf(err, errlen, "cannot make folders in %s: %s", dir, strerror(errno));
    goto done;
  }
  if (write_config(conf, mode_of(cs->self), cs->o->release_threshold, dir, err, errlen)) goto done;

  char asan[PATH_MAX];
  int with_asan = asan_runtime(asan, sizeof asan);
  char e_preload[2 * PATH_MAX + 32], e_libpath[PATH_MAX + 32], e_cards[64], e_state[PATH_MAX + 32],
      e_config[PATH_MAX + 32], e_log[] = "VRAMSHIM_LOG=error";
  snprintf(e_preload, sizeof e_preload, "LD_PRELOAD=%s%s%s", with_asan ? asan : "", with_asan ? ":" : "",
           cs->shim);
  snprintf(e_libpath, sizeof e_libpath, "LD_LIBRARY_PATH=%s", cs->simdir);
  snprintf(e_cards, sizeof e_cards, "VRAMSIM_CARDS=%lluB", (unsigned long long)card);
  snprintf(e_state, sizeof e_state, "VRAMSIM_STATE=%s/sim.state", dir);
  snprintf(e_config, sizeof e_config, "VRAMSHIM_CONFIG=%s", conf);
  char *add[] = {e_preload, e_libpath, e_cards, e_state, e_config, e_log};
  size_t nadd = sizeof add / sizeof add[0] - (stop && !getenv("VRAMSHIM_LOG") ? 0 : 1);
  char **env = child_env(add, nadd);
  int fds[2] = {-1, -1};
  if (!env || pipe2(fds, O_CLOEXEC) != 0) {
    snprintf(err, errlen, "cannot start the replay child: %s", env ? strerror(errno) : "out of memory");
    free(env);
    goto done;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  char stop_flag[] = "--stop-at-failure";
  char *argv[] = {(char *)cs->child, (char *)cs->trace, stop ? stop_flag : NULL, NULL};
  pid_t pid;
  int sp = posix_spawn(&pid, cs->child, &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  close(fds[1]);
  if (sp != 0) {
    close(fds[0]);
    snprintf(err, errlen, "cannot run %s: %s", cs->child, strerror(sp));
    goto done;
  }
  /* The child prints one line; keep the last 4 KiB of whatever it says. */
  char buf[4096];
  size_t len = 0;
  for (;;) {
    if (len == sizeof buf - 1) {
      memmove(buf, buf + 2048, len - 2048);
      len -= 2048;
    }
    ssize_t n = read(fds[0], buf + len, sizeof buf - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  buf[len] = 0;
  close(fds[0]);
  int status;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFSIGNALED(status)) snprintf(err, errlen, "the replay child died of signal %d", WTERMSIG(status));
    else snprintf(err, errlen, "the replay child failed (exit status %d; its messages are above)", WEXITSTATUS(status));
    goto done;
  }
  if (parse_result(buf, r, trace_peak, live_after, err, errlen)) goto done;
  r->card = card;
  r->child_max_rss = (uint64_t)ru.ru_maxrss * 1024;
  rc = 0;
done:
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
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
  if (locate(o->shim_path, "../../src/libvramshim.so", 0, "libvramshim.so", "--shim PATH", cs.shim,
             sizeof cs.shim, err, errlen) ||
      locate(o->sim_dir, "../../sim", 1, "the simulated driver's folder", "--sim-dir DIR", cs.simdir,
             sizeof cs.simdir, err, errlen) ||
      locate(o->child_path, "../replay-child/vramshim-replay-child", 0, "vramshim-replay-child", "--child PATH",
             cs.child, sizeof cs.child, err, errlen))
    return -1;
  char simlib[PATH_MAX + 16];
  snprintf(simlib, sizeof simlib, "%s/libcuda.so.1", cs.simdir);
  if (access(simlib, R_OK) != 0) {
    snprintf(err, errlen, "the simulated driver's folder %s has no libcuda.so.1 (give --sim-dir DIR)", cs.simdir);
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
    struct rlimit rl;
    int fds_short = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
                    peak_count + 64 > (uint64_t)rl.rlim_max;
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

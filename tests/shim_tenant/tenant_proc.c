#include "tenant_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_dir[512];

uint64_t tp_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void tp_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000l};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

static void rm_tree_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
      rm_tree_files(p);
      rmdir(p);
    } else {
      unlink(p);
    }
  }
  closedir(d);
}

void tp_workdir(const char *dir) {
  snprintf(g_dir, sizeof g_dir, "%s", dir);
  mkdir(dir, 0700);
  rm_tree_files(dir);
}

const char *tp_path(const char *name) {
  static char p[4][1024];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
  return p[k];
}

void tp_config(const char *global, const char *rest) {
  char *path = strdup(tp_path("vramshim.conf"));
  FILE *f = fopen(path, "w");
  CHECK(f, "cannot write %s", path);
  if (global) fprintf(f, "[global]\nledger_dir = %s\ndump_dir = %s\n%s\n", tp_path("ledger"), tp_path("dumps"), global);
  fprintf(f, "%s", rest);
  fclose(f);
  setenv("VRAMSHIM_CONFIG", path, 1);
  free(path);
}

/* Workers still running when the case process exits (a failed CHECK exits
 * at once) are killed: left behind, they hold their ledger slots and wait
 * for a signal forever, and the suite's next run meets them. A worker
 * reaped by tp_wait / tp_exited leaves the list; one not reaped cannot
 * have had its pid reused, so the kill reaches no other process. Only the
 * process that spawned them kills (a fork of it that exits does not). */
#define TP_SPAWNED_MAX 256
static _Atomic pid_t g_spawned[TP_SPAWNED_MAX];
static _Atomic int g_nspawned;
static pid_t g_spawner;

static void kill_spawned(void) {
  if (getpid() != g_spawner) return;
  for (int i = 0; i < atomic_load(&g_nspawned) && i < TP_SPAWNED_MAX; i++) {
    pid_t p = atomic_load(&g_spawned[i]);
    if (p > 0) kill(p, SIGKILL);
  }
}

static void spawned(pid_t pid) {
  if (!g_spawner) {
    g_spawner = getpid();
    atexit(kill_spawned);
  }
  int i = atomic_fetch_add(&g_nspawned, 1);
  if (i < TP_SPAWNED_MAX) atomic_store(&g_spawned[i], pid);
}

static void reaped(pid_t pid) {
  for (int i = 0; i < atomic_load(&g_nspawned) && i < TP_SPAWNED_MAX; i++)
    if (atomic_load(&g_spawned[i]) == pid) atomic_store(&g_spawned[i], 0);
}

pid_t tp_spawn(const char *tag, const char *tenant, const char *extra_env, const char *const *args) {
  char out[1024], err[1024];
  snprintf(out, sizeof out, "%s/%s.out", g_dir, tag);
  snprintf(err, sizeof err, "%s/%s.err", g_dir, tag);
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    if (tenant) setenv("VRAMSHIM_TENANT", tenant, 1);
    else unsetenv("VRAMSHIM_TENANT");
    if (extra_env) putenv(strdup(extra_env));
    int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    const char *argv[32];
    int n = 0;
    argv[n++] = "shim_tenant";
    for (; args[n - 1] && n < 31; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    execv("/proc/self/exe", (char *const *)argv);
    _exit(127);
  }
  spawned(pid);
  return pid;
}

static int decode(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

int tp_wait(pid_t pid) {
  int st = 0;
  pid_t r;
  while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
  }
  if (r == pid) reaped(pid);
  return decode(st);
}

int tp_exited(pid_t pid, int *out) {
  int st = 0;
  pid_t r = waitpid(pid, &st, WNOHANG);
  if (r == pid) {
    reaped(pid);
    *out = decode(st);
    return 1;
  }
  return 0;
}

char *tp_read(const char *name) {
  FILE *f = fopen(tp_path(name), "r");
  if (!f) return strdup("");
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  size_t k;
  while ((k = fread(b + n, 1, cap - n - 1, f)) > 0) {
    n += k;
    if (cap - n < 2) b = realloc(b, cap *= 2);
  }
  b[n] = 0;
  fclose(f);
  return b;
}

int tp_count_lines(const char *text, const char *needle) {
  int c = 0;
  for (const char *p = text; p && *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char *line = strndup(p, len);
    if (strstr(line, needle)) c++;
    free(line);
    p = e ? e + 1 : NULL;
  }
  return c;
}

int tp_snapshot(vs_ledger_snapshot *s) {
  char ids[4][VS_NAME_MAX], err[VS_ERR_MAX];
  const char *dir = tp_path("ledger");
  int n = vs_ledger_list(dir, ids, 4, err, sizeof err);
  if (n < 1) return -1;
  CHECK(n == 1, "one card, one ledger file (found %d)", n);
  return vs_ledger_snapshot_read(dir, ids[0], s, err, sizeof err);
}

const vs_snap_proc *tp_proc(const vs_ledger_snapshot *s, int pid) {
  for (int i = 0; i < s->nprocs; i++)
    if (s->procs[i].pid == pid && s->procs[i].alive) return &s->procs[i];
  return NULL;
}

const vs_snap_tenant *tp_tenant(const vs_ledger_snapshot *s, const char *name) {
  for (int i = 0; i < s->ntenants; i++)
    if (!strcmp(s->tenants[i].name, name)) return &s->tenants[i];
  return NULL;
}

/* Polls until pid's held bytes (or, with cached, its published cache)
 * reach bytes. */
static int wait_proc(int pid, uint64_t bytes, int timeout_ms, int cached) {
  static vs_ledger_snapshot s;
  for (uint64_t end = tp_now_ns() + (uint64_t)timeout_ms * 1000000ull; tp_now_ns() < end;) {
    if (tp_snapshot(&s) == 0) {
      const vs_snap_proc *p = tp_proc(&s, pid);
      if (p && (cached ? p->cached : p->held) >= bytes) return 0;
    }
    tp_sleep_ms(5);
  }
  return -1;
}

int tp_wait_held(int pid, uint64_t bytes, int timeout_ms) { return wait_proc(pid, bytes, timeout_ms, 0); }
int tp_wait_cached(int pid, uint64_t bytes, int timeout_ms) { return wait_proc(pid, bytes, timeout_ms, 1); }

void tp_cuda_up(void) { t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent); }

static sigset_t worker_sigs(void) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigaddset(&s, SIGTERM);
  return s;
}

void tp_worker_signals(void) {
  sigset_t s = worker_sigs();
  sigprocmask(SIG_BLOCK, &s, NULL);
}

int tp_wait_signal(void) {
  sigset_t s = worker_sigs();
  int sig = 0;
  sigwait(&s, &sig);
  return sig;
}

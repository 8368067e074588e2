/* Dumps and their log lines bounded (issue 23, point 8): real processes
 * under the shim over the simulated driver, through tests/shim_tenant's
 * helpers (tenant_proc.c).
 *
 *   faults_dumps_prog case NAME WORKDIR TOOL   the orchestrator (cases below)
 *   faults_dumps_prog WORKER ARGS...           a worker (see main)
 *
 * Each case says what it checks and what it did before the fix. */
#include "tenant_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *g_tool;

/* ---- workers ------------------------------------------------------------------ */
/* hold: 64 MiB until SIGTERM; SIGUSR1 is left to the shim (dump_signal). */
static int w_hold(void) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, NULL);
  tp_cuda_up();
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, 64 * MiB) == CUDA_SUCCESS, "hold: cuMemAlloc");
  SAY("holding");
  int sig = 0;
  while (sigwait(&term, &sig) != 0 || sig != SIGTERM) {
  }
  return 0;
}

/* forked: the parent runs CUDA; a forked child (no cuInit of its own, as
 * CUDA requires) calls cuMemAlloc: CUDA_ERROR_NOT_INITIALIZED, which is no
 * refusal. It lingers 1.5 s, long enough for a dump it should not write. */
static int w_forked(void) {
  tp_cuda_up();
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, 16 * MiB) == CUDA_SUCCESS, "parent: cuMemAlloc");
  fflush(NULL);
  pid_t k = fork();
  CHECK(k >= 0, "fork");
  if (k == 0) {
    CUdeviceptr q;
    int bad = 0;
    for (int i = 0; i < 20; i++) {
      CUresult r = cuMemAlloc(&q, 1 * MiB);
      if (r != CUDA_ERROR_NOT_INITIALIZED) bad = 1;
    }
    printf("child: cuMemAlloc before cuInit %s\n", bad ? "did not fail with NOT_INITIALIZED" : "failed with NOT_INITIALIZED");
    fflush(stdout);
    tp_sleep_ms(1500);
    _exit(bad);
  }
  int st = 0;
  waitpid(k, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child saw NOT_INITIALIZED (%d)", st);
  return 0;
}

/* ---- cases ---------------------------------------------------------------------- */
static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static int wait_line(const char *file, const char *needle, int timeout_ms) {
  for (int t = 0; t < timeout_ms; t += 10) {
    char *s = tp_read(file);
    int found = strstr(s, needle) != NULL;
    free(s);
    if (found) return 0;
    tp_sleep_ms(10);
  }
  return -1;
}

static void stop(pid_t p) {
  kill(p, SIGTERM);
  tp_wait(p);
}

/* A storm of dump signals: 1,000 SIGUSR1 to a process with dump_signal =
 * USR1 write at most one dump a second, and its dump lines stay a few.
 * Before the fix: 638-696 dumps (and as many lines) per storm. */
static int case_sigstorm(void) {
  tp_config("dump_signal = USR1\n", "[tenant x]\n");
  const char *h[] = {"hold", NULL};
  pid_t p = tp_spawn("held", "x", NULL, h);
  CHECK(wait_line("held.out", "holding", 20000) == 0, "a process holds memory");
  uint64_t t0 = tp_now_ns();
  for (int i = 0; i < 1000; i++) {
    kill(p, SIGUSR1);
    if (i % 10 == 9) tp_sleep_ms(2);
  }
  tp_sleep_ms(1500);   /* the last signals' dump, if any, is written */
  double s = (double)(tp_now_ns() - t0) / 1e9;
  int files = count_files(tp_path("dumps"));
  char *err = tp_read("held.err");
  int lines = tp_count_lines(err, "dump signal received");
  SAY("1000 SIGUSR1 in %.2f s: %d dump files, %d lines", s, files, lines);
  CHECK(files >= 1 && files <= (int)s + 2, "at most one dump a second (%d in %.2f s)", files, s);
  CHECK(lines >= 1 && lines <= 8, "a few lines (%d): %s", lines, err);
  free(err);
  stop(p);
  return 0;
}

/* A process that cannot write its dumps: 100 requests give a few lines
 * (and each request its answer, the reason), not one line each. Before the
 * fix: 101 lines. */
static int case_unwritable(void) {
  /* dump_dir: a file where the folder should be. */
  char *dd = strdup(tp_path("dumps"));
  FILE *f = fopen(dd, "w");
  CHECK(f, "make %s a file", dd);
  fclose(f);
  tp_config("", "[tenant x]\n");
  const char *h[] = {"hold", NULL};
  pid_t p = tp_spawn("held", "x", NULL, h);
  CHECK(wait_line("held.out", "holding", 20000) == 0, "a process holds memory");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "for i in $(seq 100); do %s dump --pid %d --ledger-dir %s >> %s 2>&1; done", g_tool,
           (int)p, tp_path("ledger"), tp_path("tool.txt"));
  char *pre = getenv("LD_PRELOAD") ? strdup(getenv("LD_PRELOAD")) : NULL;
  unsetenv("LD_PRELOAD");
  int rc = system(cmd);
  if (pre) setenv("LD_PRELOAD", pre, 1);
  free(pre);
  (void)rc;
  char *tool = tp_read("tool.txt");
  int answered = tp_count_lines(tool, "not a directory");
  tp_sleep_ms(200);
  char *err = tp_read("held.err");
  int lines = tp_count_lines(err, "cannot be written");
  SAY("100 requests to a process that cannot write: %d lines in its log, %d answers naming the reason", lines,
      answered);
  CHECK(answered == 100, "every request answered with the reason (%d): %s", answered, tool);
  CHECK(lines >= 1 && lines <= 8, "a few lines (%d): %s", lines, err);
  free(tool);
  free(err);
  free(dd);
  stop(p);
  return 0;
}

/* cuMemAlloc before cuInit in a forked child: CUDA_ERROR_NOT_INITIALIZED
 * is the driver's answer, no refusal: no "refused" line, no dump. Before
 * the fix: logged as a refusal with a dump (120 files per fork storm). */
static int case_notinit(void) {
  tp_config("", "[tenant x]\n");
  const char *a[] = {"forked", NULL};
  int st = tp_wait(tp_spawn("forked", "x", NULL, a));
  char *out = tp_read("forked.out"), *err = tp_read("forked.err");
  SAY("%s", out);
  CHECK(st == 0, "the worker ran (%d): %s", st, err);
  int files = count_files(tp_path("dumps"));
  CHECK(!strstr(err, "refused") && files == 0, "no refusal line, no dump (%d files): %s", files, err);
  free(out);
  free(err);
  return 0;
}

/* Many processes of one user write into one folder: the folder keeps its
 * 64 newest dumps (each process its 16 newest), and no part of a dump is
 * left. 6 processes are asked for 17 dumps each (the interval shortened by
 * the test hook). Before the fix: each process kept 16, the folder 96. */
static int case_folder(void) {
  tp_config("", "[tenant x]\n");
  const char *h[] = {"hold", NULL};
  pid_t p[6];
  char cmd[8192] = "";
  for (int i = 0; i < 6; i++) {
    char tag[16];
    snprintf(tag, sizeof tag, "held%d", i);
    p[i] = tp_spawn(tag, "x", "VRAMSHIM_TEST_DUMP_INTERVAL_MS=1", h);
  }
  for (int i = 0; i < 6; i++) {
    char out[32];
    snprintf(out, sizeof out, "held%d.out", i);
    CHECK(wait_line(out, "holding", 20000) == 0, "process %d holds memory", i);
  }
  size_t n = 0;
  n += (size_t)snprintf(cmd + n, sizeof cmd - n, "for i in $(seq 17); do for p in");
  for (int i = 0; i < 6; i++) n += (size_t)snprintf(cmd + n, sizeof cmd - n, " %d", (int)p[i]);
  snprintf(cmd + n, sizeof cmd - n, "; do %s dump --pid $p --ledger-dir %s > /dev/null || exit 1; done; sleep 0.01; done",
           g_tool, tp_path("ledger"));
  char *pre = getenv("LD_PRELOAD") ? strdup(getenv("LD_PRELOAD")) : NULL;
  unsetenv("LD_PRELOAD");
  int rc = system(cmd);
  if (pre) setenv("LD_PRELOAD", pre, 1);
  free(pre);
  int files = count_files(tp_path("dumps"));
  DIR *d = opendir(tp_path("dumps"));
  int parts = 0;
  for (struct dirent *e; d && (e = readdir(d));) parts += strstr(e->d_name, ".part") != NULL;
  if (d) closedir(d);
  SAY("6 processes, 17 dumps each: the folder keeps %d files, %d parts", files, parts);
  CHECK(rc == 0, "every request answered (%d)", rc);
  CHECK(files == 64 && parts == 0, "the folder keeps its 64 newest dumps and no part (%d, %d parts)", files, parts);
  for (int i = 0; i < 6; i++) stop(p[i]);
  return 0;
}

/* A full disk: dump_dir is a 4 KiB tmpfs (a mount namespace of the
 * worker's own) already full. 100 requests (the interval shortened by the
 * test hook, so each one tries to write) give a few lines, every request is
 * answered with the reason, the rest of the window's attempts are counted in
 * one summary line, and no file is left, empty or partial. Needs
 * root (unshare --mount); skipped otherwise. Before the fix: a line per
 * attempt (831 in the fault probe's run). */
static int case_fulldisk(void) {
  if (geteuid() != 0 || system("unshare --mount --propagation private true >/dev/null 2>&1") != 0) {
    SAY("SKIP: unshare --mount is not permitted here");
    return 77;
  }
  char *dd = strdup(tp_path("dumps"));
  CHECK(mkdir(dd, 0700) == 0, "mkdir %s", dd);
  tp_config("", "[tenant x]\n");
  char self[1024];
  ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(sn > 0, "readlink");
  self[sn] = 0;
  char script[4096];
  snprintf(script, sizeof script,
           "mount -t tmpfs -o size=4k,mode=0700 tmpfs '%s' && dd if=/dev/zero of='%s/fill' bs=4096 count=1 "
           "2>/dev/null; exec env LD_PRELOAD='%s' VRAMSHIM_TENANT=x VRAMSHIM_TEST_DUMP_INTERVAL_MS=1 "
           "VRAMSHIM_TEST_DUMP_LOG_WINDOW_MS=3000 '%s' hold",
           dd, dd, getenv("LD_PRELOAD"), self);
  char out[1100], err[1100];
  snprintf(out, sizeof out, "%s", tp_path("held.out"));
  snprintf(err, sizeof err, "%s", tp_path("held.err"));
  fflush(stdout);
  pid_t p = fork();
  CHECK(p >= 0, "fork");
  if (p == 0) {
    int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    unsetenv("LD_PRELOAD");
    execlp("unshare", "unshare", "--mount", "--propagation", "private", "sh", "-c", script, (char *)NULL);
    _exit(127);
  }
  CHECK(wait_line("held.out", "holding", 20000) == 0, "a process holds memory, its dump_dir full");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "for i in $(seq 100); do %s dump --pid %d --ledger-dir %s >> %s 2>&1; sleep 0.002; done",
           g_tool, (int)p, tp_path("ledger"), tp_path("tool.txt"));
  char *pre = getenv("LD_PRELOAD") ? strdup(getenv("LD_PRELOAD")) : NULL;
  unsetenv("LD_PRELOAD");
  int rc = system(cmd);
  (void)rc;
  /* What the worker's tmpfs holds, seen from inside its namespace. */
  char ls[2048];
  snprintf(ls, sizeof ls, "nsenter -t %d -m -- find '%s' -type f ! -name fill > %s 2>&1", (int)p, dd,
           tp_path("left.txt"));
  int lrc = system(ls);
  if (pre) setenv("LD_PRELOAD", pre, 1);
  free(pre);
  char *tool = tp_read("tool.txt"), *left = tp_read("left.txt");
  int answered = tp_count_lines(tool, "No space left on device");
  /* The window (3 s here by the test hook, a minute by default) ends with
   * one summary line when lines were held back in it. Whether any were
   * depends on how fast the requests came (a slow ASan run makes fewer
   * attempts per window than the cap), so the summary is waited for, not
   * required; the bound below is per window. */
  int summary = wait_line("held.err", "that could not be written in the last", 5000) == 0;
  char *e = tp_read("held.err");
  int lines = tp_count_lines(e, "cannot be written");
  SAY("100 requests to a process whose disk is full: %d lines in its log, %d answers naming the reason, files "
      "left: '%s', a summary line: %s", lines, answered, left, summary ? "yes" : "no");
  CHECK(answered == 100, "every request answered with the reason (%d): %s", answered, tool);
  /* The bound is per window: at most 8 lines, then the summary. A slow run
   * (ASan on a loaded machine) spans more than one 3 s window. */
  int in_window = 0, worst = 0;
  for (const char *q = e; *q;) {
    const char *nl = strchr(q, '\n');
    size_t n = nl ? (size_t)(nl - q) : strlen(q);
    char line[2048];
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), q);
    if (strstr(line, "that could not be written in the last")) in_window = 0;
    else if (strstr(line, "cannot be written") && ++in_window > worst) worst = in_window;
    q = nl ? nl + 1 : q + n;
  }
  CHECK(lines >= 1 && worst <= 8, "a few lines in each window (%d in all, %d in one window): %s", lines, worst, e);
  CHECK(lrc == 0 && left[0] == 0, "no file left in the full folder (%d): %s", lrc, left);
  free(tool);
  free(left);
  free(e);
  free(dd);
  stop(p);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  CHECK(argc >= 2, "usage: faults_dumps_prog case NAME WORKDIR TOOL | WORKER");
  const char *m = argv[1];
  if (strcmp(m, "case") != 0) {
    if (!strcmp(m, "hold")) return w_hold();
    tp_worker_signals();
    if (!strcmp(m, "forked")) return w_forked();
    CHECK(0, "unknown worker %s", m);
  }
  CHECK(argc >= 5, "case NAME WORKDIR TOOL");
  const char *c = argv[2];
  g_tool = argv[4];
  tp_workdir(argv[3]);
  int r = 1;
  if (!strcmp(c, "sigstorm")) r = case_sigstorm();
  else if (!strcmp(c, "unwritable")) r = case_unwritable();
  else if (!strcmp(c, "notinit")) r = case_notinit();
  else if (!strcmp(c, "folder")) r = case_folder();
  else if (!strcmp(c, "fulldisk")) r = case_fulldisk();
  else CHECK(0, "unknown case %s", c);
  if (r == 0) SAY("PASS %s", c);
  return r;
}

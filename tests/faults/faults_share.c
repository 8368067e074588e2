/* Folders shared by several users and containers (issue 23): real
 * processes preloaded with libvramshim.so over the simulated driver, run as
 * a throwaway service account or in pid namespaces of their own.
 *
 *   faults_share_prog case NAME WORKDIR [ARG]   the orchestrator (cases below)
 *   faults_share_prog WORKER ARGS...            a worker (see main)
 *
 * The cases need root (to create users, to unshare); without it, or where
 * the system refuses, they skip (77) saying why. Each says what it checks
 * and what it did before the fix. */
#include "shim_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define BLOCK (100 << 10)

static void pattern(unsigned char *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 13 + seed);
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL); }

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* ---- workers ------------------------------------------------------------------ */

/* import HEX SEED: opens the handle, checks the exporter's bytes, closes. */
static int w_import(const char *hex, unsigned seed) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUipcMemHandle h;
  t_ipc_from_hex(hex, &h);
  CUdeviceptr p;
  CUresult r = cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  T_CHECK(r == CUDA_SUCCESS, "import (pid %d, uid %u): cuIpcOpenMemHandle = %d", (int)getpid(), (unsigned)geteuid(),
          (int)r);
  static unsigned char want[BLOCK], got[BLOCK];
  pattern(want, BLOCK, seed);
  T_CU(cuMemcpyDtoH(got, p, BLOCK));
  T_CHECK(memcmp(want, got, BLOCK) == 0, "import: the exporter's bytes (seed %u)", seed);
  T_CU(cuIpcCloseMemHandle(p));
  T_SAY("import (pid %d): the exporter's bytes, seed %u", (int)getpid(), seed);
  return 0;
}

/* export MODE HEXFILE GOFILE|- SEED: allocates two blocks (the second not
 * at a chunk's start, so chunks mode needs the shim's record), fills the
 * second with pattern(SEED), exports it (the handle must be the shim's in
 * the arena modes), writes the handle to HEXFILE, waits for GOFILE, then
 * runs an importer (a fresh exec of this program, as CUDA requires) and
 * exits with its status. */
static int w_export(const char *mode, const char *hexfile, const char *gofile, unsigned seed) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  /* Blocks of one size class: all but the first lie after a neighbour in
   * their chunk, so in chunks mode their handles are the shim's. */
  CUdeviceptr p[3], b = 0;
  int n = 0;
  CUipcMemHandle h;
  static unsigned char buf[BLOCK];
  pattern(buf, BLOCK, seed);
  for (int i = 0; i < 3; i++) {
    T_CU(cuMemAlloc(&p[i], BLOCK));
    n++;
    CUresult r = cuIpcGetMemHandle(&h, p[i]);
    T_CHECK(r == CUDA_SUCCESS, "export (%s, uid %u, pid %d): cuIpcGetMemHandle = %d", mode, (unsigned)geteuid(),
            (int)getpid(), (int)r);
    b = p[i];
    if (!strcmp(mode, "off") || !memcmp(h.reserved, "vramshim-ipc", 12)) break;
  }
  if (strcmp(mode, "off"))
    T_CHECK(!memcmp(h.reserved, "vramshim-ipc", 12), "the arena (%s) exports a block with a shim handle", mode);
  T_CU(cuMemcpyHtoD(b, buf, BLOCK));
  char hex[2 * sizeof h.reserved + 1], tmp[1100];
  t_ipc_to_hex(&h, hex);
  snprintf(tmp, sizeof tmp, "%s.tmp", hexfile);
  FILE *f = fopen(tmp, "w");
  T_CHECK(f && fputs(hex, f) >= 0 && fclose(f) == 0 && rename(tmp, hexfile) == 0, "write %s", hexfile);
  for (int i = 0; strcmp(gofile, "-") && !exists(gofile); i++) {
    T_CHECK(i < 6000, "export: no %s after 60 s", gofile);
    sleep_ms(10);
  }
  char seedtxt[16];
  snprintf(seedtxt, sizeof seedtxt, "%u", seed);
  char *args[] = {"/proc/self/exe", "import", hex, seedtxt, NULL};
  pid_t pid;
  T_CHECK(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) == 0, "spawn the importer");
  int st = 0;
  T_CHECK(waitpid(pid, &st, 0) == pid, "wait for the importer");
  T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "export (pid %d): the importer failed (status %d)", (int)getpid(), st);
  for (int i = 0; i < n; i++) T_CU(cuMemFree(p[i]));
  T_SAY("export (%s, uid %u, pid %d): imported by another process", mode, (unsigned)geteuid(), (int)getpid());
  return 0;
}

/* hold READYFILE: holds 16 MiB, writes READYFILE, and waits to be killed. */
static int w_hold(const char *ready) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUdeviceptr p;
  T_CU(cuMemAlloc(&p, 16 << 20));
  FILE *f = fopen(ready, "w");
  T_CHECK(f && fclose(f) == 0, "write %s", ready);
  for (;;) pause();
}

/* alloc: one allocation and its free, as the user it runs as. */
static int w_alloc(void) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUdeviceptr p;
  T_CU(cuMemAlloc(&p, 16 << 20));
  T_CU(cuMemFree(p));
  T_SAY("alloc (uid %u): allocated and freed 16 MiB", (unsigned)geteuid());
  return 0;
}

/* ---- orchestrator ----------------------------------------------------------------- */
static char g_dir[900];
static const char *g_shim;   /* LD_PRELOAD as the test was started */

static const char *path_in(const char *name) {
  static char buf[4][1100];
  static int i;
  i = (i + 1) % 4;
  snprintf(buf[i], sizeof buf[i], "%s/%s", g_dir, name);
  return buf[i];
}

static void write_file(const char *path, const char *text, mode_t mode) {
  FILE *f = fopen(path, "w");
  T_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
  T_CHECK(chmod(path, mode) == 0, "chmod %s", path);
}

static int sh(const char *cmd) {
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A throwaway system user (no home), optionally in group; its uid, or
 * (uid_t)-1 when it cannot be made. */
static uid_t throwaway_user(const char *name, const char *group) {
  char cmd[512];
  if (group && !getgrnam(group)) {
    snprintf(cmd, sizeof cmd, "groupadd -r %s >/dev/null 2>&1", group);
    if (sh(cmd) != 0 || !getgrnam(group)) return (uid_t)-1;
  }
  if (!getpwnam(name)) {
    snprintf(cmd, sizeof cmd, "useradd -M -N -r -s /usr/sbin/nologin %s%s %s >/dev/null 2>&1", group ? "-G " : "",
             group ? group : "", name);
    if (sh(cmd) != 0 || !getpwnam(name)) return (uid_t)-1;
  } else if (group) {   /* left by an earlier run, perhaps without the group */
    snprintf(cmd, sizeof cmd, "usermod -a -G %s %s >/dev/null 2>&1", group, name);
    if (sh(cmd) != 0) return (uid_t)-1;
  }
  return getpwnam(name)->pw_uid;
}

/* Runs this program's worker args under the shim, as user (NULL: as we
 * are; with the user's groups) or in a pid namespace of its own (unshare;
 * pidns 2: with --kill-child, so a kill of the returned pid ends it all),
 * with extra "NAME=VALUE" settings; returns its pid. LD_PRELOAD is set for
 * the worker only (never for setpriv or unshare themselves). */
static pid_t start(const char *user, int pidns, const char *const *env, const char *const *args) {
  char self[1024];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  T_CHECK(n > 0, "readlink");
  self[n] = 0;
  pid_t pid = fork();
  T_CHECK(pid >= 0, "fork");
  if (pid) return pid;
  const char *argv[64];
  int k = 0;
  char uid[32], gid[32];
  if (user) {
    struct passwd *pw = getpwnam(user);
    snprintf(uid, sizeof uid, "--reuid=%u", (unsigned)pw->pw_uid);
    snprintf(gid, sizeof gid, "--regid=%u", (unsigned)pw->pw_gid);
    argv[k++] = "setpriv";
    argv[k++] = uid;
    argv[k++] = gid;
    argv[k++] = "--init-groups";
  }
  if (pidns) {
    argv[k++] = "unshare";
    argv[k++] = "--pid";
    argv[k++] = "--fork";
    if (pidns == 2) argv[k++] = "--kill-child";   /* killing unshare kills the namespace */
    argv[k++] = "--mount-proc";
  }
  argv[k++] = "env";
  static char pre[1100];
  snprintf(pre, sizeof pre, "LD_PRELOAD=%s", g_shim);
  argv[k++] = pre;
  for (int i = 0; env && env[i]; i++) argv[k++] = env[i];
  argv[k++] = self;
  for (int i = 0; args[i]; i++) argv[k++] = args[i];
  argv[k] = NULL;
  unsetenv("LD_PRELOAD");
  execvp(argv[0], (char **)argv);
  _exit(127);
}

static int wait_status(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void cleanup_user(const char *user, const char *group) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "userdel %s >/dev/null 2>&1", user);
  (void)sh(cmd);
  if (group) {
    snprintf(cmd, sizeof cmd, "groupdel %s >/dev/null 2>&1", group);
    (void)sh(cmd);
  }
}

/* (3) IPC for a service account in the packaged layout: the ledger folder
 * root:GROUP 2770 (setgid), the user a member of GROUP, not root. The
 * exporter and the importer run as that user in MODE (vmm, chunks), first
 * with the packaged folder, then with no ledger_dir and no system folder
 * it may use (the per-user fallback, $XDG_RUNTIME_DIR/vramshim). Before the
 * fix: cuIpcGetMemHandle in vmm mode returned 304 ("cannot serve IPC
 * exports on a socket in ... (Operation not permitted)"). */
static int case_packaged(const char *mode) {
  if (geteuid() != 0) {
    T_SAY("SKIP: needs root to create a service account and a root-owned group folder");
    return 77;
  }
  const char *user = "vsipc23u", *group = "vsipc23g";
  uid_t uid = throwaway_user(user, group);
  if (uid == (uid_t)-1) {
    T_SAY("SKIP: cannot create user %s in group %s (useradd/groupadd)", user, group);
    return 77;
  }
  gid_t ledger_gid = getgrnam(group)->gr_gid, ugid = getpwnam(user)->pw_gid;
  /* The folder as the package makes it, and the user's own files. */
  char run[1100], out[1100], xdg[1100];
  snprintf(run, sizeof run, "%s", path_in("run"));
  snprintf(out, sizeof out, "%s", path_in("out"));
  snprintf(xdg, sizeof xdg, "%s", path_in("xdg"));
  T_CHECK(mkdir(run, 0700) == 0 && chown(run, 0, ledger_gid) == 0 && chmod(run, 02770) == 0, "make %s", run);
  T_CHECK(mkdir(out, 0700) == 0 && chown(out, uid, ugid) == 0, "make %s", out);
  T_CHECK(mkdir(xdg, 0700) == 0 && chown(xdg, uid, ugid) == 0, "make %s", xdg);
  char conf[4096], state[1200], cfgenv[1200], xdgenv[1200];
  snprintf(conf, sizeof conf, "[global]\narena = %s\nledger_dir = %s\ndump_dir = %s/dumps\n", mode, run, out);
  write_file(path_in("packaged.conf"), conf, 0644);
  snprintf(conf, sizeof conf, "[global]\narena = %s\ndump_dir = %s/dumps\n", mode, out);
  write_file(path_in("fallback.conf"), conf, 0644);
  snprintf(state, sizeof state, "VRAMSIM_STATE=%s/sim.state", out);
  int rc = 0;
  for (int fallback = 0; fallback < 2 && rc == 0; fallback++) {
    snprintf(cfgenv, sizeof cfgenv, "VRAMSHIM_CONFIG=%s", path_in(fallback ? "fallback.conf" : "packaged.conf"));
    snprintf(xdgenv, sizeof xdgenv, "XDG_RUNTIME_DIR=%s", xdg);
    const char *env[] = {state, cfgenv, xdgenv, NULL};
    char hexfile[1200];
    snprintf(hexfile, sizeof hexfile, "%s/handle%d.hex", out, fallback);
    const char *args[] = {"export", mode, hexfile, "-", "7", NULL};
    int st = wait_status(start(user, 0, env, args));
    T_SAY("%s, %s: exporter and importer as uid %u: status %d", mode,
          fallback ? "the per-user fallback folder" : "the packaged root:group 2770 folder", (unsigned)uid, st);
    rc = st;
  }
  /* The exporter's files went into the folders the ledger uses. */
  struct stat s;
  int in_fallback = stat(path_in("xdg/vramshim"), &s) == 0 && s.st_uid == uid;
  cleanup_user(user, group);
  T_CHECK(rc == 0, "IPC works for a service account in the packaged layout and the per-user fallback (%s)", mode);
  T_CHECK(in_fallback, "the fallback run used $XDG_RUNTIME_DIR/vramshim");
  return 0;
}

/* (4) Two containers with pid namespaces of their own sharing one ledger
 * folder: each runs an exporter that is pid 1 in its namespace (unshare
 * --pid --fork), both export before either's importer (pid 2 in the same
 * namespace) opens its handle; each must read its own exporter's bytes.
 * Before the fix: the second exporter replaced ipc-1.sock / ipc-1.rec and
 * the first container's import failed. */
static int case_pidns(const char *mode) {
  if (geteuid() != 0 || sh("unshare --pid --fork --mount-proc true >/dev/null 2>&1") != 0) {
    T_SAY("SKIP: unshare --pid --fork --mount-proc is not permitted here");
    return 77;
  }
  char conf[2048], cfgenv[1100];
  T_CHECK(mkdir(path_in("ledger"), 0700) == 0, "mkdir");
  snprintf(conf, sizeof conf, "[global]\narena = %s\nledger_dir = %s\ndump_dir = %s\n", mode, path_in("ledger"),
           path_in("dumps"));
  write_file(path_in("vs.conf"), conf, 0644);
  snprintf(cfgenv, sizeof cfgenv, "VRAMSHIM_CONFIG=%s", path_in("vs.conf"));
  const char *env[] = {cfgenv, NULL};
  char hex[2][1100], go[1100];
  snprintf(go, sizeof go, "%s", path_in("go"));
  pid_t kid[2];
  for (int i = 0; i < 2; i++) {
    snprintf(hex[i], sizeof hex[i], "%s/handle%d.hex", g_dir, i);
    const char *args[] = {"export", mode, hex[i], go, i ? "22" : "11", NULL};
    kid[i] = start(NULL, 1, env, args);
    for (int t = 0; !exists(hex[i]); t++) {
      int st;
      T_CHECK(waitpid(kid[i], &st, WNOHANG) == 0, "exporter %d ended early (status %d)", i, st);
      T_CHECK(t < 6000, "exporter %d wrote no handle in 60 s", i);
      sleep_ms(10);
    }
  }
  /* The setup collides: both exporters are pid 1 in their namespaces. */
  int32_t pid[2];
  for (int i = 0; i < 2; i++) {
    FILE *f = fopen(hex[i], "r");
    char txt[200] = "";
    T_CHECK(f && fgets(txt, sizeof txt, f), "read %s", hex[i]);
    fclose(f);
    CUipcMemHandle h;
    t_ipc_from_hex(txt, &h);
    memcpy(&pid[i], h.reserved + 16, sizeof pid[i]);
  }
  T_SAY("%s: both exporters have pid %d in their own namespaces", mode, (int)pid[0]);
  T_CHECK(pid[0] == pid[1], "the same local pid in both namespaces (%d, %d)", (int)pid[0], (int)pid[1]);
  write_file(go, "", 0644);
  int st0 = wait_status(kid[0]), st1 = wait_status(kid[1]);
  T_CHECK(st0 == 0 && st1 == 0, "each container's importer reads its own exporter's bytes (status %d, %d)", st0, st1);
  return 0;
}

/* Asks process pid for a dump with the tool (as root); its exit status
 * (the tool prints the dump, not its path). */
static int request_dump(int pid, const char *ledger) {
  const char *tool = getenv("VS_TOOL");
  T_CHECK(tool && *tool, "VS_TOOL names the vramshim tool");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s dump --pid %d --ledger-dir %s > %s 2>&1", tool, pid, ledger, path_in("answer.txt"));
  return sh(cmd);
}

/* The dump of process pid in folder dir, into path: 0, or -1 when none. */
static int find_dump(const char *dir, int pid, char *path, size_t n) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "vramshim-%d-", pid);
  DIR *d = opendir(dir);
  int found = -1;
  for (struct dirent *e; d && (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, strlen(prefix))) {
      snprintf(path, n, "%s/%s", dir, e->d_name);
      found = 0;
    }
  if (d) closedir(d);
  return found;
}

static int wait_file(const char *path, pid_t pid) {
  for (int t = 0; t < 3000; t++) {
    int st;
    if (exists(path)) return 0;
    if (waitpid(pid, &st, WNOHANG) == pid) return -1;
    sleep_ms(10);
  }
  return -1;
}

/* The IPC file names (socket or record) in the folder for the handle in
 * hexfile: "ipc-<pid>-<tag>.", into out. */
static void ipc_prefix(const char *hexfile, char *out, size_t n) {
  FILE *f = fopen(hexfile, "r");
  char txt[200] = "";
  T_CHECK(f && fgets(txt, sizeof txt, f), "read %s", hexfile);
  fclose(f);
  CUipcMemHandle h;
  t_ipc_from_hex(txt, &h);
  int32_t pid;
  uint64_t tag;
  memcpy(&pid, h.reserved + 16, sizeof pid);
  memcpy(&tag, h.reserved + 40, sizeof tag);
  snprintf(out, n, "ipc-%d-%llx.", (int)pid, (unsigned long long)tag);
}

/* Files of dir whose names start with prefix. */
static int count_prefixed(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
  if (d) closedir(d);
  return n;
}

/* (4) Containers restart with new pid namespaces, so the files of a killed
 * exporter are never replaced by a process of the same name: the next
 * export removes them (a socket nobody listens on, a record nobody holds),
 * and leaves a live exporter's alone. Before: the files stayed. */
static int case_stale(const char *mode) {
  if (geteuid() != 0 || sh("unshare --pid --fork --kill-child --mount-proc true >/dev/null 2>&1") != 0) {
    T_SAY("SKIP: unshare --pid --fork --kill-child --mount-proc is not permitted here");
    return 77;
  }
  char conf[2048], cfgenv[1100], ledger[1100];
  snprintf(ledger, sizeof ledger, "%s", path_in("ledger"));
  T_CHECK(mkdir(ledger, 0700) == 0, "mkdir");
  snprintf(conf, sizeof conf, "[global]\narena = %s\nledger_dir = %s\ndump_dir = %s\n", mode, ledger,
           path_in("dumps"));
  write_file(path_in("vs.conf"), conf, 0644);
  snprintf(cfgenv, sizeof cfgenv, "VRAMSHIM_CONFIG=%s", path_in("vs.conf"));
  const char *env[] = {cfgenv, NULL};
  char hex[3][1100], go[2][1100], pre[3][200];
  pid_t kid[3];
  for (int i = 0; i < 3; i++) {
    snprintf(hex[i], sizeof hex[i], "%s/handle%d.hex", g_dir, i);
    if (i < 2) snprintf(go[i], sizeof go[i], "%s/go%d", g_dir, i);
  }
  /* 0: killed after its export; 1: alive through the sweep. */
  for (int i = 0; i < 2; i++) {
    const char *args[] = {"export", mode, hex[i], go[i], "5", NULL};
    kid[i] = start(NULL, 2, env, args);
    T_CHECK(wait_file(hex[i], kid[i]) == 0, "exporter %d wrote its handle", i);
    ipc_prefix(hex[i], pre[i], sizeof pre[i]);
  }
  kill(kid[0], SIGKILL);   /* unshare --kill-child: its namespace goes with it */
  wait_status(kid[0]);
  sleep_ms(100);
  int left0 = count_prefixed(ledger, pre[0]);
  T_SAY("%s: the killed exporter left %d file(s) %s*", mode, left0, pre[0]);
  T_CHECK(left0 == 1, "the killed exporter's file is there before the sweep (%d)", left0);
  /* 2: a new exporter's first export sweeps. */
  const char *args[] = {"export", mode, hex[2], "-", "6", NULL};
  int st2 = wait_status(start(NULL, 2, env, args));
  int after0 = count_prefixed(ledger, pre[0]), after1 = count_prefixed(ledger, pre[1]);
  write_file(go[1], "", 0644);
  int st1 = wait_status(kid[1]);
  T_SAY("%s: after a new export, the dead exporter's files: %d, the live one's: %d", mode, after0, after1);
  T_CHECK(st2 == 0 && st1 == 0, "the new and the live exporter's imports worked (%d, %d)", st2, st1);
  T_CHECK(after0 == 0, "the dead exporter's file was removed (%d)", after0);
  T_CHECK(after1 == 1, "the live exporter's file stayed (%d)", after1);
  return 0;
}

/* (9) A shared dump folder is never its first user's: in a sticky 1777
 * folder (as the package makes /var/tmp/vramshim) a service account's dump
 * goes to <dir>/<uid> (0700, its own) and root's to <dir>/0; in a folder
 * the service account made private for itself (what the default folder
 * became before the fix), root's dumps still go, to <dir>/0. Before the
 * fix: the account's process refused the shared folder ("writable by group
 * or others"), and root's dumps failed in the account's folder. */
static int case_dumpdir(void) {
  if (geteuid() != 0) {
    T_SAY("SKIP: needs root to create a service account");
    return 77;
  }
  const char *user = "vsipc23u", *group = "vsipc23g";
  uid_t uid = throwaway_user(user, group);
  if (uid == (uid_t)-1) {
    T_SAY("SKIP: cannot create user %s in group %s (useradd/groupadd)", user, group);
    return 77;
  }
  gid_t ledger_gid = getgrnam(group)->gr_gid, ugid = getpwnam(user)->pw_gid;
  char run[1100], out[1100], shared[1100], theirs[1100];
  snprintf(run, sizeof run, "%s", path_in("run"));
  snprintf(out, sizeof out, "%s", path_in("out"));
  snprintf(shared, sizeof shared, "%s", path_in("shared"));
  snprintf(theirs, sizeof theirs, "%s", path_in("theirs"));
  T_CHECK(mkdir(run, 0700) == 0 && chown(run, 0, ledger_gid) == 0 && chmod(run, 02770) == 0, "make %s", run);
  T_CHECK(mkdir(out, 0700) == 0 && chown(out, uid, ugid) == 0, "make %s", out);
  T_CHECK(mkdir(shared, 0700) == 0 && chmod(shared, 01777) == 0, "make %s", shared);
  T_CHECK(mkdir(theirs, 0700) == 0 && chown(theirs, uid, ugid) == 0, "make %s", theirs);
  char conf[4096], state[1200], cfgenv[1200];
  snprintf(state, sizeof state, "VRAMSIM_STATE=%s/sim.state", out);
  int rc = 0;
  for (int round = 0; round < 2 && rc == 0; round++) {
    const char *dd = round ? theirs : shared;
    snprintf(conf, sizeof conf, "[global]\nledger_dir = %s\ndump_dir = %s\n", run, dd);
    char cf[1100];
    snprintf(cf, sizeof cf, "%s/dump%d.conf", g_dir, round);
    write_file(cf, conf, 0644);
    snprintf(cfgenv, sizeof cfgenv, "VRAMSHIM_CONFIG=%s", cf);
    const char *env[] = {state, cfgenv, NULL};
    /* round 0: the account and root; round 1: root only (the folder is the account's). */
    for (int who = round; who < 2 && rc == 0; who++) {
      char ready[1200], want[1200];
      snprintf(ready, sizeof ready, "%s/ready%d%d", out, round, who);
      const char *args[] = {"hold", ready, NULL};
      pid_t p = start(who ? NULL : user, 0, env, args);
      T_CHECK(wait_file(ready, p) == 0, "the holder started (round %d, %s)", round, who ? "root" : user);
      int trc = request_dump((int)p, run);
      snprintf(want, sizeof want, "%s/%u", dd, who ? 0u : (unsigned)uid);
      char path[1600] = "(none)";
      struct stat st;
      int ok = trc == 0 && find_dump(want, (int)p, path, sizeof path) == 0 && stat(path, &st) == 0 &&
               st.st_uid == (who ? 0 : uid) && st.st_size > 0;
      T_SAY("dump_dir %s, %s: tool exit %d, dump %s", round ? "the account's private folder" : "a shared 1777 folder",
            who ? "root" : user, trc, path);
      if (!ok) rc = 1;
      kill(p, SIGKILL);
      wait_status(p);
    }
  }
  struct stat st;
  char sub[1200];
  snprintf(sub, sizeof sub, "%s/%u", shared, (unsigned)uid);
  int private_sub = stat(sub, &st) == 0 && st.st_uid == uid && (st.st_mode & 07777) == 0700;
  cleanup_user(user, group);
  T_CHECK(rc == 0, "each user's dump in its own folder");
  T_CHECK(private_sub, "the account's folder in the shared one is its own, 0700");
  return 0;
}

/* (9) Another local user made the fallback ledger folder
 * /tmp/vramshim-<uid> of a service account first: the account's programs
 * pass it over for $HOME/.cache/vramshim, which nobody else can make, and
 * run. Before the fix: they stopped with exit 78 ("belongs to another
 * user"). */
static int case_fallback(void) {
  if (geteuid() != 0) {
    T_SAY("SKIP: needs root to create two service accounts");
    return 77;
  }
  const char *user = "vsipc23u", *other = "vsipc23v";
  uid_t uid = throwaway_user(user, NULL), vid = throwaway_user(other, NULL);
  if (uid == (uid_t)-1 || vid == (uid_t)-1) {
    T_SAY("SKIP: cannot create users %s and %s (useradd)", user, other);
    return 77;
  }
  gid_t ugid = getpwnam(user)->pw_gid, vgid = getpwnam(other)->pw_gid;
  char taken[64], cmd[256], home[1100], out[1100];
  snprintf(taken, sizeof taken, "/tmp/vramshim-%u", (unsigned)uid);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", taken);
  (void)sh(cmd);
  T_CHECK(mkdir(taken, 0755) == 0 && chown(taken, vid, vgid) == 0, "%s made by %s", taken, other);
  snprintf(home, sizeof home, "%s", path_in("home"));
  snprintf(out, sizeof out, "%s", path_in("out"));
  T_CHECK(mkdir(home, 0700) == 0 && chown(home, uid, ugid) == 0, "make %s", home);
  T_CHECK(mkdir(out, 0700) == 0 && chown(out, uid, ugid) == 0, "make %s", out);
  char conf[2048], state[1200], cfgenv[1200], homeenv[1200];
  snprintf(conf, sizeof conf, "[global]\ndump_dir = %s/dumps\n", out);
  write_file(path_in("fallback.conf"), conf, 0644);
  snprintf(state, sizeof state, "VRAMSIM_STATE=%s/sim.state", out);
  snprintf(cfgenv, sizeof cfgenv, "VRAMSHIM_CONFIG=%s", path_in("fallback.conf"));
  snprintf(homeenv, sizeof homeenv, "HOME=%s", home);
  const char *env[] = {state, cfgenv, homeenv, NULL};
  unsetenv("XDG_RUNTIME_DIR");   /* no per-session folder: the /tmp name is next */
  const char *args[] = {"alloc", NULL};
  int st = wait_status(start(user, 0, env, args));
  struct stat s;
  char cache[1200];
  snprintf(cache, sizeof cache, "%s/.cache/vramshim", home);
  int used = stat(cache, &s) == 0 && s.st_uid == uid;
  (void)sh(cmd);   /* rm -rf the taken name */
  cleanup_user(user, NULL);
  cleanup_user(other, NULL);
  T_CHECK(st == 0, "the account's program runs past a fallback folder taken by another user (exit %d)", st);
  T_CHECK(used, "its ledger is in %s", cache);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  T_CHECK(argc >= 2, "usage: faults_share_prog case NAME WORKDIR [ARG] | WORKER ARGS");
  const char *m = argv[1];
  if (!strcmp(m, "export") && argc == 6) return w_export(argv[2], argv[3], argv[4], (unsigned)atoi(argv[5]));
  if (!strcmp(m, "import") && argc == 4) return w_import(argv[2], (unsigned)atoi(argv[3]));
  if (!strcmp(m, "hold") && argc == 3) return w_hold(argv[2]);
  if (!strcmp(m, "alloc") && argc == 2) return w_alloc();
  T_CHECK(!strcmp(m, "case") && argc >= 4, "usage: faults_share_prog case NAME WORKDIR [ARG]");
  const char *c = argv[2], *arg = argc > 4 ? argv[4] : "";
  snprintf(g_dir, sizeof g_dir, "%s", argv[3]);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  (void)sh(cmd);
  T_CHECK(mkdir(g_dir, 0755) == 0, "mkdir %s: %s", g_dir, strerror(errno));
  g_shim = getenv("LD_PRELOAD");
  T_CHECK(g_shim && *g_shim, "LD_PRELOAD names the shim");
  g_shim = strdup(g_shim);
  unsetenv("LD_PRELOAD");   /* the orchestrator runs shell commands; the workers get it back */
  int r = 1;
  if (!strcmp(c, "packaged")) r = case_packaged(arg);
  else if (!strcmp(c, "pidns")) r = case_pidns(arg);
  else if (!strcmp(c, "dumpdir")) r = case_dumpdir();
  else if (!strcmp(c, "stale")) r = case_stale(arg);
  else if (!strcmp(c, "fallback")) r = case_fallback();
  else T_CHECK(0, "unknown case %s", c);
  if (r == 0) T_SAY("PASS %s %s", c, arg);
  return r;
}

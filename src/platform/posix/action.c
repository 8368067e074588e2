#include "action.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

struct vs_plat_action {
  pid_t pid;
  int out;        /* read end of the output pipe, non-blocking; -1 once closed */
  int reaped, status;
};

/* environ with env's names replaced or added; the strings are not copied. */
static char **merged_env(const char *const *env) {
  size_t n = 0, k = 0;
  while (environ && environ[n]) n++;
  while (env && env[k]) k++;
  char **out = malloc((n + k + 1) * sizeof *out);
  if (!out) return NULL;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(environ[i], '=');
    size_t len = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
    int replaced = 0;
    for (size_t j = 0; j < k && !replaced; j++) replaced = !strncmp(env[j], environ[i], len) && env[j][len] == '=';
    if (!replaced) out[m++] = environ[i];
  }
  for (size_t j = 0; j < k; j++) out[m++] = (char *)env[j];
  out[m] = NULL;
  return out;
}

vs_plat_action *vs_plat_action_start(const char *program, const char *const *env, char *err, size_t errlen) {
  vs_plat_action *a = calloc(1, sizeof *a);
  int p[2] = {-1, -1};
  char **envp = merged_env(env);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  int fa_ok = 0, at_ok = 0, rc = ENOMEM;
  if (!a || !envp || pipe2(p, O_CLOEXEC)) {
    rc = a && envp ? errno : ENOMEM;
    goto fail;
  }
  if ((rc = posix_spawn_file_actions_init(&fa))) goto fail;
  fa_ok = 1;
  if ((rc = posix_spawnattr_init(&at))) goto fail;
  at_ok = 1;
  /* Its own process group (killed whole at the timeout); default signal
   * dispositions and an empty mask whatever the recorder blocks. */
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  if ((rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) ||
      (rc = posix_spawnattr_setpgroup(&at, 0)) || (rc = posix_spawnattr_setsigmask(&at, &none)) ||
      (rc = posix_spawnattr_setsigdefault(&at, &all)))
    goto fail;
  if ((rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) ||
      (rc = posix_spawn_file_actions_adddup2(&fa, p[1], 1)) || (rc = posix_spawn_file_actions_adddup2(&fa, p[1], 2)))
    goto fail;
  char *argv[] = {(char *)program, NULL};
  if ((rc = posix_spawn(&a->pid, program, &fa, &at, argv, envp))) goto fail;
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  free(envp);
  close(p[1]);
  a->out = p[0];
  fcntl(a->out, F_SETFL, fcntl(a->out, F_GETFL) | O_NONBLOCK);
  return a;
fail:
  snprintf(err, errlen, "cannot start %s: %s", program, strerror(rc));
  if (fa_ok) posix_spawn_file_actions_destroy(&fa);
  if (at_ok) posix_spawnattr_destroy(&at);
  if (p[0] >= 0) close(p[0]), close(p[1]);
  free(envp);
  free(a);
  return NULL;
}

long vs_plat_action_read(vs_plat_action *a, char *buf, size_t len) {
  if (a->out < 0) return -1;
  for (;;) {
    ssize_t n = read(a->out, buf, len);
    if (n > 0) return (long)n;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    close(a->out);
    a->out = -1;
    return -1;
  }
}

static void took(vs_plat_action *a, int st) {
  a->reaped = 1;
  a->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1;
}

int vs_plat_action_done(vs_plat_action *a, int *status) {
  if (!a->reaped) {
    int st;
    pid_t r;
    while ((r = waitpid(a->pid, &st, WNOHANG)) < 0 && errno == EINTR) {
    }
    if (r == a->pid) took(a, st);
    else if (r < 0) a->reaped = 1, a->status = -1;
  }
  if (a->reaped) *status = a->status;
  return a->reaped;
}

void vs_plat_action_kill(vs_plat_action *a) {
  if (a->reaped) return;
  kill(-a->pid, SIGKILL); /* the group: what the action started goes too */
  kill(a->pid, SIGKILL);
  int st;
  pid_t r;
  while ((r = waitpid(a->pid, &st, 0)) < 0 && errno == EINTR) {
  }
  if (r == a->pid) took(a, st);
  else a->reaped = 1, a->status = -SIGKILL;
}

void vs_plat_action_free(vs_plat_action *a) {
  if (!a) return;
  if (a->out >= 0) close(a->out);
  free(a);
}

int vs_plat_program_check(const char *program, char *err, size_t errlen) {
  struct stat st, ds;
  if (program[0] != '/') {
    snprintf(err, errlen, "%s: not an absolute path", program);
    return -1;
  }
  if (stat(program, &st)) {
    snprintf(err, errlen, "%s: %s", program, strerror(errno));
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "%s: not a regular file", program);
    return -1;
  }
  if (access(program, X_OK)) {
    snprintf(err, errlen, "%s: not executable by this user (%s)", program, strerror(errno));
    return -1;
  }
  if (st.st_mode & S_IWOTH) {
    snprintf(err, errlen, "%s: writable by every user (anyone could change what the recorder runs)", program);
    return -1;
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", program);
  char *d = dirname(dir);
  if (stat(d, &ds) == 0 && (ds.st_mode & S_IWOTH) && !(ds.st_mode & S_ISVTX)) {
    snprintf(err, errlen, "%s: its folder %s is writable by every user (anyone could replace it)", program, d);
    return -1;
  }
  return 0;
}

const char *vs_plat_system_state_dir(void) { return "/var/lib/vramshim"; }

void vs_plat_default_state_file(const char *name, int for_writing, char *out, size_t len, int *fallback) {
  const char *sys = vs_plat_system_state_dir();
  *fallback = 0;
  snprintf(out, len, "%s/%s", sys, name);
  /* A writer that may make the system folder (root without systemd's
   * StateDirectory=, a container) makes it readable by all: `vramshim
   * history` and `status` read it as any user. */
  if (for_writing && access(sys, F_OK) != 0 && access("/var/lib", W_OK | X_OK) == 0) mkdir(sys, 0755);
  if (for_writing ? access(sys, W_OK | X_OK) == 0 : access(out, R_OK) == 0) return;
  *fallback = 1;
  const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
  if (xdg && xdg[0] == '/') snprintf(out, len, "%s/vramshim/%s", xdg, name);
  else if (home && home[0] == '/') snprintf(out, len, "%s/.local/state/vramshim/%s", home, name);
  else snprintf(out, len, "/tmp/vramshim-%u/%s", (unsigned)geteuid(), name);
}

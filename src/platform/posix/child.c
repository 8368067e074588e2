/* child.h on POSIX: posix_spawn with LD_PRELOAD, a pipe for stdout, wait4
 * for the exit status and the peak RSS. */
#include "child.h"

#include <dlfcn.h>
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

extern char **environ;

const char vs_plat_driver_file[] = "libcuda.so.1";

int vs_plat_scratch_dir(const char *prefix, char *out, size_t len, char *err, size_t errlen) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  if (snprintf(out, len, "%s/%sXXXXXX", tmp, prefix) >= (int)len) {
    snprintf(err, errlen, "the folder name under %s is too long", tmp);
    return -1;
  }
  if (!mkdtemp(out)) {
    snprintf(err, errlen, "cannot make a folder under %s: %s", tmp, strerror(errno));
    return -1;
  }
  return 0;
}

int vs_plat_mkdir_private(const char *path) { return mkdir(path, 0700); }

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  (void)remove(path);
  return 0;
}

void vs_plat_remove_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* The ASan runtime this process runs with, if any. */
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

int vs_plat_run_child(const char *shim, const char *driver_dir, const char *scratch, char *const argv[],
                      int (*keep)(const char *entry), char *const add[], char *out, size_t len,
                      vs_plat_child_result *res, char *why, size_t whylen) {
  (void)scratch;
  memset(res, 0, sizeof *res);
  char asan[PATH_MAX];
  int with_asan = asan_runtime(asan, sizeof asan);
  char e_preload[2 * PATH_MAX + 32], e_libpath[PATH_MAX + 32];
  snprintf(e_preload, sizeof e_preload, "LD_PRELOAD=%s%s%s", with_asan ? asan : "", with_asan ? ":" : "", shim);
  snprintf(e_libpath, sizeof e_libpath, "LD_LIBRARY_PATH=%s", driver_dir);
  size_t n = 0, nadd = 0;
  while (environ[n]) n++;
  while (add && add[nadd]) nadd++;
  char **env = calloc(n + nadd + 3, sizeof *env);
  if (!env) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const char *e = environ[i];
    if (!strncmp(e, "LD_PRELOAD=", 11) || !strncmp(e, "LD_LIBRARY_PATH=", 16) || (keep && !keep(e))) continue;
    env[k++] = environ[i];
  }
  env[k++] = e_preload;
  env[k++] = e_libpath;
  for (size_t i = 0; i < nadd; i++) env[k++] = add[i];
  env[k] = NULL;
  int fds[2] = {-1, -1};
  if (pipe2(fds, O_CLOEXEC) != 0) {
    snprintf(why, whylen, "cannot start %s: %s", argv[0], strerror(errno));
    free(env);
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  pid_t pid;
  int sp = posix_spawn(&pid, argv[0], &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  close(fds[1]);
  if (sp != 0) {
    close(fds[0]);
    snprintf(why, whylen, "cannot run %s: %s", argv[0], strerror(sp));
    return -1;
  }
  /* Keep the last part of whatever it says. */
  size_t got = 0, half = len / 2;
  for (;;) {
    if (got + 1 >= len) {
      memmove(out, out + half, got - half);
      got -= half;
    }
    ssize_t r = read(fds[0], out + got, len - 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  out[got] = 0;
  close(fds[0]);
  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  res->max_rss = (uint64_t)ru.ru_maxrss * 1024;
  return 0;
}

void *vs_plat_shim_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

int vs_plat_open_files_short(uint64_t n) {
  struct rlimit rl;
  return getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && n > (uint64_t)rl.rlim_max;
}

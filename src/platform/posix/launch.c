/* launch.h on POSIX: LD_PRELOAD and exec. */
#include "file.h"
#include "launch.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char vs_plat_shim_file[] = "libvramshim.so";
const char vs_plat_launch_how[] = "LD_PRELOAD gets libvramshim.so first, then execs it";

void vs_plat_self_dir(char *out, size_t len) {
  char path[PATH_MAX];
  out[0] = 0;
  if (vs_plat_self_exe(path, sizeof path)) return;
  size_t dir = (size_t)(vs_plat_base_name(path) - path);
  if (dir) snprintf(out, len, "%.*s", (int)dir, path);
}

int vs_plat_readable(const char *path) { return path && *path && access(path, R_OK) == 0; }

int vs_plat_canonical(const char *path, char *out, size_t len) {
  char folder[PATH_MAX], real[PATH_MAX];
  snprintf(folder, sizeof folder, "%s", path);
  char *slash = strrchr(folder, '/');
  if (!slash) {
    errno = EINVAL;
    return -1;
  }
  *slash = 0;
  if (!realpath(*folder ? folder : "/", real)) return -1;
  snprintf(out, len, "%s/%s", strcmp(real, "/") ? real : "", slash + 1);
  return 0;
}

int vs_plat_realpath(const char *path, char *out, size_t len) {
  char real[PATH_MAX];
  if (!realpath(path, real)) return -1;
  snprintf(out, len, "%s", real);
  return 0;
}

int vs_plat_setenv(const char *name, const char *value) { return setenv(name, value, 1); }

/* LD_PRELOAD = shim, then what was there (minus the shim itself: once is enough). */
static int set_preload(const char *shim) {
  const char *old = getenv("LD_PRELOAD");
  size_t cap = strlen(shim) + (old ? strlen(old) : 0) + 2;
  char *v = malloc(cap);
  if (!v) return -1;
  snprintf(v, cap, "%s", shim);
  if (old) {
    char *copy = strdup(old), *save = NULL;
    if (!copy) {
      free(v);
      return -1;
    }
    /* ld.so separates LD_PRELOAD entries by ':' or blanks. */
    for (char *tok = strtok_r(copy, ": \t", &save); tok; tok = strtok_r(NULL, ": \t", &save)) {
      if (!strcmp(tok, shim)) continue;
      strcat(v, ":");
      strcat(v, tok);
    }
    free(copy);
  }
  int r = setenv("LD_PRELOAD", v, 1);
  free(v);
  return r;
}

int vs_plat_launch(const char *shim, char *const argv[], int *exit_code, char *why, size_t len) {
  (void)exit_code;
  if (set_preload(shim)) {
    snprintf(why, len, "cannot set LD_PRELOAD: %s", strerror(errno));
    return -1;
  }
  fflush(NULL);
  execvp(argv[0], argv);
  snprintf(why, len, "cannot run '%s': %s", argv[0], strerror(errno));
  return -1;
}

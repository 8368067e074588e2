/* vramshim run [--tenant T] [--config F] -- PROGRAM [ARGS]
 *
 * Linux: prepends libvramshim.so to LD_PRELOAD, sets VRAMSHIM_TENANT and
 * VRAMSHIM_CONFIG from the flags and execs PROGRAM (searched in PATH), so
 * the program's pid, exit status and signals are its own: there is no
 * parent left waiting. If it cannot be started: a message and exit 127.
 *
 * Which shim: $VRAMSHIM_LIBRARY when set (a path, or several separated by
 * ':' such as an ASan runtime first), else the one installed next to this
 * tool (<prefix>/<bindir>/vramshim -> <prefix>/<libdir>/libvramshim.so, the
 * relative path fixed at build time), else, for the tool in the build tree,
 * the build tree's library. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"

#ifndef VS_RUN_BIN_TO_SHIM
#error "VS_RUN_BIN_TO_SHIM: the shim relative to the tool's folder (tools/vramshim/CMakeLists.txt)"
#endif

#define EXIT_CANNOT_RUN 127
#define EXIT_USAGE 2
#define EXIT_CONFIG 78

static void usage(FILE *out) {
  fprintf(out,
          "usage: vramshim run [--tenant T] [--config F] [--] PROGRAM [ARGS]\n"
          "  Runs PROGRAM under the shim: LD_PRELOAD gets libvramshim.so first, then execs it.\n"
          "  --tenant T   sets VRAMSHIM_TENANT=T (default: as VRAMSHIM_TENANT, match_exe, or 'default')\n"
          "  --config F   sets VRAMSHIM_CONFIG to F's absolute path (default: $VRAMSHIM_CONFIG, else\n"
          "               /etc/vramshim.conf)\n"
          "  The exit status is PROGRAM's; 127 when it cannot be started.\n"
          "  VRAMSHIM_LIBRARY=PATH preloads that shim instead of the installed one.\n");
}

static int readable(const char *path) { return path && *path && access(path, R_OK) == 0; }

/* The folder of this executable, with a trailing '/'; "" when unknown. */
static void self_dir(char *out, size_t len) {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  out[0] = 0;
  if (n <= 0) return;
  path[n] = 0;
  char *slash = strrchr(path, '/');
  if (!slash) return;
  slash[1] = 0;
  snprintf(out, len, "%s", path);
}

/* The shim to preload into out; -1 when none is found (out names where it looked). */
static int find_shim(char *out, size_t len) {
  const char *env = getenv("VRAMSHIM_LIBRARY");
  if (env && *env) {
    snprintf(out, len, "%s", env);
    return 0;
  }
  char dir[PATH_MAX], cand[PATH_MAX + 64];
  self_dir(dir, sizeof dir);
  snprintf(cand, sizeof cand, "%s%s", dir, VS_RUN_BIN_TO_SHIM);
  /* The folder canonical (no "bin/../"), the file name as installed: the
   * unversioned libvramshim.so, whatever version it points to. */
  char folder[PATH_MAX + 64], real[PATH_MAX];
  snprintf(folder, sizeof folder, "%s", cand);
  char *slash = strrchr(folder, '/');
  if (slash) *slash = 0;
  if (readable(cand) && slash && realpath(folder, real)) {
    snprintf(out, len, "%s/%s", real, slash + 1);
    return 0;
  }
#ifdef VS_RUN_BUILD_TOOL_DIR
  /* The build tree's shim, only for the build tree's tool: an installed
   * tool never picks up a build folder. */
  char built_dir[PATH_MAX];
  if (realpath(VS_RUN_BUILD_TOOL_DIR, built_dir) && !strncmp(dir, built_dir, strlen(built_dir)) &&
      dir[strlen(built_dir)] == '/' && dir[strlen(built_dir) + 1] == 0 && readable(VS_RUN_BUILD_SHIM)) {
    snprintf(out, len, "%s", VS_RUN_BUILD_SHIM);
    return 0;
  }
#endif
  snprintf(out, len, "%s", cand);
  return -1;
}

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

int cmd_run(int argc, char **argv) {
  const char *tenant = NULL, *config = NULL;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    }
    const char **dst = NULL;
    const char *val = NULL;
    if (!strncmp(a, "--tenant", 8)) dst = &tenant, val = a + 8;
    else if (!strncmp(a, "--config", 8)) dst = &config, val = a + 8;
    else if (a[0] == '-') {
      fprintf(stderr, "vramshim: run: unknown option '%s'\n", a);
      usage(stderr);
      return EXIT_USAGE;
    } else {
      break; /* the program */
    }
    if (*val == '=') val++;
    else if (*val == 0 && i + 1 < argc) val = argv[++i];
    else {
      fprintf(stderr, "vramshim: run: option '%s' needs a value\n", a);
      return EXIT_USAGE;
    }
    if (!*val) {
      fprintf(stderr, "vramshim: run: option '%s' needs a non-empty value\n", a);
      return EXIT_USAGE;
    }
    *dst = val;
  }
  if (i >= argc) {
    fprintf(stderr, "vramshim: run: no program given\n");
    usage(stderr);
    return EXIT_USAGE;
  }
  char shim[PATH_MAX + 64];
  if (find_shim(shim, sizeof shim)) {
    fprintf(stderr,
            "vramshim: run: the shim libvramshim.so is not where this tool expects it (%s); install it there "
            "or set VRAMSHIM_LIBRARY to its path\n",
            shim);
    return EXIT_CANNOT_RUN;
  }
  if (config) {
    /* Absolute, so the program may change folders; checked here, so a typo is
     * reported before the program starts (the shim would stop it with 78). */
    char real[PATH_MAX];
    if (!realpath(config, real)) {
      fprintf(stderr, "vramshim: run: cannot use the config file %s: %s\n", config, strerror(errno));
      return EXIT_CONFIG;
    }
    if (setenv("VRAMSHIM_CONFIG", real, 1)) return EXIT_CANNOT_RUN;
  }
  if (tenant && setenv("VRAMSHIM_TENANT", tenant, 1)) return EXIT_CANNOT_RUN;
  if (set_preload(shim)) {
    fprintf(stderr, "vramshim: run: cannot set LD_PRELOAD: %s\n", strerror(errno));
    return EXIT_CANNOT_RUN;
  }
  fflush(NULL);
  execvp(argv[i], argv + i);
  int e = errno;
  fprintf(stderr, "vramshim: run: cannot run '%s': %s\n", argv[i], strerror(e));
  return EXIT_CANNOT_RUN;
}

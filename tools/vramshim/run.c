/* vramshim run [--tenant T] [--config F] -- PROGRAM [ARGS]
 *
 * The front end, the same on every system: the options, the shim to load,
 * VRAMSHIM_TENANT and VRAMSHIM_CONFIG set from the flags (the program and
 * its children inherit them). Starting the program is the platform's
 * (src/platform/launch.h): on Linux LD_PRELOAD and exec, so the program's
 * pid, exit status and signals are its own; on Windows the injecting
 * launcher, which waits and returns the program's exit code. If it cannot
 * be started: a message and exit 127.
 *
 * Which shim: $VRAMSHIM_LIBRARY when set (on Linux a path, or several
 * separated by ':' such as an ASan runtime first), else the one installed
 * next to this tool (<prefix>/<bindir>/vramshim -> <prefix>/<libdir>/
 * libvramshim.so, the relative path fixed at build time; on Windows
 * vramshim.dll beside vramshim.exe), else, for the tool in the build tree,
 * the build tree's library. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "launch.h"
#include "procenv.h"

#ifndef VS_RUN_BIN_TO_SHIM
#error "VS_RUN_BIN_TO_SHIM: the shim relative to the tool's folder (tools/vramshim/CMakeLists.txt)"
#endif

#define EXIT_CANNOT_RUN 127
#define EXIT_USAGE 2
#define EXIT_CONFIG 78
#define RUN_PATH_MAX 4096

static void usage(FILE *out) {
  fprintf(out,
          "usage: vramshim run [--tenant T] [--config F] [--] PROGRAM [ARGS]\n"
          "  Runs PROGRAM under the shim: %s.\n"
          "  --tenant T   sets VRAMSHIM_TENANT=T (default: as VRAMSHIM_TENANT, match_exe, or 'default')\n"
          "  --config F   sets VRAMSHIM_CONFIG to F's absolute path (default: $VRAMSHIM_CONFIG, else\n"
          "               the default config file, docs/config.md)\n"
          "  The exit status is PROGRAM's; 127 when it cannot be started.\n"
          "  VRAMSHIM_LIBRARY=PATH loads that shim instead of the installed one.\n",
          vs_plat_launch_how);
}

/* The shim to load into out; -1 when none is found (out names where it looked). */
static int find_shim(char *out, size_t len) {
  const char *env = vs_plat_getenv("VRAMSHIM_LIBRARY");
  if (env && *env) {
    snprintf(out, len, "%s", env);
    return 0;
  }
  char dir[RUN_PATH_MAX], cand[RUN_PATH_MAX + 64];
  vs_plat_self_dir(dir, sizeof dir);
  snprintf(cand, sizeof cand, "%s%s", dir, VS_RUN_BIN_TO_SHIM);
  /* The folder canonical (no "bin/../"), the file name as installed: the
   * unversioned libvramshim.so, whatever version it points to. */
  if (vs_plat_readable(cand) && vs_plat_canonical(cand, out, len) == 0) return 0;
#ifdef VS_RUN_BUILD_TOOL_DIR
  /* The build tree's shim, only for the build tree's tool: an installed
   * tool never picks up a build folder. */
  char built_dir[RUN_PATH_MAX];
  if (vs_plat_realpath(VS_RUN_BUILD_TOOL_DIR, built_dir, sizeof built_dir) == 0 &&
      !strncmp(dir, built_dir, strlen(built_dir)) && dir[strlen(built_dir)] == '/' && dir[strlen(built_dir) + 1] == 0 &&
      vs_plat_readable(VS_RUN_BUILD_SHIM)) {
    snprintf(out, len, "%s", VS_RUN_BUILD_SHIM);
    return 0;
  }
#endif
  snprintf(out, len, "%s", cand);
  return -1;
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
  char shim[RUN_PATH_MAX + 64];
  if (find_shim(shim, sizeof shim)) {
    fprintf(stderr,
            "vramshim: run: the shim %s is not where this tool expects it (%s); install it there "
            "or set VRAMSHIM_LIBRARY to its path\n",
            vs_plat_shim_file, shim);
    return EXIT_CANNOT_RUN;
  }
  if (config) {
    /* Absolute, so the program may change folders; checked here, so a typo is
     * reported before the program starts (the shim would stop it with 78). */
    char real[RUN_PATH_MAX];
    if (vs_plat_realpath(config, real, sizeof real)) {
      fprintf(stderr, "vramshim: run: cannot use the config file %s: %s\n", config, strerror(errno));
      return EXIT_CONFIG;
    }
    if (vs_plat_setenv("VRAMSHIM_CONFIG", real)) return EXIT_CANNOT_RUN;
  }
  if (tenant && vs_plat_setenv("VRAMSHIM_TENANT", tenant)) return EXIT_CANNOT_RUN;
  char why[1024];
  /* It would start but never meet the shim: said, then run as asked (it may
   * be a helper that uses no card; its memory is not counted if it does). */
  if (vs_plat_launch_unreached(argv[i], why, sizeof why))
    fprintf(stderr, "vramshim: run: warning: %s; it runs without vramshim (its card memory is neither counted nor "
                    "limited)\n", why);
  int code = 0;
  if (vs_plat_launch(shim, argv + i, &code, why, sizeof why) == 0) return code;
  fprintf(stderr, "vramshim: run: %s\n", why);
  return EXIT_CANNOT_RUN;
}

/* A child program run with the shim in it and its output read back: the
 * replay's shim policies (tools/vramshim/replay_shim.c) run
 * vramshim-replay-child this way over the simulated driver. The same
 * launch as `vramshim run` (launch.h): POSIX LD_PRELOAD, Windows the
 * injecting launcher; but the tool stays, waits and reads the output.
 * Also the scratch folder such a run lives in. */
#ifndef VS_PLAT_CHILD_H
#define VS_PLAT_CHILD_H

#include <stddef.h>
#include <stdint.h>

/* The driver's file name in a driver folder: "libcuda.so.1" (POSIX),
 * "nvcuda.dll" (Windows). */
extern const char vs_plat_driver_file[];

/* A new folder only this user may use, "<temp>/<prefix>XXXXXX" (temp:
 * $TMPDIR or /tmp; Windows %TEMP%); its path in out. 0, or -1 with err. */
int vs_plat_scratch_dir(const char *prefix, char *out, size_t len, char *err, size_t errlen);
/* mkdir, owner-only. 0, or -1 with errno. */
int vs_plat_mkdir_private(const char *path);
/* Removes dir and everything under it; links are removed, never followed. */
void vs_plat_remove_tree(const char *dir);

typedef struct vs_plat_child_result {
  int exit_code;    /* the program's, when signal is 0 */
  int signal;       /* POSIX: the signal that ended it; else 0 */
  uint64_t max_rss; /* its peak resident memory in bytes (Windows: peak working set); 0 unknown */
} vs_plat_child_result;

/* Runs argv (argv[0] a path to the program) with the shim `shim` loaded
 * and the driver of driver_dir (a folder holding vs_plat_driver_file), and
 * waits for it to end. Its environment is this process's without the
 * entries keep() refuses ("NAME=value"; NULL keeps all) and without the
 * variables this function sets, plus add (NULL-terminated "NAME=value").
 * POSIX: LD_PRELOAD = this process's ASan runtime (when it has one: an
 * instrumented shim needs it first) and shim; LD_LIBRARY_PATH = driver_dir.
 * Windows: the program and driver_dir's nvcuda.dll are copied into
 * scratch (an existing folder) and the copy runs, so its import of
 * nvcuda.dll and the shim's real driver (VRAMSHIM_DRIVER, set to the copy)
 * are that one file, never System32's driver; created suspended, the shim
 * injected, then resumed. Its stdout is read until it ends: the last
 * len - 1 bytes in out (NUL-terminated); its stderr is this process's.
 * 0 once it ended, with *res; -1 with why when it could not be run. */
int vs_plat_run_child(const char *shim, const char *driver_dir, const char *scratch, char *const argv[],
                      int (*keep)(const char *entry), char *const add[], char *out, size_t len,
                      vs_plat_child_result *res, char *why, size_t whylen);

/* 1 when this process may not hold n open files (POSIX: RLIMIT_NOFILE's
 * hard limit; the sim needs a descriptor per allocation there), else 0. */
int vs_plat_open_files_short(uint64_t n);

/* The function `name` of the shim loaded into this process (POSIX: the
 * preloaded library, dlsym(RTLD_DEFAULT); Windows: vramshim.dll's export),
 * or NULL when there is no shim. */
void *vs_plat_shim_sym(const char *name);

#endif

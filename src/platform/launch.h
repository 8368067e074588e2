/* `vramshim run`'s OS part: starting a program with the shim in it.
 *
 * POSIX: the shim goes first in LD_PRELOAD and the program replaces the
 * tool (exec), so its pid, exit status and signals are its own.
 * Windows: the program is created suspended, the shim DLL injected
 * (inject.h), the program resumed; the tool waits for it and returns its
 * exit code; the shim injects the program's children the same way. */
#ifndef VS_PLAT_LAUNCH_H
#define VS_PLAT_LAUNCH_H

#include <stddef.h>

/* The shim's file name beside (Windows) or relative to (POSIX) the tool. */
extern const char vs_plat_shim_file[];
/* One line for the usage text: how the program gets the shim. */
extern const char vs_plat_launch_how[];

/* This executable's folder with its trailing separator; "" when unknown. */
void vs_plat_self_dir(char *out, size_t len);
int vs_plat_readable(const char *path);
/* `path` absolute and canonical: its folder resolved, its last name kept
 * (a link to the shim stays the link). 0, or -1 with errno set. */
int vs_plat_canonical(const char *path, char *out, size_t len);
/* An absolute path to an existing file; 0, or -1 with errno set. */
int vs_plat_realpath(const char *path, char *out, size_t len);
int vs_plat_setenv(const char *name, const char *value);

/* Why argv[0] (searched in PATH as the launch searches it) would run
 * without the shim although it starts: 1 with the reason in why (POSIX: a
 * statically linked program has no loader to read LD_PRELOAD; one the
 * loader runs in secure-execution mode, set-user-ID or set-group-ID for
 * another user, ignores it; a 32-bit program cannot load the 64-bit
 * shim), 0 when none is known (or the program is not found: the launch
 * says so). */
int vs_plat_launch_unreached(const char *prog, char *why, size_t len);

/* Runs argv (argv[0] searched in PATH) with `shim` loaded. 0 with the
 * program's exit code in *exit_code once it ended (Windows; POSIX returns
 * only on failure), or -1 with the reason in why when it cannot be started
 * with the shim. */
int vs_plat_launch(const char *shim, char *const argv[], int *exit_code, char *why, size_t len);

#endif

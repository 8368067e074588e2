/* Threshold actions (issue 26): a program `vramshim record` runs when a
 * tenant crosses warn_at or is refused, outside every workload. It runs
 * in a process group of its own (so a timeout kills what it started too),
 * stdin empty, stdout and stderr into a pipe the recorder reads without
 * blocking, the recorder's environment plus the event's variables. The
 * recorder never waits on it: it polls, and kills it at its timeout.
 *
 * Also where the recorder's database lives when none is given. */
#ifndef VS_PLAT_ACTION_H
#define VS_PLAT_ACTION_H
#include <stddef.h>

typedef struct vs_plat_action vs_plat_action;

/* Starts program (an absolute path, no arguments) with env added to this
 * process's environment (NULL-terminated "NAME=value" strings; a name
 * already set is replaced). NULL with err when it cannot be started. */
vs_plat_action *vs_plat_action_start(const char *program, const char *const *env, char *err, size_t errlen);
/* Output written so far, without blocking: bytes copied (0: nothing now),
 * -1 once the output is closed. */
long vs_plat_action_read(vs_plat_action *a, char *buf, size_t len);
/* 1 when it has ended (*status: its exit code 0-255, or -N when killed by
 * signal N), 0 while it runs. */
int vs_plat_action_done(vs_plat_action *a, int *status);
/* Kills it and everything in its process group, and reaps it. */
void vs_plat_action_kill(vs_plat_action *a);
void vs_plat_action_free(vs_plat_action *a);

/* Whether program may be run as an action: it exists, is a regular file
 * this user may execute, and not everyone may write it (POSIX: no S_IWOTH
 * on the file, nor on its folder unless sticky). 0, or -1 with err. */
int vs_plat_program_check(const char *program, char *err, size_t errlen);

/* The default path of a state file (the history database) named name:
 * the system's folder ("/var/lib/vramshim", Windows
 * "%ProgramData%\vramshim") when this user may write there (for_writing)
 * or the file is there to read; else a per-user one (*fallback = 1):
 * POSIX $XDG_STATE_HOME/vramshim or ~/.local/state/vramshim, Windows
 * %LOCALAPPDATA%\vramshim. A writer makes the system folder (0755) when
 * it may; the per-user folder is made by the caller. */
void vs_plat_default_state_file(const char *name, int for_writing, char *out, size_t len, int *fallback);
/* The system's state folder: "/var/lib/vramshim", "%ProgramData%\vramshim". */
const char *vs_plat_system_state_dir(void);
#endif

/* A dump asked for from outside the process without the ledger: the
 * config's dump_signal (docs/config.md). The observer thread is woken and
 * writes an automatic dump into dump_dir.
 *
 * POSIX: the signal dump_signal names (SIGUSR1 or SIGUSR2, sent with
 * `kill -USR1 PID`); `fn` runs in the signal handler, so it must be
 * async-signal-safe (an atomic store and a futex wake).
 * Windows, which has no such signals: the named auto-reset event
 * "Local\vramshim-dump-<pid>" of the process, waited for by a thread of the
 * platform's own; `fn` runs on that thread for each time it is set. */
#ifndef VS_PLAT_DUMP_SIGNAL_H
#define VS_PLAT_DUMP_SIGNAL_H

/* Starts listening; signo is the configured signal (on Windows any nonzero
 * value means "listen"). 0, or an errno value. */
int vs_plat_dump_signal_install(int signo, void (*fn)(void));

/* The sender's side: asks process pid for the dump. 0, or -1 with errno
 * (ESRCH: no such process, or on Windows one that does not listen). */
int vs_plat_dump_signal_send(int pid, int signo);

#endif

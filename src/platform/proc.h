/* This process: its id and when it started (together they name it even
 * after its pid is reused), and the user it runs as, for messages. */
#ifndef VS_PLAT_PROC_H
#define VS_PLAT_PROC_H
#include <stddef.h>
#include <stdint.h>

int vs_plat_pid(void);
/* The calling thread's system id (gettid; GetCurrentThreadId). */
long vs_plat_tid(void);
/* POSIX: /proc/self/stat's starttime (clock ticks since boot). Windows:
 * GetProcessTimes' creation time (100 ns units since 1601). 0 when unknown. */
uint64_t vs_plat_self_start_time(void);
/* "uid 1000" / "user alice", for messages. */
void vs_plat_user_desc(char *out, size_t len);
/* Stops the calling thread until someone resumes or kills the process
 * (tests: a process stopped inside the ledger's lock). POSIX: SIGSTOP;
 * Windows: SuspendThread of itself. */
void vs_plat_stop_self(void);
/* pthread_atfork (Windows has no fork: nothing to register). */
void vs_plat_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));
#endif

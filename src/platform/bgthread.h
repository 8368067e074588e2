/* The shim's own background threads (the observer, the IPC export server).
 *
 * They run inside the program, so they must never take a signal the
 * program means for itself: on POSIX every signal is blocked in them,
 * except the synchronous faults (a blocked SIGBUS or SIGSEGV kills the
 * process outright, and the ledger guard, guard.h, must be able to catch a
 * SIGBUS a truncated ledger raises in such a thread). Windows has no
 * asynchronous signals to keep away: a plain detached thread. */
#ifndef VS_PLAT_BGTHREAD_H
#define VS_PLAT_BGTHREAD_H

/* Starts fn(arg) detached, with that signal mask, named name (at most 15
 * characters). Returns 0 or the pthread_create error. */
int vs_plat_thread_spawn(void *(*fn)(void *), void *arg, const char *name);

#endif

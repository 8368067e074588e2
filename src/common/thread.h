/* The shim's own background threads (the observer, the IPC export server).
 *
 * They run inside the program, so they must never take a signal the
 * program means for itself: every signal is blocked in them, except the
 * synchronous faults (a blocked SIGBUS or SIGSEGV kills the process
 * outright, and the ledger guard, src/tenant/ledger_guard.h, must be able
 * to catch a SIGBUS a truncated ledger raises in such a thread). */
#ifndef VS_THREAD_H
#define VS_THREAD_H

/* Starts fn(arg) detached, with that signal mask, named name (at most 15
 * characters). Returns 0 or the pthread_create error. */
int vs_thread_spawn(void *(*fn)(void *), void *arg, const char *name);

#endif

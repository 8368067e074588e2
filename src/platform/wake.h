/* Waiting across processes for a 32-bit word in shared memory to change.
 *
 * POSIX: futex(2) on the word's address (the mapping is shared, so the
 * kernel finds every waiter). Windows: WaitOnAddress works inside one
 * process only, so a waiter sleeps on the named manual-reset event
 * "vramshim-<key>-<tag>-<value it saw>" and a waker sets the events of the
 * last few values (the word moved on, so a set event is never waited on
 * again and dies with its last handle). A wake-up can be lost only when
 * the word moved several times between the waker's change and its wake;
 * every caller sleeps in bounded slices, so that costs one slice. */
#ifndef VS_PLAT_WAKE_H
#define VS_PLAT_WAKE_H
#include <stdint.h>

/* Sleeps while *addr == expected, at most timeout_ns (spurious returns
 * allowed). key: vs_plat_xlock_key of the memory; tag: which word. */
void vs_plat_wait(uint32_t *addr, uint32_t expected, uint64_t timeout_ns, const char *key, const char *tag);
/* Wakes every waiter of the word, after it was changed. */
void vs_plat_wake(uint32_t *addr, const char *key, const char *tag);
#endif

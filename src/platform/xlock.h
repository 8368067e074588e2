/* A robust cross-process lock that lives in shared memory (the ledger's):
 * when its owner dies holding it, the next locker is told so and repairs
 * what the owner may have left half-written before it goes on.
 *
 * POSIX: a process-shared robust pthread mutex stored in the word itself
 * (EOWNERDEAD). Windows: the word holds a random id written when the lock
 * is made; the lock is the named mutex "vramshim-lock-<id>" (in the
 * Global\ namespace when this process may create objects there, else
 * Local\), opened once per process and kept; WAIT_ABANDONED is the owner's
 * death. The same id names the events of wake.h (vs_plat_xlock_key). */
#ifndef VS_PLAT_XLOCK_H
#define VS_PLAT_XLOCK_H
#include <stddef.h>

#include "plat_types.h" /* vs_plat_xlock */

#define VS_PLAT_OWNER_DIED 1

/* Makes the lock in freshly zeroed shared memory, before others can see it. */
void vs_plat_xlock_init(vs_plat_xlock *l);
/* Takes the lock, waiting as long as it takes (the POSIX side waits in
 * short slices, so a lost wake-up of the mutex never hangs it): 0,
 * VS_PLAT_OWNER_DIED (held now; repair, then vs_plat_xlock_consistent), or
 * a negative errno. */
int vs_plat_xlock_acquire(vs_plat_xlock *l);
/* After VS_PLAT_OWNER_DIED: the state is repaired, the lock usable again. */
void vs_plat_xlock_consistent(vs_plat_xlock *l);
void vs_plat_xlock_release(vs_plat_xlock *l);
/* A name for what belongs to this lock's memory (wake.h keys), such as
 * "5f3a09c2d1e4b877"; "" on POSIX, where addresses are the keys. */
void vs_plat_xlock_key(const vs_plat_xlock *l, char *out, size_t len);
#endif

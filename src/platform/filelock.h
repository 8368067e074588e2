/* Locks on byte ranges of a file, held by one descriptor and dropped by
 * the system when it is closed or its process dies, however it dies: the
 * ledger's death detection (a slot is live exactly while its byte is
 * locked) and the serialisation of a ledger's creation.
 *
 * POSIX: open file description locks (F_OFD_SETLK, F_OFD_GETLK): a
 * descriptor never conflicts with its own locks. Windows: LockFileEx on
 * the descriptor's handle (bytes past the end of the file may be locked);
 * a handle does conflict with its own locks, which no caller asks about
 * (a process never tests its own slot). Windows has no "who holds it"
 * query, so vs_plat_range_held takes the range and lets go: for that
 * instant another process's test sees it held (a dead slot is reclaimed
 * at the next sweep) and a trylock of it fails (the claimer takes another
 * free slot); neither is ever a false "dead". */
#ifndef VS_PLAT_FILELOCK_H
#define VS_PLAT_FILELOCK_H
#include <stdint.h>

/* Locks [off, off + len) exclusively without waiting: 0, or -1 when
 * another descriptor holds a part of it (or on error). */
int vs_plat_range_trylock(int fd, int64_t off, int64_t len);
/* 1 when another descriptor holds a lock in [off, off + len), 0 when none
 * does; 1 when it cannot tell (callers then never steal). */
int vs_plat_range_held(int fd, int64_t off, int64_t len);
/* The whole-file lock that serialises a creation, waiting; and its release. */
void vs_plat_file_lock(int fd);
void vs_plat_file_unlock(int fd);
#endif

#include "filelock.h"

#include <string.h>

#include "wutil.h"

static OVERLAPPED at(int64_t off) {
  OVERLAPPED ov;
  memset(&ov, 0, sizeof ov);
  ov.Offset = (DWORD)((uint64_t)off & 0xffffffffu);
  ov.OffsetHigh = (DWORD)((uint64_t)off >> 32);
  return ov;
}

static int lock(int fd, int64_t off, int64_t len, DWORD flags) {
  OVERLAPPED ov = at(off);
  return LockFileEx(vs_win_handle(fd), LOCKFILE_EXCLUSIVE_LOCK | flags, 0, (DWORD)((uint64_t)len & 0xffffffffu),
                    (DWORD)((uint64_t)len >> 32), &ov)
             ? 0
             : -1;
}

static void unlock(int fd, int64_t off, int64_t len) {
  OVERLAPPED ov = at(off);
  UnlockFileEx(vs_win_handle(fd), 0, (DWORD)((uint64_t)len & 0xffffffffu), (DWORD)((uint64_t)len >> 32), &ov);
}

int vs_plat_range_trylock(int fd, int64_t off, int64_t len) { return lock(fd, off, len, LOCKFILE_FAIL_IMMEDIATELY); }

/* Windows has no "who holds it" query: try it and let go at once. */
int vs_plat_range_held(int fd, int64_t off, int64_t len) {
  if (lock(fd, off, len, LOCKFILE_FAIL_IMMEDIATELY)) return 1;
  unlock(fd, off, len);
  return 0;
}

/* Far past the slot bytes (filelock.h callers lock below 2^31). */
#define WHOLE_FILE_BYTE (1ll << 62)
void vs_plat_file_lock(int fd) { lock(fd, WHOLE_FILE_BYTE, 1, 0); }
void vs_plat_file_unlock(int fd) { unlock(fd, WHOLE_FILE_BYTE, 1); }

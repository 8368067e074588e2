#include "filelock.h"

#include <fcntl.h>
#include <sys/file.h>

int vs_plat_range_trylock(int fd, int64_t off, int64_t len) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)off, .l_len = (off_t)len};
  return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -1;
}

int vs_plat_range_held(int fd, int64_t off, int64_t len) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)off, .l_len = (off_t)len};
  if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return 1;
  return fl.l_type != F_UNLCK;
}

/* flock(2) locks are apart from the OFD range locks above. */
void vs_plat_file_lock(int fd) { flock(fd, LOCK_EX); }
void vs_plat_file_unlock(int fd) { flock(fd, LOCK_UN); }

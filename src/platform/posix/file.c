#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int vs_plat_open_regular(const char *path, int flags, mode_t mode) {
  /* O_NONBLOCK: a FIFO or device opens at once; the type is checked next. */
  int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, mode);
  if (fd < 0) {
    /* A FIFO with no reader, opened for writing without blocking. */
    if (errno == ENXIO) errno = VS_EFTYPE;
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    int e = errno;
    close(fd);
    errno = S_ISREG(st.st_mode) ? e : VS_EFTYPE;
    return -1;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

const char *vs_plat_open_strerror(int e) {
  return e == VS_EFTYPE ? "not a regular file (a FIFO, a device or a directory)" : strerror(e);
}

FILE *vs_plat_fopen_regular(const char *path, const char *mode) {
  int w = mode[0] == 'w';
  int fd = vs_plat_open_regular(path, w ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, w ? "w" : "r");
  if (!f) close(fd);
  return f;
}

long vs_plat_pread(int fd, void *buf, size_t n, int64_t off) { return (long)pread(fd, buf, n, (off_t)off); }

int64_t vs_plat_file_size(int fd) {
  struct stat st;
  return fstat(fd, &st) ? -1 : (int64_t)st.st_size;
}

int vs_plat_truncate(int fd, int64_t size) { return ftruncate(fd, (off_t)size); }

int vs_plat_fsync(int fd) { return fsync(fd); }

int vs_plat_rename(const char *from, const char *to) { return rename(from, to); }

int vs_plat_path_absolute(const char *path) { return path[0] == '/'; }

int vs_plat_self_exe(char *out, size_t len) {
  if (len < 2) return -1;
  ssize_t n = readlink("/proc/self/exe", out, len - 1);
  if (n <= 0) return -1;
  out[n] = 0;
  /* A deleted binary reads as "/usr/bin/x (deleted)". */
  char *del = strstr(out, " (deleted)");
  if (del && del[10] == 0) *del = 0;
  return 0;
}

long vs_plat_getline(char **buf, size_t *cap, FILE *f) { return (long)getline(buf, cap, f); }

const char *vs_plat_base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

#include "file.h"

#include <errno.h>
#include <stdlib.h>
#include <io.h>
#include <string.h>
#include <unistd.h>

#include "wutil.h"

/* A folder, a named pipe (\\.\pipe\...), a console or a device is refused
 * before anything is read or written; CreateFileW never waits for a pipe's
 * peer, so nothing blocks. */
int vs_plat_open_regular(const char *path, int flags, mode_t mode) {
  (void)mode; /* the file inherits its folder's ACL */
  wchar_t w[VS_WPATH];
  if (vs_win_wide(path, w, VS_WPATH)) return -1;
  DWORD attrs = GetFileAttributesW(w);
  if (attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_DIRECTORY)) {
    errno = VS_EFTYPE;
    return -1;
  }
  int fd = vs_win_open(w, flags);
  if (fd < 0) return -1;
  if (GetFileType(vs_win_handle(fd)) != FILE_TYPE_DISK) {
    close(fd);
    errno = VS_EFTYPE;
    return -1;
  }
  return fd;
}

const char *vs_plat_open_strerror(int e) {
  return e == VS_EFTYPE ? "not a regular file (a pipe, a device or a folder)" : strerror(e);
}

FILE *vs_plat_fopen_regular(const char *path, const char *mode) {
  int w = mode[0] == 'w';
  int fd = vs_plat_open_regular(path, w ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, w ? "wb" : "rb");
  if (!f) close(fd);
  return f;
}

long vs_plat_pread(int fd, void *buf, size_t n, int64_t off) {
  HANDLE h = vs_win_handle(fd);
  OVERLAPPED ov;
  memset(&ov, 0, sizeof ov);
  ov.Offset = (DWORD)((uint64_t)off & 0xffffffffu);
  ov.OffsetHigh = (DWORD)((uint64_t)off >> 32);
  DWORD got = 0;
  if (n > 0x7fffffff) n = 0x7fffffff;
  if (!ReadFile(h, buf, (DWORD)n, &got, &ov)) {
    DWORD e = GetLastError();
    if (e == ERROR_HANDLE_EOF) return 0;
    errno = vs_win_errno(e);
    return -1;
  }
  return (long)got;
}

int64_t vs_plat_file_size(int fd) {
  LARGE_INTEGER sz;
  if (!GetFileSizeEx(vs_win_handle(fd), &sz)) {
    errno = vs_win_errno(GetLastError());
    return -1;
  }
  return (int64_t)sz.QuadPart;
}

/* Fails (ERROR_USER_MAPPED_FILE) while any process maps the file shorter
 * than the new end: see map_guard.h. */
int vs_plat_truncate(int fd, int64_t size) {
  HANDLE h = vs_win_handle(fd);
  FILE_END_OF_FILE_INFO eof;
  eof.EndOfFile.QuadPart = size;
  if (!SetFileInformationByHandle(h, FileEndOfFileInfo, &eof, sizeof eof)) {
    errno = vs_win_errno(GetLastError());
    return -1;
  }
  return 0;
}

int vs_plat_fsync(int fd) {
  if (!FlushFileBuffers(vs_win_handle(fd))) {
    errno = vs_win_errno(GetLastError());
    return -1;
  }
  return 0;
}

int vs_plat_rename(const char *from, const char *to) {
  wchar_t a[VS_WPATH], b[VS_WPATH];
  if (vs_win_wide(from, a, VS_WPATH) || vs_win_wide(to, b, VS_WPATH)) return -1;
  if (!MoveFileExW(a, b, MOVEFILE_REPLACE_EXISTING)) {
    errno = vs_win_errno(GetLastError());
    return -1;
  }
  return 0;
}

int vs_plat_path_absolute(const char *path) {
  if (path[0] == '/' || (path[0] == '\\' && path[1] == '\\')) return 1;
  return ((path[0] | 0x20) >= 'a' && (path[0] | 0x20) <= 'z') && path[1] == ':' && (path[2] == '\\' || path[2] == '/');
}

int vs_plat_self_exe(char *out, size_t len) {
  wchar_t w[VS_WPATH];
  DWORD n = GetModuleFileNameW(NULL, w, VS_WPATH);
  if (n == 0 || n >= VS_WPATH || vs_win_utf8(w, out, (int)len)) return -1;
  for (char *p = out; *p; p++)
    if (*p == '\\') *p = '/';
  return 0;
}

long vs_plat_getline(char **buf, size_t *cap, FILE *f) {
  size_t n = 0;
  int c;
  while ((c = getc(f)) != EOF) {
    if (n + 2 > *cap) {
      size_t want = *cap ? *cap * 2 : 128;
      char *b = realloc(*buf, want);
      if (!b) {
        errno = ENOMEM;
        return -1;
      }
      *buf = b;
      *cap = want;
    }
    (*buf)[n++] = (char)c;
    if (c == '\n') break;
  }
  if (n == 0) return -1;
  (*buf)[n] = 0;
  return (long)n;
}

const char *vs_plat_base_name(const char *path) {
  const char *b = path;
  for (const char *s = path; *s; s++)
    if (*s == '/' || *s == '\\' || *s == ':') b = s + 1;
  return b;
}

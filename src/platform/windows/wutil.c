#include "wutil.h"

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <wchar.h>

#include "plat_types.h"

int vs_win_wide(const char *s, wchar_t *out, int n) {
  if (!MultiByteToWideChar(CP_UTF8, 0, s, -1, out, n)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return 0;
}

int vs_win_utf8(const wchar_t *s, char *out, int n) {
  return WideCharToMultiByte(CP_UTF8, 0, s, -1, out, n, NULL, NULL) ? 0 : -1;
}

int vs_win_errno(DWORD e) {
  switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME: return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_PRIVILEGE_NOT_HELD: return EACCES;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS: return EEXIST;
    case ERROR_SHARING_VIOLATION:
    case ERROR_LOCK_VIOLATION: return EBUSY;
    case ERROR_DIRECTORY: return ENOTDIR;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY: return ENOMEM;
    case ERROR_DISK_FULL: return ENOSPC;
    case ERROR_FILENAME_EXCED_RANGE: return ENAMETOOLONG;
    default: return EIO;
  }
}

HANDLE vs_win_handle(int fd) { return (HANDLE)_get_osfhandle(fd); }

int vs_win_open(const wchar_t *path, int flags) {
  DWORD attrs = GetFileAttributesW(path);
  if ((flags & O_NOFOLLOW) && attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_REPARSE_POINT)) {
    errno = ELOOP;
    return -1;
  }
  int acc = flags & (O_RDONLY | O_WRONLY | O_RDWR);
  DWORD access = acc == O_WRONLY ? GENERIC_WRITE : acc == O_RDWR ? GENERIC_READ | GENERIC_WRITE : GENERIC_READ;
  DWORD disp = OPEN_EXISTING;
  if ((flags & O_CREAT) && (flags & O_EXCL)) disp = CREATE_NEW;
  else if ((flags & O_CREAT) && (flags & O_TRUNC)) disp = CREATE_ALWAYS;
  else if (flags & O_CREAT) disp = OPEN_ALWAYS;
  else if (flags & O_TRUNC) disp = TRUNCATE_EXISTING;
  DWORD fl = FILE_ATTRIBUTE_NORMAL;
  if (flags & O_NOFOLLOW) fl |= FILE_FLAG_OPEN_REPARSE_POINT;
  if (flags & O_DIRECTORY) fl |= FILE_FLAG_BACKUP_SEMANTICS, access = GENERIC_READ;
  HANDLE h = CreateFileW(path, access, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, disp, fl, NULL);
  if (h == INVALID_HANDLE_VALUE) {
    errno = vs_win_errno(GetLastError());
    return -1;
  }
  int crt = (acc == O_WRONLY ? _O_WRONLY : acc == O_RDWR ? _O_RDWR : _O_RDONLY) | _O_BINARY;
  if (flags & O_APPEND) crt |= _O_APPEND;
  int fd = _open_osfhandle((intptr_t)h, crt);
  if (fd < 0) {
    CloseHandle(h);
    errno = EMFILE;
    return -1;
  }
  return fd;
}

int vs_win_path_at(int dfd, const char *name, wchar_t *out, int n) {
  HANDLE h = vs_win_handle(dfd);
  DWORD len = h == INVALID_HANDLE_VALUE ? 0 : GetFinalPathNameByHandleW(h, out, (DWORD)n, FILE_NAME_NORMALIZED);
  if (len == 0 || (int)len >= n - 2) {
    errno = len ? ENAMETOOLONG : EBADF;
    return -1;
  }
  out[len++] = L'\\';
  return vs_win_wide(name, out + len, n - (int)len);
}

enum { K_MUTEX, K_EVENT, K_OPEN };
static HANDLE named(int kind, const wchar_t *name) {
  static const wchar_t *const ns[] = {L"Global\\", L"Local\\"};
  for (int i = 0; i < 2; i++) {
    wchar_t full[160];
    swprintf(full, 160, L"%ls%ls", ns[i], name);
    HANDLE h = kind == K_MUTEX  ? CreateMutexW(NULL, FALSE, full)
               : kind == K_EVENT ? CreateEventW(NULL, TRUE, FALSE, full)
                                 : OpenEventW(EVENT_MODIFY_STATE, FALSE, full);
    if (h) return h;
    /* Local\ next only when Global\ is refused (or, to open, has none). */
    DWORD e = GetLastError();
    if (e != ERROR_ACCESS_DENIED && e != ERROR_PRIVILEGE_NOT_HELD && !(kind == K_OPEN && e == ERROR_FILE_NOT_FOUND))
      return NULL;
  }
  return NULL;
}

HANDLE vs_win_mutex(const wchar_t *name) { return named(K_MUTEX, name); }
HANDLE vs_win_event(const wchar_t *name) { return named(K_EVENT, name); }
HANDLE vs_win_event_open(const wchar_t *name) { return named(K_OPEN, name); }

/* Appends one argument quoted by the rules the C runtime parses with:
 * backslashes are literal unless they precede a quote. */
int vs_win_cmdline_append(wchar_t *cmd, size_t cap, size_t *at, const wchar_t *arg) {
#define PUT(c)                          \
  do {                                  \
    if (*at + 1 >= cap) return -1;      \
    cmd[(*at)++] = (c);                 \
  } while (0)
  if (*at) PUT(L' ');
  int plain = *arg && !wcspbrk(arg, L" \t\n\v\"");
  if (plain) {
    for (const wchar_t *p = arg; *p; p++) PUT(*p);
  } else {
    PUT(L'"');
    for (const wchar_t *p = arg;; p++) {
      size_t slashes = 0;
      while (*p == L'\\') p++, slashes++;
      if (!*p) {
        for (size_t k = 0; k < slashes * 2; k++) PUT(L'\\');
        break;
      }
      if (*p == L'"') {
        for (size_t k = 0; k < slashes * 2 + 1; k++) PUT(L'\\');
      } else {
        for (size_t k = 0; k < slashes; k++) PUT(L'\\');
      }
      PUT(*p);
    }
    PUT(L'"');
  }
  cmd[*at] = 0;
  return 0;
#undef PUT
}

#include "dir.h"

#include "wutil.h" /* windows.h, before sddl.h */

#include <errno.h>
#include <io.h>
#include <sddl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

/* Owner-only, as POSIX 0700: full access for this user, SYSTEM and the
 * Administrators, inherited by what is made inside; no other entry
 * ("protected": nothing inherited from the parent). The user is named by
 * its SID (Wine's SDDL parser knows no "OW"). */
static int user_sid(wchar_t *out, int n) {
  HANDLE tok;
  if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &tok)) return -1;
  BYTE buf[512];
  DWORD len = 0;
  LPWSTR str = NULL;
  int ok = GetTokenInformation(tok, TokenUser, buf, sizeof buf, &len) &&
           ConvertSidToStringSidW(((TOKEN_USER *)buf)->User.Sid, &str);
  CloseHandle(tok);
  if (!ok) return -1;
  int fits = (int)wcslen(str) < n;
  if (fits) wcscpy(out, str);
  LocalFree(str);
  return fits ? 0 : -1;
}

static int make_private_dir(const wchar_t *w) {
  SECURITY_ATTRIBUTES sa;
  memset(&sa, 0, sizeof sa);
  sa.nLength = sizeof sa;
  PSECURITY_DESCRIPTOR sd = NULL;
  wchar_t sid[200], sddl[320];
  if (user_sid(sid, 200) == 0) {
    swprintf(sddl, 320, L"D:P(A;OICI;FA;;;%ls)(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)", sid);
    if (ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl, SDDL_REVISION_1, &sd, NULL))
      sa.lpSecurityDescriptor = sd;
  }
  BOOL ok = CreateDirectoryW(w, sd ? &sa : NULL);
  DWORD e = GetLastError();
  if (sd) LocalFree(sd);
  if (!ok && e != ERROR_ALREADY_EXISTS) {
    errno = vs_win_errno(e);
    return -1;
  }
  return 0;
}

int vs_plat_private_dir_open(const char *dir, const char *what, int create, char *err, size_t errlen) {
  wchar_t w[VS_WPATH];
  if (vs_win_wide(dir, w, VS_WPATH)) {
    snprintf(err, errlen, "%s %s: the path is too long", what, dir);
    return -1;
  }
  if (create && make_private_dir(w)) {
    snprintf(err, errlen, "%s %s: cannot create it: %s", what, dir, strerror(errno));
    return -1;
  }
  DWORD attrs = GetFileAttributesW(w);
  if (attrs == INVALID_FILE_ATTRIBUTES || (attrs & FILE_ATTRIBUTE_REPARSE_POINT) || !(attrs & FILE_ATTRIBUTE_DIRECTORY)) {
    snprintf(err, errlen, "%s %s: cannot open it: %s", what, dir,
             attrs == INVALID_FILE_ATTRIBUTES   ? strerror(vs_win_errno(GetLastError()))
             : attrs & FILE_ATTRIBUTE_REPARSE_POINT ? "it is a symbolic link or junction"
                                                    : "not a directory");
    return -1;
  }
  int dfd = vs_win_open(w, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (dfd < 0) snprintf(err, errlen, "%s %s: cannot open it: %s", what, dir, strerror(errno));
  return dfd;
}

/* Windows decides who may write by the ACL the file inherited from its
 * folder (made owner-only above); Wine enforces none, so only the type is
 * checked here. */
int vs_plat_shared_file_check(int fd, const char *path, char *err, size_t errlen) {
  if (!vs_plat_file_not_public(fd)) {
    snprintf(err, errlen, "ledger %s is not a regular file; refusing to use it", path);
    return -1;
  }
  return 0;
}

int vs_plat_file_not_public(int fd) {
  HANDLE h = vs_win_handle(fd);
  BY_HANDLE_FILE_INFORMATION fi;
  return GetFileType(h) == FILE_TYPE_DISK && GetFileInformationByHandle(h, &fi) &&
         !(fi.dwFileAttributes & (FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT));
}

const char *vs_plat_system_ledger_dir(void) {
  static char dir[VS_WPATH];
  if (!__atomic_load_n(&dir[0], __ATOMIC_ACQUIRE)) {
    char tmp[VS_WPATH];
    const char *pd = getenv("ProgramData");
    snprintf(tmp, sizeof tmp, "%s\\vramshim", pd && *pd && strlen(pd) < VS_WPATH - 16 ? pd : "C:\\ProgramData");
    memcpy(dir + 1, tmp + 1, strlen(tmp));
    __atomic_store_n(&dir[0], tmp[0], __ATOMIC_RELEASE);
  }
  return dir;
}

const char *vs_plat_system_dump_dir(void) {
  static char dir[VS_WPATH];
  if (!__atomic_load_n(&dir[0], __ATOMIC_ACQUIRE)) {
    char tmp[VS_WPATH];
    wchar_t w[VS_WPATH];
    DWORD n = GetTempPathW(VS_WPATH - 16, w);   /* ends in a backslash */
    char t[VS_WPATH];
    if (n == 0 || n >= VS_WPATH - 16 ||
        !WideCharToMultiByte(CP_UTF8, 0, w, -1, t, (int)sizeof t - 16, NULL, NULL))
      snprintf(t, sizeof t, "C:\\Windows\\Temp\\");
    snprintf(tmp, sizeof tmp, "%svramshim", t);
    memcpy(dir + 1, tmp + 1, strlen(tmp));
    __atomic_store_n(&dir[0], tmp[0], __ATOMIC_RELEASE);
  }
  return dir;
}

const char *vs_plat_system_config_path(void) {
  static char path[VS_WPATH + 16];
  if (!__atomic_load_n(&path[0], __ATOMIC_ACQUIRE)) {
    char tmp[VS_WPATH + 16];
    snprintf(tmp, sizeof tmp, "%s\\vramshim.conf", vs_plat_system_ledger_dir());
    memcpy(path + 1, tmp + 1, strlen(tmp));
    __atomic_store_n(&path[0], tmp[0], __ATOMIC_RELEASE);
  }
  return path;
}

int vs_plat_default_ledger_dir(char *out, size_t len, int *fallback) {
  const char *d = vs_plat_system_ledger_dir();
  wchar_t w[VS_WPATH];
  *fallback = 0;
  if (vs_win_wide(d, w, VS_WPATH)) return -1;
  DWORD attrs = GetFileAttributesW(w);
  if (attrs == INVALID_FILE_ATTRIBUTES && make_private_dir(w) == 0) attrs = GetFileAttributesW(w);
  if (attrs != INVALID_FILE_ATTRIBUTES) {
    /* There but not trustworthy: refuse, never fall back silently past a takeover. */
    if (!(attrs & FILE_ATTRIBUTE_DIRECTORY) || (attrs & FILE_ATTRIBUTE_REPARSE_POINT)) return -1;
    snprintf(out, len, "%s", d);
    return 0;
  }
  *fallback = 1;
  const char *la = getenv("LOCALAPPDATA");
  snprintf(out, len, "%s\\vramshim", la && *la ? la : ".");
  return 0;
}

int vs_plat_openat(int dfd, const char *name, int flags, mode_t mode) {
  (void)mode;
  wchar_t w[VS_WPATH];
  if (vs_win_path_at(dfd, name, w, VS_WPATH)) return -1;
  return vs_win_open(w, flags);
}

int vs_plat_renameat(int dfd, const char *from, const char *to) {
  wchar_t a[VS_WPATH], b[VS_WPATH];
  if (vs_win_path_at(dfd, from, a, VS_WPATH) || vs_win_path_at(dfd, to, b, VS_WPATH)) return -1;
  if (!MoveFileExW(a, b, MOVEFILE_REPLACE_EXISTING)) {
    errno = vs_win_errno(GetLastError());
    return -1;
  }
  return 0;
}

static int file_id(HANDLE h, BY_HANDLE_FILE_INFORMATION *fi) { return GetFileInformationByHandle(h, fi) ? 0 : -1; }

int vs_plat_path_is_file(const char *path, int fd) {
  wchar_t w[VS_WPATH];
  if (vs_win_wide(path, w, VS_WPATH)) return -2;
  HANDLE h = CreateFileW(w, FILE_READ_ATTRIBUTES, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                         OPEN_EXISTING, FILE_FLAG_OPEN_REPARSE_POINT | FILE_FLAG_BACKUP_SEMANTICS, NULL);
  if (h == INVALID_HANDLE_VALUE) {
    DWORD e = GetLastError();
    return e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND ? -1 : -2;
  }
  BY_HANDLE_FILE_INFORMATION a, b;
  int r = file_id(h, &a) || file_id(vs_win_handle(fd), &b) ? -2
          : a.dwVolumeSerialNumber == b.dwVolumeSerialNumber && a.nFileIndexHigh == b.nFileIndexHigh &&
                  a.nFileIndexLow == b.nFileIndexLow
              ? 1
              : 0;
  CloseHandle(h);
  return r;
}

int vs_plat_dir_each(int dfd, int (*fn)(const char *name, void *arg), void *arg) {
  wchar_t w[VS_WPATH];
  int r = vs_win_path_at(dfd, "*", w, VS_WPATH);
  close(dfd);
  if (r) return -1;
  WIN32_FIND_DATAW fd;
  HANDLE f = FindFirstFileW(w, &fd);
  if (f == INVALID_HANDLE_VALUE) {
    DWORD e = GetLastError();
    if (e == ERROR_FILE_NOT_FOUND) return 0;
    errno = vs_win_errno(e);
    return -1;
  }
  do {
    char name[1024];
    if (vs_win_utf8(fd.cFileName, name, sizeof name) == 0 && fn(name, arg)) break;
  } while (FindNextFileW(f, &fd));
  FindClose(f);
  return 0;
}

/* Missing parents are made owner-only too; existing parents are left alone. */
int vs_plat_own_dir_open(const char *dir, char *used, size_t usedlen, char *err, size_t errlen) {
  if (used && usedlen) snprintf(used, usedlen, "%s", dir ? dir : "");
  if (!dir || !*dir) {
    snprintf(err, errlen, "dump_dir is empty");
    return -1;
  }
  char tmp[VS_WPATH];
  wchar_t w[VS_WPATH];
  if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) {
    snprintf(err, errlen, "dump_dir path too long");
    return -1;
  }
  /* From the first separator after a drive ("C:\") or share root. */
  char *s = tmp + (tmp[1] == ':' ? 3 : 1);
  for (; *s; s++) {
    if (*s != '/' && *s != '\\') continue;
    char c = *s;
    *s = 0;
    if (vs_win_wide(tmp, w, VS_WPATH) || make_private_dir(w)) {
      snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
      return -1;
    }
    *s = c;
  }
  char what[] = "dump_dir";
  return vs_plat_private_dir_open(dir, what, 1, err, errlen);
}

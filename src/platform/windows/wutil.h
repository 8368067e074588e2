/* Helpers shared by the Windows side of the platform layer (not a
 * primitive: no POSIX twin, nothing outside src/platform/windows uses it). */
#ifndef VS_PLAT_WUTIL_H
#define VS_PLAT_WUTIL_H
#include <windows.h>

#define VS_WPATH 1024
/* UTF-8 to UTF-16 (forward slashes kept: Windows takes both); 0 or -1 (errno ENAMETOOLONG). */
int vs_win_wide(const char *s, wchar_t *out, int n);
/* UTF-16 to UTF-8; 0 or -1. */
int vs_win_utf8(const wchar_t *s, char *out, int n);
/* errno for a GetLastError code. */
int vs_win_errno(DWORD e);
/* The handle under a CRT descriptor (INVALID_HANDLE_VALUE if none). */
HANDLE vs_win_handle(int fd);
/* CreateFileW with POSIX open flags (O_ACCMODE, O_CREAT, O_EXCL, O_TRUNC,
 * O_APPEND, O_NOFOLLOW, O_DIRECTORY), sharing read, write and delete (a
 * file open here may be renamed or deleted, as on POSIX): a binary CRT
 * descriptor, or -1 with errno. */
int vs_win_open(const wchar_t *path, int flags);
/* The full path of an open folder descriptor + "\\" + name. 0 or -1. */
int vs_win_path_at(int dfd, const char *name, wchar_t *out, int n);
/* Named kernel objects of vramshim ("vramshim-..."), in the Global\\
 * namespace where this process may create or open them (a service and a
 * logged-in user then share them), else in Local\\ (this session). The
 * choice is made per object, so one made in Global\\ by a privileged
 * process is found there by the others that may open it. */
HANDLE vs_win_mutex(const wchar_t *name);          /* CreateMutexW */
HANDLE vs_win_event(const wchar_t *name);          /* CreateEventW, manual reset, not set */
HANDLE vs_win_event_open(const wchar_t *name);     /* OpenEventW(EVENT_MODIFY_STATE), NULL if none */
/* Appends arg to the command line cmd (capacity cap, *at its length), a
 * space first unless empty, quoted by the rules the C runtime parses with
 * (backslashes are literal unless they precede a quote). 0, or -1 when it
 * does not fit. */
int vs_win_cmdline_append(wchar_t *cmd, size_t cap, size_t *at, const wchar_t *arg);
#endif

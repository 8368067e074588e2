/* The private folders of vramshim (the ledger folder) and the files in
 * them: created owner-only, refused when another user could take them over
 * (issue 10), opened relative to an opened folder.
 *
 * A folder is opened as a descriptor (POSIX: O_DIRECTORY; Windows: a CRT
 * descriptor over a folder handle opened with FILE_FLAG_BACKUP_SEMANTICS),
 * closed with close(). */
#ifndef VS_PLAT_DIR_H
#define VS_PLAT_DIR_H
#include <stddef.h>

#include "plat_types.h"

/* Opens dir (creating it owner-only when create) refusing symbolic links
 * (Windows: reparse points) and folders another user could write: POSIX,
 * owned by root or us and not world-writable (group-writable is fine: the
 * packaged /run/vramshim is root:vramshim 2770); Windows, not a reparse
 * point (a folder made here gets an ACL of its owner, SYSTEM and
 * Administrators; Wine enforces no ACLs, so none is checked). what names
 * it in err ("ledger dir"). A descriptor, or -1 with err. */
int vs_plat_private_dir_open(const char *dir, const char *what, int create, char *err, size_t errlen);
/* A folder only this user may write (dumps), opened as a descriptor with
 * its path in used: dir and its missing parents are made owner-only; dir
 * itself must not be a symbolic link (reparse point). POSIX: dir itself
 * when it is ours and writable by nobody else; else, when dir is shared
 * (sticky, like /tmp and the packaged /var/tmp/vramshim, 1777), or we are
 * root and dir is another user's private folder, the per-user folder
 * <dir>/<uid>, made 0700 and checked ours and private. The system's
 * default dump folder, when missing, is made 1777 (sticky) so that it
 * never becomes its first user's private folder, and root gives it that
 * mode (root:root 1777, as the package's tmpfiles.d entry) when it finds
 * it otherwise.
 * Windows: dir (the per-user %TEMP%), the ACL not checked (see above).
 * -1 with err ("dump_dir ..."). */
int vs_plat_own_dir_open(const char *dir, char *used, size_t usedlen, char *err, size_t errlen);
/* 0 when the opened shared file may be used: a regular file, POSIX: not
 * world-writable, ours or root's (or a group member's inside a root-owned
 * setgid folder); our own is made group-writable (0660). -1 with err. */
int vs_plat_shared_file_check(int fd, const char *path, char *err, size_t errlen);
/* 1 when fd is a regular file that not everyone may write (POSIX: no
 * S_IWOTH; Windows: a disk file, ACLs unchecked as above), else 0. */
int vs_plat_file_not_public(int fd);
/* The system's ledger folder: "/run/vramshim" (POSIX),
 * "%ProgramData%\vramshim" (Windows). */
const char *vs_plat_system_ledger_dir(void);
/* The default dump folder: "/var/tmp/vramshim" (POSIX: survives a reboot,
 * as a post-mortem should), "%TEMP%\vramshim" (Windows: the per-user temp
 * folder, C:\Windows\Temp for a service; GetTempPathW's answer). */
const char *vs_plat_system_dump_dir(void);
/* The system's config file: "/etc/vramshim.conf" (POSIX),
 * "%ProgramData%\vramshim\vramshim.conf" (Windows). */
const char *vs_plat_system_config_path(void);
/* The folder to use when none is configured: the system's when usable
 * (made when missing), else a per-user one (*fallback = 1): POSIX
 * $XDG_RUNTIME_DIR/vramshim, else /tmp/vramshim-<uid> unless another user
 * made that name first (or made it writable by others), then
 * $HOME/.cache/vramshim (a name nobody else can make); Windows
 * %LOCALAPPDATA%\vramshim. -1 when the system folder exists but may not be
 * trusted (never fall back silently past a takeover). */
int vs_plat_default_ledger_dir(char *out, size_t len, int *fallback);

/* openat(dfd, name, flags, mode) through the rules of vs_plat_open_regular
 * (flags as there; O_NOFOLLOW honoured; never blocks, not inherited),
 * without the regular-file check. */
int vs_plat_openat(int dfd, const char *name, int flags, mode_t mode);
/* renameat within one folder; 0 or -1 with errno. */
int vs_plat_renameat(int dfd, const char *from, const char *to);
/* Whether path (not followed) is the file open as fd: 1 yes, 0 another
 * file, -1 nothing there, -2 cannot tell. */
int vs_plat_path_is_file(const char *path, int fd);
/* Calls fn(name, arg) for each entry of the folder open as dfd (closes
 * dfd) until fn returns nonzero. 0, or -1 with errno. */
int vs_plat_dir_each(int dfd, int (*fn)(const char *name, void *arg), void *arg);
#endif

/* Files: opening a path the user named without ever blocking (issue 10),
 * with its type checked before any read or write. A FIFO (or a device)
 * named as a config file, dump, trace or log would block open() or read()
 * forever on POSIX; on Windows a named pipe or a device is refused alike. */
#ifndef VS_PLAT_FILE_H
#define VS_PLAT_FILE_H
#include <stdio.h>

#include "plat_types.h"

/* errno of a path that is not a regular file. */
#define VS_EFTYPE 0x7f5e

/* Opens path with flags (O_RDONLY / O_WRONLY / O_RDWR, O_CREAT, O_EXCL,
 * O_TRUNC, O_APPEND, O_NOFOLLOW) and mode (POSIX permission bits; on
 * Windows the file inherits its folder's ACL), never blocking, never
 * inherited by children: a descriptor of a regular file, or -1 with errno
 * (VS_EFTYPE when the path is not a regular file). Windows descriptors are
 * binary (no CRLF translation) and the file may be renamed or deleted while
 * open, as on POSIX. */
int vs_plat_open_regular(const char *path, int flags, mode_t mode);
/* The reason of a failed vs_plat_open_regular, for messages. */
const char *vs_plat_open_strerror(int e);
/* fopen-like ("r" or "w": create/truncate 0644), through vs_plat_open_regular. */
FILE *vs_plat_fopen_regular(const char *path, const char *mode);
#endif

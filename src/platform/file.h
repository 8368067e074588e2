/* Files: opening a path the user named without ever blocking (issue 10),
 * with its type checked before any read or write. A FIFO (or a device)
 * named as a config file, dump, trace or log would block open() or read()
 * forever on POSIX; on Windows a named pipe or a device is refused alike. */
#ifndef VS_PLAT_FILE_H
#define VS_PLAT_FILE_H
#include <stddef.h>
#include <stdint.h>
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

/* pread(2): up to n bytes at off; the count, or -1 with errno. */
long vs_plat_pread(int fd, void *buf, size_t n, int64_t off);
/* The file's size, or -1 with errno. */
int64_t vs_plat_file_size(int fd);
/* ftruncate(2); 0 or -1 with errno. */
int vs_plat_truncate(int fd, int64_t size);
/* fsync(2) (Windows: FlushFileBuffers); 0 or -1. */
int vs_plat_fsync(int fd);
/* 1 when path is absolute: "/..." on POSIX; "C:\...", "C:/...",
 * "\\server\..." or "/..." on Windows. */
int vs_plat_path_absolute(const char *path);
/* What follows the last folder separator of path ('/'; on Windows also
 * '\\' and a drive's ':'), or path itself. */
const char *vs_plat_base_name(const char *path);
/* The path of this process's program ("/usr/bin/x", "C:/x/app.exe": on
 * Windows with '/' between folders, so a base name is what follows the
 * last '/'); 0, or -1 when unknown. POSIX: a deleted binary's
 * " (deleted)" suffix is dropped. */
int vs_plat_self_exe(char *out, size_t len);
/* getline(3) (Windows' C library lacks it): a line with its '\n' into
 * *buf (grown as needed); its length, or -1 at the end or on error. */
long vs_plat_getline(char **buf, size_t *cap, FILE *f);
/* rename(2) replacing to (Windows: MoveFileEx REPLACE_EXISTING); 0 or -1. */
int vs_plat_rename(const char *from, const char *to);
#endif

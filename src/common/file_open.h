/* Opening a file the user named without ever blocking (issue 10): a FIFO
 * (or a device) named as a config file, dump, trace or log would block
 * open() or read() forever. O_NONBLOCK makes open return at once; the type
 * is checked before any read or write. */
#ifndef VS_COMMON_FILE_OPEN_H
#define VS_COMMON_FILE_OPEN_H
#include <stdio.h>
#include <sys/types.h>

/* open(path, flags | O_NONBLOCK | O_CLOEXEC, mode), then fstat: the fd (the
 * O_NONBLOCK flag cleared again), or -1 with errno; errno is EFTYPE_VS
 * when the path is not a regular file. */
#define EFTYPE_VS 0x7f5e
int vs_open_regular(const char *path, int flags, mode_t mode);
/* The reason of a failed vs_open_regular, for messages. */
const char *vs_open_strerror(int e);
/* fopen-like ("r" or "w"), through vs_open_regular. */
FILE *vs_fopen_regular(const char *path, const char *mode);
#endif

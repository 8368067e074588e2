/* Windows side of the types the platform headers name (src/platform/<primitive>.h).
 * Found through the include path that src/platform/CMakeLists.txt sets.
 *
 * The CRT has descriptors and the O_* names of the access modes; the POSIX
 * flags it lacks get bits it never uses, which the platform's open
 * (windows/file.c) alone interprets: O_NOFOLLOW refuses a reparse point
 * (a symbolic link or junction), O_NONBLOCK and O_CLOEXEC are what every
 * Windows open already is (CreateFile of a named pipe never waits for a
 * peer; handles are not inherited unless asked), O_DIRECTORY opens a folder. */
#ifndef VS_PLAT_TYPES_H
#define VS_PLAT_TYPES_H
#include <fcntl.h>
#include <sys/types.h>

#define O_NOFOLLOW 0x01000000
#define O_NONBLOCK 0x02000000
#define O_CLOEXEC 0x04000000
#define O_DIRECTORY 0x08000000
#endif

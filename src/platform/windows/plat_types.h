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
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define O_NOFOLLOW 0x01000000
#define O_NONBLOCK 0x02000000
#define O_CLOEXEC 0x04000000
#define O_DIRECTORY 0x08000000

/* The config's dump_signal = USR1 | USR2 keeps its Linux value; Windows
 * has no such signals (a dump is asked for with vramshim dump --pid). */
#ifndef SIGUSR1
#define SIGUSR1 10
#define SIGUSR2 12
#endif

/* No coarse clock: the monotonic one (QueryPerformanceCounter) is cheap. */
#ifndef CLOCK_MONOTONIC_COARSE
#define CLOCK_MONOTONIC_COARSE CLOCK_MONOTONIC
#endif

/* xlock.h: the id that names the lock's mutex and events (0 = not made). */
typedef struct vs_plat_xlock {
  uint64_t id;
  uint64_t reserved[4];
} vs_plat_xlock;

/* printf-style checking of a function's format argument (MinGW: the C99
 * printf of __USE_MINGW_ANSI_STDIO, not msvcrt's). */
#define VS_PRINTF(fmt, args) __attribute__((format(gnu_printf, fmt, args)))
#endif

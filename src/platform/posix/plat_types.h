/* POSIX side of the types the platform headers name (src/platform/<primitive>.h).
 * Found through the include path that src/platform/CMakeLists.txt sets. */
#ifndef VS_PLAT_TYPES_H
#define VS_PLAT_TYPES_H
#include <fcntl.h>
#include <pthread.h>
#include <sys/types.h>

/* xlock.h: a robust, process-shared mutex in the shared memory itself. */
typedef struct vs_plat_xlock {
  pthread_mutex_t m;
} vs_plat_xlock;

/* printf-style checking of a function's format argument (MinGW: the C99
 * printf of __USE_MINGW_ANSI_STDIO, not msvcrt's). */
#define VS_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#endif

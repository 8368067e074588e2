/* POSIX side of the types the platform headers name (src/platform/<primitive>.h).
 * Found through the include path that src/platform/CMakeLists.txt sets. */
#ifndef VS_PLAT_TYPES_H
#define VS_PLAT_TYPES_H
#include <fcntl.h>
#include <sys/types.h>
#endif

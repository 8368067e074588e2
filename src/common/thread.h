/* The shim's background threads: see src/platform/bgthread.h (the platform
 * layer owns them). This name stays for the interposer's callers. */
#ifndef VS_THREAD_H
#define VS_THREAD_H
#include "bgthread.h"

static inline int vs_thread_spawn(void *(*fn)(void *), void *arg, const char *name) {
  return vs_plat_thread_spawn(fn, arg, name);
}
#endif

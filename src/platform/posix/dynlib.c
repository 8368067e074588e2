/* dynlib.h on POSIX. Lookups go through glibc's own dlsym, found with
 * dlvsym: the public name is the shim's override (posix/interpose.c), and
 * calling it from inside would answer with the shim's hooks. */
#include "dynlib.h"

#include "posix/dlsym_real.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

const char *vs_plat_driver_default(void) { return "libcuda.so.1"; }

const char *vs_plat_nvml_default(void) { return "libnvidia-ml.so.1"; }

const char *vs_plat_getenv_secure(const char *name) { return secure_getenv(name); }

void *vs_plat_dl_open(const char *path, char *err, size_t errlen) {
  void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    snprintf(err, errlen, "%s", why ? why : "unknown error");
  }
  return h;
}

void *vs_plat_dl_sym(void *handle, const char *name) { return vs_real_dlsym(handle, name); }

const void *vs_plat_dl_module_of(const void *fn, char *path, size_t len) {
  Dl_info info;
  if (!fn || !dladdr(fn, &info)) return NULL;
  if (path && len) snprintf(path, len, "%s", info.dli_fname ? info.dli_fname : "");
  return info.dli_fbase;
}

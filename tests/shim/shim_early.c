/* Preloaded after libvramshim.so, so its constructor runs before the
 * shim's: it calls a hook before the shim was initialised (test "early"). */
#include <cuda.h>
#include <dlfcn.h>
#include <stddef.h>

__attribute__((visibility("default"))) int vs_early_result = -1;

__attribute__((constructor)) static void early(void) {
  CUresult (*info)(size_t *, size_t *) = (CUresult(*)(size_t *, size_t *))dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2");
  size_t f, t;
  if (info) vs_early_result = (int)info(&f, &t);
}

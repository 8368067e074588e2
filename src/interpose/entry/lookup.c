/* The answers the platform's interposer (src/platform/interpose.h) asks
 * the shim for: the dlsym override on POSIX, the import-table patcher and
 * the GetProcAddress hook on Windows. */
#include "interpose.h"

#include "cuda_api.h"
#include "driver_table.h"
#include "hooks.h"
#include "init.h"
#include "log.h"
#include "nvml_hooks.h"
#include "observe.h"
#include "quota.h"

void *vs_shim_hook_for(const char *name) {
  if (name && name[0] == 'n') return vs_nvml_hook_for(name);   /* NVML's (nvml_hooks.c) */
  int id = vs_hook_by_name(name);
  return id < 0 ? NULL : vs_hook_addr((vs_hook_id)id);
}

void *vs_shim_lookup(const char *name) {
  /* NVML's memory info: the hook when NVML has the function (nvml_hooks.c) */
  if (name && name[0] == 'n') return vs_nvml_lookup(name);
  int id = vs_hook_by_name(name);
  if (id < 0) return NULL;
  /* Loading the driver here is what a handle lookup implies anyway: the
   * caller already has (or is about to have) the driver loaded. */
  /* Without a driver (said once) the hook still answers, and fails with
   * CUDA_ERROR_NOT_INITIALIZED: a lookup must never slip past the shim to
   * a driver the program loaded by other means. With one, a variant the
   * driver lacks is answered as the driver would: nothing. */
  vs_start();   /* the driver is loaded by a started shim (init.h) */
  if (vs_driver() && !vs_driver_real(id)) return NULL;
  vs_hook_count((vs_hook_id)id, VRAMSHIM_PATH_DLSYM);
  VS_DEBUG("lookup of %s on the driver answered with the hook", name);
  return vs_hook_addr((vs_hook_id)id);
}

void vs_shim_start(void) { vs_init(); }

void vs_shim_exit(void) {
  vs_observe_exit();   /* the traces: the writer thread still runs */
  vs_quota_exit();
}

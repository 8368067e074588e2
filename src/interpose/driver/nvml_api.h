/* NVML as the shim sees it (docs/nvml.md): nvml.h (PyPI's nvidia-nvml-dev)
 * with every ABI name declared under its own name, and the one list of
 * what the shim hooks and what it calls for itself.
 *
 * VS_NVML_HOOKS: exported by the shim (cmake/libvramshim.map), answered to
 * dlsym / GetProcAddress on NVML and patched into import tables of
 * nvml.dll on Windows, exactly like the CUDA hooks of hook_list.h: the
 * memory info, v1 and v2, whose figures become the tenant's view.
 * Everything else NVML offers passes through untouched (the shim neither
 * exports nor answers it).
 *
 * VS_NVML_EXTRAS: NVML functions the shim calls for itself: the UUID of a
 * device (what maps it to the shim's card), the processes on a card (the
 * true footprint of this process), init for a process that never inits NVML.
 *
 * X(ret, name, params, args). */
#ifndef VS_NVML_API_H
#define VS_NVML_API_H

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#define NVML_STATIC_IMPORT 1   /* Windows: the hooks are defined here and exported by vramshim.def */
#include <nvml.h>

#define VS_NVML_HOOKS(X)                                                                          \
  X(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvmlMemory_t * memory), (device, memory)) \
  X(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t device, nvmlMemory_v2_t * memory), (device, memory))

#define VS_NVML_EXTRAS(X)                                                                         \
  X(nvmlReturn_t, nvmlInit_v2, (void), ())                                                        \
  X(nvmlReturn_t, nvmlDeviceGetUUID, (nvmlDevice_t device, char *uuid, unsigned int length), (device, uuid, length)) \
  X(nvmlReturn_t, nvmlDeviceGetHandleByUUID, (const char *uuid, nvmlDevice_t *device), (uuid, device)) \
  X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v3,                                        \
    (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos), (device, infoCount, infos)) \
  X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v2,                                        \
    (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v2_t *infos), (device, infoCount, infos)) \
  X(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses,                                           \
    (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v1_t *infos), (device, infoCount, infos))

typedef enum {
#define X(ret, name, params, args) VS_NVML_HOOK_##name,
  VS_NVML_HOOKS(X)
#undef X
  VS_NVML_HOOK_COUNT
} vs_nvml_hook_id;

/* The hooks, each declared by nvml.h itself (the compiler checks them). */
#endif

/* The shim's NVML hooks (nvml_api.h's VS_NVML_HOOKS) as the platform's
 * interposer reaches them: by name, for dlsym / GetProcAddress on NVML and
 * Windows' import tables of nvml.dll (lookup.c). */
#ifndef VS_NVML_HOOKS_H
#define VS_NVML_HOOKS_H

/* The hook named `name` ("nvmlDeviceGetMemoryInfo_v2"), or NULL. Pure. */
void *vs_nvml_hook_for(const char *name);
/* The answer to a lookup of `name` on NVML: the hook when the shim hooks it
 * and the real NVML has it (loading NVML if need be), else NULL. */
void *vs_nvml_lookup(const char *name);
#endif

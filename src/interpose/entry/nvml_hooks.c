/* The NVML hooks: memory info, v1 and v2, answered with the tenant's view
 * of the card, the same view cuMemGetInfo answers (quota.c), for the card
 * with that UUID (nvml_cards.c):
 *
 *   total = what the tenant could ever hold on the card
 *   free  = what it could allocate now (this process's arena cache included),
 *           never more than NVML's own free plus that cache
 *   used  = total - free            (free <= total: never a wrap-around)
 *   reserved (v2) = 0
 *
 * NVML's own answer stands for a card no CUDA ordinal of this process sees,
 * a card the shim does not enforce, a tenant that could hold the whole
 * card, and every error. Everything else in NVML is not hooked at all. */
#include "cuda_api.h"

#include "nvml_hooks.h"

#include "export.h"
#include "guard.h"
#include "init.h"
#include "log.h"
#include "memory_service.h"
#include "nvml_cards.h"
#include "nvml_table.h"
#include "quota.h"

#include <string.h>

/* The tenant's view in place of NVML's figures; 1 when it applies. */
static int tenant_view(nvmlDevice_t device, unsigned long long *total, unsigned long long *free_b,
                       unsigned long long *used) {
  const vs_nvml_table *t = vs_nvml();
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  if (vs_guard_active() || !t || !t->nvmlDeviceGetUUID ||
      t->nvmlDeviceGetUUID(device, uuid, sizeof uuid) != NVML_SUCCESS)
    return 0;
  vs_init();   /* a process that never called CUDA: settings, tenant */
  int card = vs_nvml_card_of_uuid(uuid);
  if (card < 0) return 0;
  uint64_t f = 0, tot = 0;
  if (vs_quota_view_driver(card, *free_b, *total, &f, &tot) != VS_MEM_DONE) return 0;
  if (f > tot) f = tot;
  *total = tot;
  *free_b = f;
  *used = tot - f;
  return 1;
}

VS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
  const vs_nvml_table *t = vs_nvml();
  if (!t || !t->nvmlDeviceGetMemoryInfo) return NVML_ERROR_LIBRARY_NOT_FOUND;
  nvmlReturn_t r = t->nvmlDeviceGetMemoryInfo(device, memory);
  if (r == NVML_SUCCESS && memory) tenant_view(device, &memory->total, &memory->free, &memory->used);
  return r;
}

VS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
  const vs_nvml_table *t = vs_nvml();
  if (!t || !t->nvmlDeviceGetMemoryInfo_v2) return NVML_ERROR_LIBRARY_NOT_FOUND;
  nvmlReturn_t r = t->nvmlDeviceGetMemoryInfo_v2(device, memory);
  if (r == NVML_SUCCESS && memory && tenant_view(device, &memory->total, &memory->free, &memory->used))
    memory->reserved = 0;   /* the driver's reserve is outside the tenant's total */
  return r;
}

static const struct {
  const char *name;
  void *hook;
  int id;
} g_hooks[] = {
#define X(ret, name, params, args) {#name, (void *)&name, VS_NVML_HOOK_##name},
    VS_NVML_HOOKS(X)
#undef X
};

static int by_name(const char *name) {
  if (!name || strncmp(name, "nvml", 4) != 0) return -1;
  for (size_t i = 0; i < sizeof g_hooks / sizeof g_hooks[0]; i++)
    if (strcmp(name, g_hooks[i].name) == 0) return (int)i;
  return -1;
}

void *vs_nvml_hook_for(const char *name) {
  int i = by_name(name);
  return i < 0 ? NULL : g_hooks[i].hook;
}

void *vs_nvml_lookup(const char *name) {
  int i = by_name(name);
  if (i < 0 || !vs_nvml_real(g_hooks[i].id)) return NULL;
  VS_DEBUG("lookup of %s on NVML answered with the hook", name);
  return g_hooks[i].hook;
}

/* Loading the real NVML (see nvml_table.h). */
#include "cuda_api.h"   /* first: it poisons dlsym for the rest of the shim */

#include "nvml_table.h"

#include "dynlib.h"
#include "guard.h"
#include "log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

enum { NV_NONE = 0, NV_READY, NV_MISSING };

static vs_nvml_table g_table;
static void *g_real[VS_NVML_HOOK_COUNT];
static _Atomic int g_state;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_shim_init;   /* 0 not tried, 1 initialised, -1 refused */

static int is_own_code(void *fn) {
  const void *mine = vs_plat_dl_module_of((const void *)&vs_nvml, NULL, 0);
  return fn && mine && vs_plat_dl_module_of(fn, NULL, 0) == mine;
}

static void load(void) {
  const char *env = vs_plat_getenv_secure("VRAMSHIM_NVML");
  const char *path = (env && *env) ? env : vs_plat_nvml_default();
  char why[512];
  void *h = vs_plat_dl_open(path, why, sizeof why);
  if (!h) {
    /* Usual on a machine without NVML; only a program that reached an NVML
     * hook cares, and it gets NVML_ERROR_LIBRARY_NOT_FOUND. */
    VS_DEBUG("NVML %s not loaded (%s): NVML's memory view and the true footprint are off", path, why);
    atomic_store_explicit(&g_state, NV_MISSING, memory_order_release);
    return;
  }
  vs_nvml_table t;
  memset(&t, 0, sizeof t);
#define X(ret, name, params, args) t.name = (ret(*) params)vs_plat_dl_sym(h, #name);
  VS_NVML_HOOKS(X)
  VS_NVML_EXTRAS(X)
#undef X
  if (is_own_code((void *)t.nvmlDeviceGetMemoryInfo) || is_own_code((void *)t.nvmlDeviceGetMemoryInfo_v2)) {
    VS_ERROR("NVML %s resolves to the shim itself (VRAMSHIM_NVML must name the real libnvidia-ml); "
             "NVML's memory view is off", path);
    atomic_store_explicit(&g_state, NV_MISSING, memory_order_release);
    return;
  }
  g_table = t;
#define X(ret, name, params, args) g_real[VS_NVML_HOOK_##name] = (void *)t.name;
  VS_NVML_HOOKS(X)
#undef X
  VS_DEBUG("NVML %s loaded", path);
  atomic_store_explicit(&g_state, NV_READY, memory_order_release);
}

const vs_nvml_table *vs_nvml(void) {
  int s = atomic_load_explicit(&g_state, memory_order_acquire);
  if (s == NV_READY) return &g_table;
  if (s == NV_MISSING) return NULL;
  pthread_mutex_lock(&g_lock);
  if (atomic_load_explicit(&g_state, memory_order_acquire) == NV_NONE) {
    vs_guard_enter();   /* NVML's constructors may reach the shim's hooks */
    load();
    vs_guard_leave();
  }
  pthread_mutex_unlock(&g_lock);
  return atomic_load_explicit(&g_state, memory_order_acquire) == NV_READY ? &g_table : NULL;
}

void *vs_nvml_real(int id) {
  if (id < 0 || id >= VS_NVML_HOOK_COUNT || !vs_nvml()) return NULL;
  return g_real[id];
}

const vs_nvml_table *vs_nvml_for_shim(int may_load) {
  if (!may_load && atomic_load_explicit(&g_state, memory_order_acquire) != NV_READY) return NULL;
  const vs_nvml_table *t = vs_nvml();
  if (!t) return NULL;
  int s = atomic_load_explicit(&g_shim_init, memory_order_acquire);
  if (s == 0) {
    nvmlReturn_t r = t->nvmlInit_v2 ? t->nvmlInit_v2() : NVML_ERROR_FUNCTION_NOT_FOUND;
    s = r == NVML_SUCCESS ? 1 : -1;
    if (s < 0) VS_DEBUG("NVML refused nvmlInit_v2 (error %d): the true footprint falls back to the driver", (int)r);
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_shim_init, &expected, s)) s = expected;
  }
  return s > 0 ? t : NULL;
}

void vs_nvml_atfork_prepare(void) { pthread_mutex_lock(&g_lock); }
void vs_nvml_atfork_release(void) { pthread_mutex_unlock(&g_lock); }

/* Loading the real driver and its pointers (see driver_table.h). */
#include "driver_table.h"

#include "dynlib.h"
#include "guard.h"
#include "hook_ids.h"
#include "log.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DRV_NONE = 0, DRV_LOADING, DRV_READY, DRV_MISSING };

static vs_real_table g_table;
static void *g_real[VS_HOOK_COUNT];   /* the same pointers, by hook id */
static _Atomic int g_state;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* Set while this thread loads the driver: a hook reached from inside
 * dlopen (a driver constructor) must not wait for itself. */
static __thread int t_loading __attribute__((tls_model("initial-exec")));
static char g_path[PATH_MAX];

/* Does `fn` live in this very library? Then the "driver" is the shim. */
static int is_own_code(void *fn) {
  const void *mine = vs_plat_dl_module_of((const void *)&vs_driver, NULL, 0);
  return fn && mine && vs_plat_dl_module_of(fn, NULL, 0) == mine;
}

static void load(void) {
  const char *env = vs_plat_getenv_secure("VRAMSHIM_DRIVER");
  const char *path = (env && *env) ? env : vs_plat_driver_default();
  char why[512];
  void *h = vs_plat_dl_open(path, why, sizeof why);
  if (!h) {
    VS_ERROR("cannot load the CUDA driver %s (%s); every CUDA memory call fails with "
             "CUDA_ERROR_NOT_INITIALIZED", path, why);
    atomic_store_explicit(&g_state, DRV_MISSING, memory_order_release);
    return;
  }
  vs_real_table t;
  memset(&t, 0, sizeof t);
#define X(name, params, args) t.name = (CUresult(*) params)vs_plat_dl_sym(h, #name);
  VS_HOOKS(X)
  VS_DRIVER_EXTRAS(X)
#undef X
  if (!t.cuMemAlloc_v2 && !t.cuGetProcAddress_v2 && !t.cuGetProcAddress) {
    VS_ERROR("%s is not a CUDA driver (no cuMemAlloc_v2, no cuGetProcAddress); every CUDA "
             "memory call fails with CUDA_ERROR_NOT_INITIALIZED", path);
    atomic_store_explicit(&g_state, DRV_MISSING, memory_order_release);
    return;
  }
  if (is_own_code((void *)t.cuMemAlloc_v2) || is_own_code((void *)t.cuGetProcAddress_v2)) {
    VS_ERROR("the CUDA driver %s resolves to the shim itself (VRAMSHIM_DRIVER must name the real "
             "libcuda); every CUDA memory call fails with CUDA_ERROR_NOT_INITIALIZED", path);
    atomic_store_explicit(&g_state, DRV_MISSING, memory_order_release);
    return;
  }
  g_table = t;
#define X(name, params, args) g_real[VS_HOOK_##name] = (void *)t.name;
  VS_HOOKS(X)
#undef X
  if (!t.cuMemAlloc_v2 || !vs_plat_dl_module_of((const void *)t.cuMemAlloc_v2, g_path, sizeof g_path) || !g_path[0])
    snprintf(g_path, sizeof g_path, "%s", path);
  VS_DEBUG("driver %s loaded", g_path);
  atomic_store_explicit(&g_state, DRV_READY, memory_order_release);
}

static const vs_real_table *load_slow(void) {
  /* The shim has started already: entry/hooks.c starts it before any hook
   * body runs (a hook may run before the shim's constructor did). */
  if (t_loading) return NULL;
  pthread_mutex_lock(&g_lock);
  if (atomic_load_explicit(&g_state, memory_order_acquire) == DRV_NONE) {
    t_loading = 1;
    atomic_store_explicit(&g_state, DRV_LOADING, memory_order_relaxed);
    /* The driver's constructors may call exported cu* symbols: they pass
     * through (guard) or, while loading, get NOT_INITIALIZED. */
    vs_guard_enter();
    load();
    vs_guard_leave();
    t_loading = 0;
  }
  pthread_mutex_unlock(&g_lock);
  return atomic_load_explicit(&g_state, memory_order_acquire) == DRV_READY ? &g_table : NULL;
}

const vs_real_table *vs_driver(void) {
  int s = atomic_load_explicit(&g_state, memory_order_acquire);
  if (s == DRV_READY) return &g_table;
  if (s == DRV_MISSING) return NULL;
  return load_slow();
}

const vs_real_table *vs_driver_if_loaded(void) {
  return atomic_load_explicit(&g_state, memory_order_acquire) == DRV_READY ? &g_table : NULL;
}

CUresult vs_driver_missing_error(void) { return CUDA_ERROR_NOT_INITIALIZED; }

void *vs_driver_real(int id) {
  if (id < 0 || id >= VS_HOOK_COUNT || !vs_driver_if_loaded()) return NULL;
  return g_real[id];
}

void *const *vs_driver_reals(void) { return vs_driver_if_loaded() ? g_real : NULL; }

const char *vs_driver_loaded_path(void) { return vs_driver_if_loaded() ? g_path : NULL; }

int vs_driver_current_card(const vs_real_table *real) {
  CUdevice dev;
  if (!real->cuCtxGetDevice || real->cuCtxGetDevice(&dev) != CUDA_SUCCESS) return -1;
  return (int)dev;
}

/* A driver constructor that forks while this thread loads it already holds
 * the lock: taking it again would deadlock, and the load is not ours to
 * finish in the child anyway. */
static int g_fork_locked;

void vs_driver_atfork_prepare(void) {
  g_fork_locked = !t_loading;
  if (g_fork_locked) pthread_mutex_lock(&g_lock);
}

void vs_driver_atfork_release(void) {
  if (g_fork_locked) pthread_mutex_unlock(&g_lock);
  g_fork_locked = 0;
}

/* The dlsym override: the path of programs that dlopen("libcuda.so.1")
 * and look functions up on the handle (the CUDA runtime, ctypes, Numba).
 * A lookup on a handle never sees a preloaded library, so the shim has to
 * answer dlsym itself to be on this path at all.
 *
 * A cu* name the shim hooks is answered with the hook, whatever the handle,
 * as long as the driver has that symbol (otherwise the caller gets what the
 * driver would give: nothing); with no driver at all, with the hook. Every other lookup goes to glibc's dlsym as
 * a tail call, so glibc still sees the caller's own return address and
 * RTLD_NEXT keeps meaning "next after the caller", not "after the shim". */
#define VS_DEFINES_DLSYM 1
#include "cuda_api.h"
#include "dlsym_real.h"
#include "driver_table.h"
#include "export.h"
#include "hooks.h"
#include "log.h"

#include <stdatomic.h>
#include <stddef.h>

static _Atomic(vs_dlsym_fn) g_real_dlsym;

/* The sanitizer runtimes look up their interceptors with dlsym while they
 * start, before their shadow memory exists: the path of a non-cu lookup
 * must not be instrumented. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define VS_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))
#endif
#endif
#ifndef VS_NO_SANITIZE
#define VS_NO_SANITIZE
#endif

VS_NO_SANITIZE vs_dlsym_fn vs_real_dlsym_fn(void) {
  vs_dlsym_fn fn = atomic_load_explicit(&g_real_dlsym, memory_order_acquire);
  if (fn) return fn;
  /* Newest symbol version first: glibc >= 2.34 moved dlsym into libc. */
  static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
  for (size_t i = 0; i < sizeof versions / sizeof versions[0] && !fn; i++)
    fn = (vs_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
  if (!fn) {
    VS_ERROR("cannot find glibc's dlsym (dlvsym found no known version); lookups fail");
    return NULL;
  }
  atomic_store_explicit(&g_real_dlsym, fn, memory_order_release);
  return fn;
}

void *vs_real_dlsym(void *handle, const char *name) {
  vs_dlsym_fn fn = vs_real_dlsym_fn();
  return fn ? fn(handle, name) : NULL;
}

/* The hook for `name`, or NULL when the shim does not answer this lookup. */
static void *hook_answer(const char *name) {
  int id = vs_hook_by_name(name);
  if (id < 0) return NULL;
  /* Loading the driver here is what a handle lookup implies anyway: the
   * caller already has (or is about to have) the driver loaded. */
  /* Without a driver (said once) the hook still answers, and fails with
   * CUDA_ERROR_NOT_INITIALIZED: a lookup must never slip past the shim to
   * a driver the program loaded by other means. With one, a variant the
   * driver lacks is answered as the driver would: nothing. */
  if (vs_driver() && !vs_driver_real(id)) return NULL;
  vs_hook_count((vs_hook_id)id, VRAMSHIM_PATH_DLSYM);
  VS_DEBUG("dlsym(%s) answered with the hook", name);
  return vs_hook_addr((vs_hook_id)id);
}

#if defined(__has_attribute)
#if __has_attribute(musttail)
#define VS_MUSTTAIL __attribute__((musttail))
#endif
#endif
#ifndef VS_MUSTTAIL
#define VS_MUSTTAIL /* gcc emits the sibling call at -O1 and above; tests check RTLD_NEXT */
#endif

VS_EXPORT VS_NO_SANITIZE void *dlsym(void *restrict handle, const char *restrict name) {
  /* glibc declares name nonnull, so the compiler would drop a plain NULL
   * check; a NULL name still must not crash here (glibc reports it). */
  const char *n = name;
  __asm__("" : "+r"(n));
  if (n && n[0] == 'c' && n[1] == 'u') {
    void *hook = hook_answer(n);
    if (hook) return hook;
  }
  vs_dlsym_fn fn = atomic_load_explicit(&g_real_dlsym, memory_order_acquire);
  if (__builtin_expect(!fn, 0)) fn = vs_real_dlsym_fn();
  if (!fn) return NULL;
  VS_MUSTTAIL return fn(handle, name);
}

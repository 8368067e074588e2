/* interpose.h on POSIX: LD_PRELOAD does the direct binding, this file the
 * rest: the load-time constructor, and the dlsym override, the path of
 * programs that dlopen("libcuda.so.1") and look functions up on the handle
 * (the CUDA runtime, ctypes, Numba). A lookup on a handle never sees a
 * preloaded library, so the shim has to answer dlsym itself to be on this
 * path at all.
 *
 * A cu* name the shim hooks is answered by vs_shim_lookup (the hook, or
 * nothing when the driver lacks the variant), whatever the handle. Every
 * other lookup goes to glibc's dlsym as a tail call, so glibc still sees
 * the caller's own return address and RTLD_NEXT keeps meaning "next after
 * the caller", not "after the shim". */
#include "interpose.h"

#include "posix/dlsym_real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <unistd.h>

/* The layer calls nothing of the project but the vs_shim_* callbacks: the
 * export mark and the one message are written here. */
#define VS_PLAT_EXPORT __attribute__((visibility("default")))

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
    static const char msg[] = "vramshim: cannot find glibc's dlsym (dlvsym found no known version); lookups fail\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    return NULL;
  }
  atomic_store_explicit(&g_real_dlsym, fn, memory_order_release);
  return fn;
}

void *vs_real_dlsym(void *handle, const char *name) {
  vs_dlsym_fn fn = vs_real_dlsym_fn();
  return fn ? fn(handle, name) : NULL;
}

int vs_plat_interpose_active(void) { return 1; }

/* The process whose exit the shim's destructors act for: the one that
 * loaded the shim, then each fork child as its fork handlers run. A child
 * made without them (a bare clone(2), as sandboxes and some language
 * runtimes make) that returns through exit() runs the destructors over a
 * copy of its parent's state: the ledger slot they would give back and the
 * trace buffers they would flush are the parent's (test faults_rawclone). */
static _Atomic int g_exit_owner;
static void exit_owner_is_child(void) { atomic_store(&g_exit_owner, (int)getpid()); }

int vs_plat_exit_work_ok(void) {
  int owner = atomic_load(&g_exit_owner);
  return owner == 0 || owner == (int)getpid();
}

#if defined(__has_attribute)
#if __has_attribute(musttail)
#define VS_MUSTTAIL __attribute__((musttail))
#endif
#endif
#ifndef VS_MUSTTAIL
#define VS_MUSTTAIL /* gcc emits the sibling call at -O1 and above; tests check RTLD_NEXT */
#endif

VS_PLAT_EXPORT VS_NO_SANITIZE void *dlsym(void *restrict handle, const char *restrict name) {
  /* glibc declares name nonnull, so the compiler would drop a plain NULL
   * check; a NULL name still must not crash here (glibc reports it). */
  const char *n = name;
  __asm__("" : "+r"(n));
  if (n && ((n[0] == 'c' && n[1] == 'u') || (n[0] == 'n' && n[1] == 'v' && n[2] == 'm' && n[3] == 'l'))) {
    void *hook = vs_shim_lookup(n);
    if (hook) return hook;
  }
  vs_dlsym_fn fn = atomic_load_explicit(&g_real_dlsym, memory_order_acquire);
  if (__builtin_expect(!fn, 0)) fn = vs_real_dlsym_fn();
  if (!fn) return NULL;
  VS_MUSTTAIL return fn(handle, name);
}

/* The shim starts as it is loaded; nothing needs this to have run first
 * (every hook starts it too). */
__attribute__((constructor)) static void vs_plat_on_load(void) {
  atomic_store(&g_exit_owner, (int)getpid());
  pthread_atfork(NULL, NULL, exit_owner_is_child);   /* before the shim's own: a child is ours first */
  vs_shim_start();
}

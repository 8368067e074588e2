#include "map_guard.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define GUARD_RANGES 256

/* Lock-free for the handler: an entry is published by storing base last
 * (release) and read by loading base first (acquire). Writers of the
 * table serialise on g_lock (never taken by the handler). */
typedef struct range {
  uintptr_t base;  /* 0: free */
  size_t len;
  int broken;
} range;
static range g_ranges[GUARD_RANGES];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct sigaction g_prev;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
  /* A SIGBUS sent by kill, raise or sigqueue is not a fault: si_addr holds
   * no address, and no access will run again to repeat it. */
  int sent = si->si_code <= 0;
  uintptr_t a = (uintptr_t)si->si_addr;
  for (int i = 0; !sent && i < GUARD_RANGES; i++) {
    uintptr_t b = __atomic_load_n(&g_ranges[i].base, __ATOMIC_ACQUIRE);
    if (!b || a < b || a - b >= g_ranges[i].len) continue;
    /* mmap is async-signal-safe in practice (a system call); the range
     * stays mapped at the same address, now private zero pages. */
    void *p = mmap((void *)b, g_ranges[i].len, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) break;
    __atomic_store_n(&g_ranges[i].broken, 1, __ATOMIC_RELEASE);
    return;   /* the access is retried on the new pages */
  }
  /* Not ours: as without the shim. */
  if (g_prev.sa_flags & SA_SIGINFO) {
    if (g_prev.sa_sigaction) {
      g_prev.sa_sigaction(sig, si, uc);
      return;
    }
  } else if (g_prev.sa_handler == SIG_IGN && sent) {
    return;   /* ignored, as it was; the guard stays */
  } else if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN) {
    g_prev.sa_handler(sig);
    return;
  }
  /* The default action, as without the shim: a fault runs its access again
   * under SIG_DFL and ends the process; a sent signal is raised again now
   * (SA_NODEFER: delivered at once). sigaction and raise are
   * async-signal-safe. */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, NULL);
  if (sent) raise(SIGBUS);
}

static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_prev);
}

int vs_plat_guard_add(void *addr, size_t len) {
  pthread_once(&g_once, install);
  pthread_mutex_lock(&g_lock);
  int rc = -1;
  for (int i = 0; i < GUARD_RANGES; i++) {
    if (g_ranges[i].base) continue;
    g_ranges[i].len = len;
    g_ranges[i].broken = 0;
    __atomic_store_n(&g_ranges[i].base, (uintptr_t)addr, __ATOMIC_RELEASE);
    rc = 0;
    break;
  }
  pthread_mutex_unlock(&g_lock);
  return rc;
}

void vs_plat_guard_remove(void *addr) {
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < GUARD_RANGES; i++)
    if (g_ranges[i].base == (uintptr_t)addr) __atomic_store_n(&g_ranges[i].base, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_lock);
}

int vs_plat_guard_broken(const void *addr) {
  for (int i = 0; i < GUARD_RANGES; i++)
    if (__atomic_load_n(&g_ranges[i].base, __ATOMIC_ACQUIRE) == (uintptr_t)addr)
      return __atomic_load_n(&g_ranges[i].broken, __ATOMIC_ACQUIRE);
  return 0;
}

void vs_plat_guard_retire(void *addr, size_t len) {
  vs_plat_guard_remove(addr);
  mmap(addr, len, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

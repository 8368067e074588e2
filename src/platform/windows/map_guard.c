#include "map_guard.h"

#include <stdint.h>

/* See map_guard.h: no fault to catch on Windows, a mapped file cannot be
 * truncated under its views. The table only answers broken (never set)
 * for the ranges the callers register. */
#define GUARD_RANGES 64
static uintptr_t g_ranges[GUARD_RANGES];

int vs_plat_guard_add(void *addr, size_t len) {
  (void)len;
  for (int i = 0; i < GUARD_RANGES; i++) {
    uintptr_t zero = 0;
    if (__atomic_compare_exchange_n(&g_ranges[i], &zero, (uintptr_t)addr, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
      return 0;
  }
  return -1;
}

void vs_plat_guard_remove(void *addr) {
  for (int i = 0; i < GUARD_RANGES; i++) {
    uintptr_t want = (uintptr_t)addr;
    if (__atomic_compare_exchange_n(&g_ranges[i], &want, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
  }
}

int vs_plat_guard_broken(const void *addr) {
  (void)addr;
  return 0;
}

/* The old view stays mapped (lock-free readers may still hold the
 * address; it reads the old file's last bytes): one view per re-attach,
 * which a deleted or replaced ledger causes, is kept for the process's life. */
void vs_plat_guard_retire(void *addr, size_t len) {
  (void)len;
  vs_plat_guard_remove(addr);
}

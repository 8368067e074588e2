#include "lock.h"

#include <windows.h>

/* WaitOnAddress compares the word with `value` before it sleeps (its own
 * check closes the race with a wake between the caller's look and the
 * sleep), like FUTEX_WAIT. */
void vs_plat_lock_sleep(_Atomic uint32_t *word, uint32_t value) {
  WaitOnAddress((volatile VOID *)word, &value, sizeof value, INFINITE);
}

void vs_plat_lock_wake(_Atomic uint32_t *word) { WakeByAddressSingle((PVOID)word); }

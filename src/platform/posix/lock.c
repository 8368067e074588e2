#include "lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* FUTEX_PRIVATE_FLAG: the word is never shared with another process, so
 * the kernel keys the waiters by address within this one (no page lookup). */
void vs_plat_lock_sleep(_Atomic uint32_t *word, uint32_t value) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

void vs_plat_lock_wake(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

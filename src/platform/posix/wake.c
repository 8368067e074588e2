#include "wake.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void vs_plat_wait(uint32_t *addr, uint32_t expected, uint64_t timeout_ns, const char *key, const char *tag) {
  (void)key, (void)tag;
  struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000ull), .tv_nsec = (long)(timeout_ns % 1000000000ull)};
  syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, NULL, 0);
}

void vs_plat_wake(uint32_t *addr, const char *key, const char *tag) {
  (void)key, (void)tag;
  syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

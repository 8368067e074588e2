/* The process-private lock (src/platform/lock.h) on Windows
 * (WaitOnAddress): the cases of tests/platform/lock_cases.h, run under
 * Wine (Wine's WaitOnAddress, not Windows': see docs/windows.md). */
#include <stdio.h>

#include "lock_cases.h"

int main(void) {
  const char *why = lock_case_excludes();
  if (!why) why = lock_case_wakes_sleepers();
  if (why) {
    fprintf(stderr, "win_lock: %s\n", why);
    return 1;
  }
  printf("win_lock: both cases hold\n");
  return 0;
}

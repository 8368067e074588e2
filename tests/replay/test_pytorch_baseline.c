/* The `pytorch` replay policy against the real runs: replaying each trace in
 * ../shared/traces/ must reproduce what PyTorch's caching allocator actually
 * reserved (README "PyTorch's peak reserved") within 1%, the peak of live
 * bytes must be the README's, and the smallest card of the model must be
 * the README's ratio. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "replay.h"
#include "replay_test_util.h"

struct expect {
  const char *file;
  double live_gib, reserved_gib, card_over_live; /* the README's table */
};
static const struct expect expected[] = {
    {"cs336-ctx128-fullstep.csv", 51.16, 56.91, 1.006},
    {"cs336-ctx256-fullstep.csv", 51.18, 56.91, 1.062},
    {"cs336-ctx128-forward.csv", 18.15, 18.32, 1.009},
    {"cs336-ctx512-forward-mixed.csv", 37.25, 37.73, 1.014},
};

static void check_trace(const struct expect *e) {
  vs_trace t;
  load_trace(e->file, &t);
  vs_replay_opts o = {.release_threshold = 1ULL << 30};
  vs_progress pr;
  vs_progress_init(&pr, 1);
  vs_replay_result r;
  char err[512] = "";
  if (vs_replay_policy(&vs_policy_pytorch, &t, &o, 1 << 20, &pr, e->file, &r, err, sizeof err)) {
    print_error("%s: %s\n", e->file, err);
    fail();
  }
  double live = (double)r.peak_live / GIB, reserved = (double)r.stats.peak_reserved / GIB;
  double card = (double)r.smallest_card / (double)r.peak_live;
  print_message("%s: peak live %.3f GiB, reserved %.3f GiB (README %.2f, %+.2f%%), card %.4f x live\n", e->file, live,
                reserved, e->reserved_gib, 100.0 * (reserved / e->reserved_gib - 1.0), card);
  /* The README prints two decimals: the same value rounds to it. */
  assert_true(fabs(live - e->live_gib) <= 0.005);
  assert_true(fabs(reserved / e->reserved_gib - 1.0) <= 0.01);
  assert_true(fabs(card - e->card_over_live) <= 0.0015);
  assert_int_equal(r.failed, 0);
  assert_int_equal(r.requests, t.nallocs);
  vs_trace_free(&t);
}

static void test_fullstep_ctx128(void **s) { (void)s; check_trace(&expected[0]); }
static void test_fullstep_ctx256(void **s) { (void)s; check_trace(&expected[1]); }
static void test_forward_ctx128(void **s) { (void)s; check_trace(&expected[2]); }
static void test_forward_mixed_ctx512(void **s) { (void)s; check_trace(&expected[3]); }

/* The model's rules on a hand-made trace, each number worked out by hand. */
static void test_rules(void **state) {
  (void)state;
  static const char text[] = "Thread,Time,Action,Pointer,Size,Stream\n"
      "0,00:00:00.0,allocate,0x1,100,0x0\n"       /* small, 512 B: new 2 MiB segment (call 1) */
      "0,00:00:00.0,allocate,0x2,1048576,0x0\n"   /* small (1 MiB): the rest of it (cache 1) */
      "0,00:00:00.0,allocate,0x3,10485760,0x0\n"  /* 10 MiB: own 10 MiB segment (call 2) */
      "0,00:00:00.0,allocate,0x4,11534336,0x0\n"  /* 11 MiB: own 12 MiB segment (call 3), 1 MiB rest kept */
      "0,00:00:00.0,free,0x4,11534336,0x0\n"
      "0,00:00:00.0,allocate,0x5,11534336,0x0\n"  /* the 12 MiB block again (cache 2) */
      "0,00:00:00.0,allocate,0x6,1048577,0x0\n"   /* large, under 10 MiB: new 20 MiB segment (call 4) */
      "0,00:00:00.0,allocate,0x7,1000,0x5\n";     /* another stream: new small segment (call 5) */
  FILE *f = fmemopen((void *)text, sizeof text - 1, "r");
  vs_trace t;
  char err[256];
  assert_int_equal(vs_trace_read(f, "rules", &t, err, sizeof err), 0);
  fclose(f);
  vs_replay_opts o = {0};
  vs_progress pr;
  vs_progress_init(&pr, 1);
  vs_replay_result r;
  assert_int_equal(vs_replay_policy(&vs_policy_pytorch, &t, &o, 0, &pr, "rules", &r, err, sizeof err), 0);
  const uint64_t MiB = 1 << 20;
  assert_int_equal(r.stats.peak_reserved, (2 + 10 + 12 + 20 + 2) * MiB);
  assert_int_equal(r.stats.driver_calls, 5);
  assert_int_equal(r.served_from_cache, 2);
  /* Only the 11 MiB allocation after the free stays under the high-water mark. */
  assert_int_equal(r.steady_requests, 1);
  assert_int_equal(r.steady_served, 1);
  vs_trace_free(&t);
}

/* On a refused segment, every fully free segment is released and the
 * segment asked for again. */
static void test_release_and_retry(void **state) {
  (void)state;
  const uint64_t MiB = 1 << 20;
  char err[256];
  vs_replay_opts o = {0};
  void *p = vs_policy_pytorch.create(30 * MiB, 3, &o, err, sizeof err);
  assert_non_null(p);
  assert_int_equal(vs_policy_pytorch.alloc(p, 0, 12 * MiB, 0), VS_POLICY_DRIVER);
  vs_policy_pytorch.free(p, 0, 12 * MiB);
  assert_int_equal(vs_policy_pytorch.alloc(p, 1, 20 * MiB, 0), VS_POLICY_DRIVER); /* 12 + 20 > 30: release, retry */
  assert_int_equal(vs_policy_pytorch.alloc(p, 2, 12 * MiB, 0), VS_POLICY_REFUSED); /* 20 + 12 > 30, nothing free */
  vs_policy_stats s;
  vs_policy_pytorch.stats(p, &s);
  /* malloc 12, malloc 20 refused, free 12, malloc 20, malloc 12 refused twice */
  assert_int_equal(s.driver_calls, 6);
  assert_int_equal(s.peak_reserved, 20 * MiB);
  vs_policy_pytorch.destroy(p);
}

/* Ties between free blocks of one size go to the lower address, and where a
 * segment lands is the driver's choice: on a driver that hands out addresses
 * downwards (pytorch-down) the same program takes the other block, and on a
 * 40 MiB card one runs where the other is refused. */
static int tie_break_run(const vs_policy *pol) {
  const uint64_t MiB = 1 << 20;
  char err[256];
  vs_replay_opts o = {0};
  void *p = pol->create(40 * MiB, 4, &o, err, sizeof err);
  assert_non_null(p);
  assert_int_equal(pol->alloc(p, 1, 12 * MiB, 0), VS_POLICY_DRIVER); /* S0: its own 12 MiB segment */
  assert_int_equal(pol->alloc(p, 0, 8 * MiB, 0), VS_POLICY_DRIVER);  /* S1: 20 MiB, a free 12 MiB rest */
  pol->free(p, 1, 12 * MiB);                                          /* S0 wholly free: two 12 MiB blocks */
  assert_int_equal(pol->alloc(p, 2, 12 * MiB, 0), VS_POLICY_CACHED); /* up: S0; down: S1's rest */
  int rc = pol->alloc(p, 3, 20 * MiB, 0); /* 32 + 20 > 40: only a wholly free S0 can go back */
  vs_policy_stats s;
  pol->stats(p, &s);
  assert_int_equal(s.peak_reserved, (rc == VS_POLICY_DRIVER ? 40 : 32) * MiB);
  pol->destroy(p);
  return rc;
}

static void test_tie_break_by_address(void **state) {
  (void)state;
  assert_int_equal(tie_break_run(&vs_policy_pytorch), VS_POLICY_REFUSED);
  assert_int_equal(tie_break_run(&vs_policy_pytorch_down), VS_POLICY_DRIVER);
}

int main(void) {
  replay_test_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rules), cmocka_unit_test(test_release_and_retry),
      cmocka_unit_test(test_tie_break_by_address), cmocka_unit_test(test_fullstep_ctx128),
      cmocka_unit_test(test_fullstep_ctx256), cmocka_unit_test(test_forward_ctx128),
      cmocka_unit_test(test_forward_mixed_ctx512),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

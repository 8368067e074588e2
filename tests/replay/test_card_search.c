/* The smallest-card search (vs_smallest_card) on made-up cards with known
 * answers: monotone ones, and ones where a card a little larger than a
 * running one refuses again, as the arena and PyTorch's rules do on some
 * traces (docs/replay.md, "Smallest card"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "replay.h"

#define RES 1024ull   /* the search's resolution: capacities below are in these units */

/* A card of `units` runs unless it is below `least` or inside one of the
 * refusing bands [band_lo, band_hi]. */
typedef struct fake_card {
  uint64_t least;
  uint64_t band_lo[2], band_hi[2];
  unsigned probes;
} fake_card;

static int fake_probe(void *ctx, uint64_t capacity, int *failed, char *err, size_t errlen) {
  (void)err;
  (void)errlen;
  fake_card *f = ctx;
  uint64_t u = capacity / RES;
  assert_int_equal(capacity % RES, 0);   /* the search probes whole steps */
  f->probes++;
  *failed = u < f->least;
  for (int i = 0; i < 2; i++)
    if (f->band_hi[i] && u >= f->band_lo[i] && u <= f->band_hi[i]) *failed = 1;
  return 0;
}

static uint64_t search(fake_card *f, uint64_t live_units, uint64_t reserved_units, int expect_rc, char *err,
                       size_t errlen) {
  vs_progress pr;
  vs_progress_init(&pr, 1);
  uint64_t smallest = 0;
  int rc = vs_smallest_card(live_units * RES, reserved_units * RES, RES, 0, fake_probe, f, &pr, "t", "p", &smallest,
                            err, errlen);
  assert_int_equal(rc, expect_rc);
  return smallest / RES;
}

/* The search's answer, in units, for a card refusing below `least` and in
 * the bands (live 900 units, the unlimited run's peak `reserved`). */
static uint64_t answer(fake_card f, uint64_t reserved) {
  char err[256] = "";
  return search(&f, 900, reserved, 0, err, sizeof err);
}

static void test_monotone_card_is_exact(void **state) {
  (void)state;
  char err[256] = "";
  fake_card f = {.least = 1000};
  assert_int_equal(search(&f, 900, 1300, 0, err, sizeof err), 1000);
  /* Bisection plus the check above: about log2(400) + 20 replays. */
  assert_true(f.probes <= 9 + 1 + 20);
}

static void test_refusing_band_above_the_answer_moves_it(void **state) {
  (void)state;
  /* 1000 runs, 1060..1070 refuse, 1071 and up run: an operator's limit must
   * be 1071, not 1000 (the bisection alone never probes the band). */
  assert_int_equal(answer((fake_card){.least = 1000, .band_lo = {1060}, .band_hi = {1070}}, 1300), 1071);
}

static void test_refusal_at_the_window_end_searches_past_it(void **state) {
  (void)state;
  /* The last card checked (10 % above 1000) refuses, and so does every card
   * to 1150: the next running card is found by doubling. */
  assert_int_equal(answer((fake_card){.least = 1000, .band_lo = {1100}, .band_hi = {1150}}, 1300), 1151);
}

static void test_two_bands(void **state) {
  (void)state;
  /* The first band moves the answer to 1016; the check above 1016 reaches
   * further (to 1117) and finds the second band, beyond the first check's
   * 1100: the card 1108 refuses, 1113 runs, and 1109 is the least above. */
  assert_int_equal(answer((fake_card){.least = 1000, .band_lo = {1010, 1105}, .band_hi = {1015, 1108}}, 1300), 1109);
}

static void test_band_beyond_the_window_is_not_seen(void **state) {
  (void)state;
  /* The check covers 10 % above the answer; a refusing card further up is
   * outside what the search claims. */
  assert_int_equal(answer((fake_card){.least = 1000, .band_lo = {1200}, .band_hi = {1210}}, 1000), 1000);
}

static void test_refusing_everywhere_is_an_error(void **state) {
  (void)state;
  char err[256] = "";
  fake_card f = {.least = UINT64_MAX / RES};
  search(&f, 900, 1300, -1, err, sizeof err);
  assert_non_null(strstr(err, "refusals even on a card of"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_monotone_card_is_exact),
      cmocka_unit_test(test_refusing_band_above_the_answer_moves_it),
      cmocka_unit_test(test_refusal_at_the_window_end_searches_past_it),
      cmocka_unit_test(test_two_bands),
      cmocka_unit_test(test_band_beyond_the_window_is_not_seen),
      cmocka_unit_test(test_refusing_everywhere_is_an_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit test of the true footprint's rule (nvml_cards.c, vs_footprint_rule):
 * NVML's per-process figure less what the shim counted becomes the
 * tenant's overhead only where two measurements in a row saw the same
 * quiet state. A measurement that falls while a driver call is in flight
 * (a VMM growth between its cuMemCreate and the arena's record of it, a
 * free the shim credited before the driver's free returned) must not move
 * the overhead, even when the next one falls in another call's flight. A
 * context's own measurement moves it at once, by what surely is overhead:
 * never by bytes charged while it was taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "nvml_cards.h"
#include "unit_entry_stubs.h"

#define MiB (1ull << 20)

static vs_footprint_reading at(uint64_t used, uint64_t counted, uint64_t calls) {
  vs_footprint_reading r = {.used = used, .counted = counted, .calls = calls};
  return r;
}

/* The same quiet state twice: the excess is the overhead, up or down. */
static void steady_state_is_charged(void **state) {
  (void)state;
  vs_footprint_reading a = at(700 * MiB, 400 * MiB, 9), b = at(700 * MiB, 400 * MiB, 9);
  assert_int_equal(vs_footprint_rule(&a, &b, 0, 0), 300 * MiB);
  assert_int_equal(vs_footprint_rule(&a, &b, 500 * MiB, 0), 300 * MiB);   /* a fall, once it is seen twice */
  vs_footprint_reading c = at(400 * MiB, 400 * MiB, 9), d = at(400 * MiB, 400 * MiB, 9);
  assert_int_equal(vs_footprint_rule(&c, &d, 300 * MiB, 0), 0);
  vs_footprint_reading e = at(300 * MiB, 400 * MiB, 9), f = at(300 * MiB, 400 * MiB, 9);
  assert_int_equal(vs_footprint_rule(&e, &f, 0, 0), 0);   /* the driver below the books: no negative overhead */
}

/* Two growths in flight at two readings in a row: 2 MiB and 4 MiB more
 * in NVML's figure than counted. The rule before charged the smaller. */
static void two_flights_in_a_row_charge_nothing(void **state) {
  (void)state;
  vs_footprint_reading a = at(306 * MiB, 304 * MiB, 40), b = at(312 * MiB, 308 * MiB, 42);
  assert_int_equal(vs_footprint_rule(&a, &b, 0, 0), 0);
  assert_int_equal(vs_footprint_rule(&a, &b, 64 * MiB, 0), 64 * MiB);   /* nor moves a charged one */
}

/* The same figures twice, but a call returned in between (a block freed
 * and a block of its size allocated, each in flight at one reading): not
 * the same state. */
static void a_call_between_readings_charges_nothing(void **state) {
  (void)state;
  vs_footprint_reading a = at(264 * MiB, 200 * MiB, 10), b = at(264 * MiB, 200 * MiB, 12);
  assert_int_equal(vs_footprint_rule(&a, &b, 0, 0), 0);
  vs_footprint_reading c = at(264 * MiB, 200 * MiB, VS_FOOTPRINT_NOT_QUIET);   /* a call returned while read */
  assert_int_equal(vs_footprint_rule(&c, &c, 0, 0), 0);
  assert_int_equal(vs_footprint_rule(&a, &c, 0, 0), 0);
}

/* A context's own measurement counts at once, whatever came before. */
static void a_context_counts_at_once(void **state) {
  (void)state;
  vs_footprint_reading none = at(0, 0, 0), ctx = at(300 * MiB, 0, VS_FOOTPRINT_NOT_QUIET);
  assert_int_equal(vs_footprint_rule(&none, &ctx, 0, 1), 300 * MiB);
  assert_int_equal(vs_footprint_rule(&none, &ctx, 500 * MiB, 1), 300 * MiB);   /* a context ended: down at once */
}

/* A context's measurement while another thread allocated: 72 MiB charged
 * after the count was read are on the card in NVML's figure. Only what
 * surely is overhead counts (before: the 72 MiB too, until two quiet
 * readings undid it). */
static void a_context_counts_no_charge_made_meanwhile(void **state) {
  (void)state;
  vs_footprint_reading none = at(0, 0, 0), ctx = at(1002 * MiB, 630 * MiB, VS_FOOTPRINT_NOT_QUIET);
  ctx.window = 72 * MiB;
  assert_int_equal(vs_footprint_rule(&none, &ctx, 0, 1), 300 * MiB);
  ctx.window = 400 * MiB;   /* more charged than NVML's figure exceeds the count by: nothing surely is */
  assert_int_equal(vs_footprint_rule(&none, &ctx, 300 * MiB, 1), 0);
  /* the periodic rule never moves on such a reading */
  assert_int_equal(vs_footprint_rule(&ctx, &ctx, 300 * MiB, 0), 300 * MiB);
}

/* Which pid NVML lists this process under, from its lists just before and
 * just after the process's first context began (vs_footprint_identity). */
static void found_by_its_first_context(void **state) {
  (void)state;
  int foreign = 0;
  /* on the host: its own pid appears */
  unsigned b1[] = {700, 800}, a1[] = {700, 800, 4242};
  assert_int_equal(vs_footprint_identity(b1, 2, a1, 3, 4242, &foreign), 4242);
  assert_false(foreign);
  /* a container: NVML's pids are the host's; the one that appeared is this process */
  unsigned a2[] = {700, 1004242, 800};
  assert_int_equal(vs_footprint_identity(b1, 2, a2, 3, 42, &foreign), 1004242);
  assert_false(foreign);
  /* two began a context in the same moment: which one is this cannot be told */
  unsigned a4[] = {700, 800, 1000042, 1000043};
  assert_int_equal(vs_footprint_identity(b1, 2, a4, 4, 42, &foreign), 0);
  assert_false(foreign);
  /* a process that ended meanwhile, and one listed twice, change nothing */
  unsigned a5[] = {800, 1000042, 1000042};
  assert_int_equal(vs_footprint_identity(b1, 2, a5, 3, 42, &foreign), 1000042);
  /* NVML lists nobody on the card */
  assert_int_equal(vs_footprint_identity(NULL, 0, NULL, 0, 42, &foreign), 0);
  assert_false(foreign);
  /* its own pid is another process's on the host: listed before its context */
  unsigned b3[] = {700, 42}, a3[] = {700, 42, 1000042};
  assert_int_equal(vs_footprint_identity(b3, 2, a3, 3, 42, &foreign), 1000042);
  assert_true(foreign);
  /* ... and with no new pid, that pid is still not taken for this process */
  foreign = 0;
  assert_int_equal(vs_footprint_identity(b3, 2, b3, 2, 42, &foreign), 0);
  assert_true(foreign);
  /* ... nor on a card looked at later, where it is new: that other
   * process began a context there; beside it, the one other new pid is
   * this process */
  unsigned b6[] = {700}, a6[] = {700, 42};
  assert_int_equal(vs_footprint_identity(b6, 1, a6, 2, 42, &foreign), 0);
  unsigned a7[] = {700, 42, 1000042};
  assert_int_equal(vs_footprint_identity(b6, 1, a7, 3, 42, &foreign), 1000042);
  assert_true(foreign);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(steady_state_is_charged),
      cmocka_unit_test(two_flights_in_a_row_charge_nothing),
      cmocka_unit_test(a_call_between_readings_charges_nothing),
      cmocka_unit_test(a_context_counts_at_once),
      cmocka_unit_test(a_context_counts_no_charge_made_meanwhile),
      cmocka_unit_test(found_by_its_first_context),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Sizes, percentages and durations as the config file writes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "units.h"

static void sizes_good(void **state) {
  (void)state;
  static const struct { const char *text; uint64_t bytes; } cases[] = {
      {"0", 0},
      {"4096", 4096},
      {"512B", 512},
      {"1KiB", 1024},
      {"1 KiB", 1024},
      {"  2MiB  ", 2u << 20},
      {"16GiB", 16ull << 30},
      {"1.5GiB", 3ull << 29},
      {"0.25 MiB", 1u << 18},
      {"2TiB", 2ull << 40},
      {"1KB", 1000},
      {"3MB", 3000000},
      {"24GB", 24000000000ull},
      {"1.5GB", 1500000000ull},
      {"1048576TiB", 1ull << 60}, /* VS_SIZE_MAX */
      {"16777216TiB", 0}, /* overflows: checked below as bad */
  };
  for (size_t i = 0; i + 1 < sizeof cases / sizeof cases[0]; i++) {
    vs_size s;
    assert_int_equal(vs_parse_size(cases[i].text, &s), 0);
    assert_int_equal(s.is_pct, 0);
    assert_int_equal(s.bytes, cases[i].bytes);
  }
}

static void sizes_bad(void **state) {
  (void)state;
  static const char *bad[] = {"", "GiB", "16 GiBs", "16gib", "16 G", "-1GiB", "1.5", "1.GiB", ".5GiB",
                              "16777216TiB", "18446744073709551616", "101%", "100.5%", "5%%", "5 % x",
                              "1e9", "0x10", "16GiB 2GiB"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    vs_size s = {.bytes = 7};
    if (vs_parse_size(bad[i], &s) == 0) fail_msg("'%s' parsed as a size", bad[i]);
  }
  /* Well-formed but above 1 EiB: -2, so the config can say why (issue 23). */
  static const char *big[] = {"1048577TiB", "16777216TiB", "18446744073709551616", "1152921504606846977",
                              "99999999999999999999999999GB"};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    vs_size s = {.bytes = 7};
    if (vs_parse_size(big[i], &s) != -2) fail_msg("'%s' not refused as too large", big[i]);
    assert_int_equal(s.bytes, 7);
  }
}

static void percentages(void **state) {
  (void)state;
  vs_size s;
  assert_int_equal(vs_parse_size("25%", &s), 0);
  assert_true(s.is_pct);
  assert_int_equal(s.ppm, 250000);
  assert_int_equal(vs_size_resolve(s, 24ull << 30), 6ull << 30);
  assert_int_equal(vs_parse_size("12.5 %", &s), 0);
  assert_int_equal(s.ppm, 125000);
  assert_int_equal(vs_size_resolve(s, 8ull << 30), 1ull << 30);
  assert_int_equal(vs_parse_size("100%", &s), 0);
  assert_int_equal(vs_size_resolve(s, 3ull << 30), 3ull << 30);
  uint32_t ppm;
  assert_int_equal(vs_parse_percent("90%", &ppm), 0);
  assert_int_equal(ppm, 900000);
  assert_int_equal(vs_parse_percent("90", &ppm), -1);
  char buf[32];
  assert_string_equal(vs_size_str(s, buf, sizeof buf), "100%");
}

static void durations(void **state) {
  (void)state;
  uint64_t ms;
  assert_int_equal(vs_parse_duration_ms("30s", &ms), 0);
  assert_int_equal(ms, 30000);
  assert_int_equal(vs_parse_duration_ms("250ms", &ms), 0);
  assert_int_equal(ms, 250);
  assert_int_equal(vs_parse_duration_ms("2min", &ms), 0);
  assert_int_equal(ms, 120000);
  assert_int_equal(vs_parse_duration_ms("1.5 s", &ms), 0);
  assert_int_equal(ms, 1500);
  assert_int_equal(vs_parse_duration_ms("525600min", &ms), 0); /* 365 days: VS_DURATION_MAX_MS */
  assert_int_equal(ms, 31536000000ull);
  static const char *bad[] = {"30", "", "s", "30 sec", "3h", "1.5.s", "-1s", "30s x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (vs_parse_duration_ms(bad[i], &ms) != -1) fail_msg("'%s' parsed as a duration", bad[i]);
  /* Issue 23: durations whose nanoseconds (or a deadline from now) leave 64
   * bits are out of range (-2), not wrapped. */
  static const char *big[] = {"11971936903837499ms", "525601min", "31536000001ms", "18446744073709551616ms",
                              "99999999999999999999999s"};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    ms = 7;
    if (vs_parse_duration_ms(big[i], &ms) != -2) fail_msg("'%s' not refused as too long", big[i]);
    assert_int_equal(ms, 7);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sizes_good),
      cmocka_unit_test(sizes_bad),
      cmocka_unit_test(percentages),
      cmocka_unit_test(durations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* HAMi-core's CUDA_DEVICE_MEMORY_LIMIT[_<i>] (src/tenant/hami_env.h): the
 * size syntax, which variable wins, and the config they make. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "hami_env.h"
#include "plan.h"

static void sizes(void **state) {
  (void)state;
  static const struct { const char *text; uint64_t bytes; } good[] = {
      {"1g", 1ull << 30},      {"1G", 1ull << 30},     {"1024m", 1ull << 30}, {"1024M", 1ull << 30},
      {"1048576k", 1ull << 30}, {"1048576K", 1ull << 30}, {"1073741824", 1ull << 30}, {"0", 0},
      {"15g", 15ull << 30},    {"17179869183g", 17179869183ull << 30},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    uint64_t b = 1;
    assert_int_equal(vs_hami_parse_size(good[i].text, &b), 0);
    assert_int_equal(b, good[i].bytes);
  }
  static const char *bad[] = {"", "g", "1gb", "1GiB", "1.5g", "-1", " 1g", "1g ", "1t", "0x10",
                              "17179869184g", "18446744073709551616", "1 g"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t b = 7;
    assert_int_equal(vs_hami_parse_size(bad[i], &b), -1);
    assert_int_equal(b, 7);
  }
}

static void per_card_wins(void **state) {
  (void)state;
  char *env[] = {"PATH=/bin", "CUDA_DEVICE_MEMORY_LIMIT_1=512m", "CUDA_DEVICE_MEMORY_LIMIT=2g",
                 "CUDA_DEVICE_MEMORY_LIMIT_KEY=x", "CUDA_DEVICE_MEMORY_LIMIT_2=", "CUDA_DEVICE_MEMORY_LIMIT_3=0", NULL};
  vs_hami_limits h;
  char err[VS_ERR_MAX];
  assert_int_equal(vs_hami_read(env, &h, err, sizeof err), 0);
  assert_int_equal(h.nvars, 3); /* the empty one and the foreign one do not count */
  assert_string_equal(h.text, "CUDA_DEVICE_MEMORY_LIMIT=2g, CUDA_DEVICE_MEMORY_LIMIT_1=512m, CUDA_DEVICE_MEMORY_LIMIT_3=0");
  assert_int_equal(h.all, 2ull << 30);
  assert_int_equal(h.card[1], 512ull << 20);
  assert_int_equal(h.card[3], 0);

  vs_config *cfg = test_malloc(sizeof *cfg);
  vs_config_defaults(cfg);
  assert_int_equal(vs_hami_apply_env(env, cfg, 0, "pod-a", err, sizeof err), 1);
  assert_int_equal(cfg->ntenants, 1);
  vs_plan *plan = test_malloc(sizeof *plan);
  const uint64_t cap = 8ull << 30;
  for (int card = 0; card < 4; card++) {
    assert_int_equal(vs_plan_build(cfg, card, NULL, cap, plan, err, sizeof err), 0);
    uint64_t want = card == 1 ? 512ull << 20 : 2ull << 30; /* card 3's 0 falls back to the global one */
    assert_int_equal(vs_plan_find(plan, "pod-a")->limit, want);
    assert_int_equal(vs_plan_total(plan, "pod-a"), want);
  }
  uint64_t gen = cfg->generation;
  vs_config_defaults(cfg);
  assert_int_equal(vs_hami_apply_env(env, cfg, 0, "pod-b", err, sizeof err), 1);
  assert_true(cfg->generation != gen); /* another tenant, another config */
  test_free(plan);
  test_free(cfg);
}

static void file_wins_and_errors(void **state) {
  (void)state;
  vs_config *cfg = test_malloc(sizeof *cfg);
  char err[VS_ERR_MAX] = "";
  char *env[] = {"CUDA_DEVICE_MEMORY_LIMIT=1g", NULL};
  assert_int_equal(vs_config_parse_string("[tenant a]\nlimit = 3GiB\n", "f.conf", cfg, err, sizeof err), 0);
  assert_int_equal(vs_hami_apply_env(env, cfg, 1, "a", err, sizeof err), 0);
  assert_int_equal(vs_config_tenant(cfg, "a")->limit.bytes, 3ull << 30); /* unchanged */
  assert_int_equal(cfg->ntenants, 1);

  char *bad[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=1gb", "CUDA_DEVICE_MEMORY_LIMIT=1g", NULL};
  vs_config_defaults(cfg);
  assert_int_equal(vs_hami_apply_env(bad, cfg, 0, "a", err, sizeof err), -1);
  assert_non_null(strstr(err, "CUDA_DEVICE_MEMORY_LIMIT_0=1gb: bad size"));
  assert_int_equal(cfg->ntenants, 0);
  /* With a file a malformed variable does not matter. */
  assert_int_equal(vs_hami_apply_env(bad, cfg, 1, "a", err, sizeof err), 0);

  char *none[] = {"HOME=/root", NULL};
  vs_config_defaults(cfg);
  assert_int_equal(vs_hami_apply_env(none, cfg, 0, "a", err, sizeof err), 0);
  assert_int_equal(cfg->ntenants, 0);
  /* An index beyond what a config can name is ignored, not an error. */
  char *far[] = {"CUDA_DEVICE_MEMORY_LIMIT_64=1g", NULL};
  assert_int_equal(vs_hami_apply_env(far, cfg, 0, "a", err, sizeof err), 0);
  test_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sizes),
      cmocka_unit_test(per_card_wins),
      cmocka_unit_test(file_wins_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

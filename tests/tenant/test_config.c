/* The config parser: every key, every error with its exact message, each
 * case parsed from a file and from a string. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "card_ident.h"
#include "config.h"
#include "plan.h"
#include "tenant_test.h"

static char g_dir[256];

static const char three_tenants[] =
    "; a 24 GiB card shared by three services\n"
    "[global]\n"
    "arena = chunks\n"
    "release_threshold = 512MiB\n"
    "ledger_dir = /run/vramshim\n"
    "dump_dir = /var/tmp/vs\n"
    "dump_signal = USR2\n"
    "timeline_interval = 500ms\n"
    "\n"
    "[card 0]\n"
    "  headroom = 1GiB   ; indented keys are keys\n"
    "[card GPU-8c1f0e2a-1111-2222-3333-444455556666]\n"
    "headroom = 5%\n"
    "\n"
    "[tenant llm]\n"
    "reserve = 16GiB\n"
    "limit = 20GiB\n"
    "warn_at = 90%\n"
    "on_limit = fail\n"
    "cards = 0\n"
    "match_exe = vllm, python3.11\n"
    "\n"
    "[tenant embed]\n"
    "reserve = 2GiB\n"
    "limit = 3GiB\n"
    "on_limit = wait:30s\n"
    "match_exe = text-embeddings-router\n"
    "\n"
    "[tenant rerank]\n"
    "reserve = 10%\n"
    "limit = 25%\n"
    "cards = 0, 1\n"
    "\n"
    "[tenant default]\n"
    "limit = 2GiB\n";

/* Parses text both ways; returns the result of the file parse and checks
 * both agree (same result, same message apart from the file name). */
static int parse_both(const char *text, vs_config *cfg, char *err, size_t errlen) {
  char path[512], err_s[VS_ERR_MAX];
  tt_write_file(g_dir, "t.conf", text, path, sizeof path);
  vs_config *c2 = malloc(sizeof *c2);
  int rs = vs_config_parse_string(text, "<string>", c2, err_s, sizeof err_s);
  int rf = vs_config_parse_file(path, cfg, err, errlen);
  assert_int_equal(rs, rf);
  if (rf) {
    const char *a = strchr(err, ':'), *b = strchr(err_s, ':');
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, b);
    assert_int_equal(strncmp(err, path, strlen(path)), 0);
    assert_int_equal(strncmp(err_s, "<string>:", 9), 0);
  } else {
    assert_int_equal(cfg->generation, c2->generation);
    assert_int_equal(cfg->ntenants, c2->ntenants);
  }
  free(c2);
  return rf;
}

/* on_limit = spill:MAX (issue 13): a size or a percentage; resolved per card in the plan. */
static void spill_values(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  vs_plan *plan = malloc(sizeof *plan);
  char err[VS_ERR_MAX] = "";
  if (parse_both("[tenant a]\nlimit = 1GiB\non_limit = spill:8GiB\n[tenant b]\non_limit = spill:50%\n"
                 "[tenant c]\non_limit = spill:1GiB\non_limit = fail\n",
                 cfg, err, sizeof err) == 0)
    fail_msg("expected a duplicate-key error");
  if (parse_both("[tenant a]\nlimit = 1GiB\non_limit = spill:8GiB\n[tenant b]\non_limit = spill:50%\n"
                 "[tenant c]\non_limit = wait:2s\n",
                 cfg, err, sizeof err))
    fail_msg("%s", err);
  const vs_tenant_cfg *a = vs_config_tenant(cfg, "a"), *b = vs_config_tenant(cfg, "b"), *c = vs_config_tenant(cfg, "c");
  assert_true(a->has_spill && a->wait_ms == 0 && a->spill_max.bytes == 8 * GiB);
  assert_true(b->has_spill && b->spill_max.is_pct && b->spill_max.ppm == 500000);
  assert_true(!c->has_spill && c->wait_ms == 2000);
  if (vs_plan_build(cfg, 0, NULL, 4 * GiB, plan, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(vs_plan_find(plan, "a")->spill_max, 8 * GiB);
  assert_int_equal(vs_plan_find(plan, "b")->spill_max, 2 * GiB);
  assert_int_equal(vs_plan_find(plan, "c")->spill_max, 0);
  free(plan);
  free(cfg);
}

/* Threshold actions (issue 26): per tenant and per card, run:ABSOLUTE_PATH. */
static void action_values(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX] = "";
  if (parse_both("[card 0]\non_refuse = run:/usr/local/bin/page-oncall\n"
                 "[tenant llm]\nlimit = 1GiB\nwarn_at = 90%\non_warn = run:/usr/local/bin/llm-degrade\n"
                 "on_refuse = run:/opt/x/page\n[tenant b]\n",
                 cfg, err, sizeof err))
    fail_msg("%s", err);
  const vs_tenant_cfg *t = vs_config_tenant(cfg, "llm"), *b = vs_config_tenant(cfg, "b");
  assert_string_equal(t->actions.on_warn, "/usr/local/bin/llm-degrade");
  assert_string_equal(t->actions.on_refuse, "/opt/x/page");
  assert_int_equal(t->actions.on_warn_line, 6);
  assert_int_equal(t->actions.on_refuse_line, 7);
  assert_string_equal(b->actions.on_warn, "");
  assert_string_equal(b->actions.on_refuse, "");
  assert_string_equal(cfg->cards[0].actions.on_refuse, "/usr/local/bin/page-oncall");
  assert_string_equal(cfg->cards[0].actions.on_warn, "");
  free(cfg);
}

static void every_key(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX] = "";
  if (parse_both(three_tenants, cfg, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(cfg->arena, VS_CFG_ARENA_CHUNKS);
  assert_int_equal(cfg->release_threshold.bytes, 512 * MiB);
  assert_string_equal(cfg->ledger_dir, "/run/vramshim");
  assert_string_equal(cfg->dump_dir, "/var/tmp/vs");
  assert_int_equal(cfg->dump_signal, SIGUSR2);
  assert_int_equal(cfg->timeline_interval_ms, 500);
  assert_int_equal(cfg->ncards, 2);
  assert_int_equal(cfg->cards[0].index, 0);
  assert_int_equal(cfg->cards[0].headroom.bytes, GiB);
  assert_int_equal(cfg->cards[0].headroom_line, 11);
  assert_int_equal(cfg->cards[1].index, -1);
  assert_string_equal(cfg->cards[1].uuid, "GPU-8c1f0e2a-1111-2222-3333-444455556666");
  assert_int_equal(cfg->cards[1].headroom.ppm, 50000);
  assert_int_equal(cfg->ntenants, 4);
  const vs_tenant_cfg *llm = vs_config_tenant(cfg, "llm");
  assert_non_null(llm);
  assert_int_equal(llm->reserve.bytes, 16 * GiB);
  assert_int_equal(llm->limit.bytes, 20 * GiB);
  assert_int_equal(llm->warn_ppm, 900000);
  assert_int_equal(llm->wait_ms, 0);
  assert_int_equal(llm->cards_mask, 1);
  assert_int_equal(llm->nexes, 2);
  assert_string_equal(llm->exes[1], "python3.11");
  const vs_tenant_cfg *emb = vs_config_tenant(cfg, "embed");
  assert_int_equal(emb->wait_ms, 30000);
  assert_int_equal(emb->cards_mask, UINT64_MAX);
  const vs_tenant_cfg *rr = vs_config_tenant(cfg, "rerank");
  assert_true(rr->reserve.is_pct);
  assert_int_equal(rr->cards_mask, 3);
  assert_true(vs_config_tenant(cfg, "default")->has_limit);
  assert_null(vs_config_tenant(cfg, "nobody"));
  assert_ptr_equal(vs_config_card(cfg, 0, NULL), &cfg->cards[0]);
  assert_ptr_equal(vs_config_card(cfg, 0, "GPU-8c1f0e2a-1111-2222-3333-444455556666"), &cfg->cards[1]);
  assert_null(vs_config_card(cfg, 3, NULL));

  /* Defaults when keys are absent. */
  assert_int_equal(vs_config_parse_string("[tenant x]\n", NULL, cfg, err, sizeof err), 0);
  assert_int_equal(cfg->arena, VS_CFG_ARENA_AUTO);
  assert_string_equal(cfg->ledger_dir, "/run/vramshim");
  assert_string_equal(cfg->dump_dir, "/var/tmp/vramshim");
  assert_int_equal(cfg->timeline_interval_ms, 10000);
  assert_int_equal(cfg->release_decay_ms, 10000);
  assert_int_equal(vs_config_parse_string("[global]\nrelease_decay = 2s\n", NULL, cfg, err, sizeof err), 0);
  assert_int_equal(cfg->release_decay_ms, 2000);
  assert_int_equal(vs_config_parse_string("[tenant x]\n", NULL, cfg, err, sizeof err), 0);
  assert_int_equal(cfg->release_threshold.bytes, GiB);
  assert_int_equal(cfg->ntenants, 1); /* an empty section still declares a tenant */
  free(cfg);
}

static const struct bad_case {
  const char *text;
  const char *message; /* after "FILE" */
} bad_cases[] = {
    {"[global]\nflavour = vanilla\n", ":2: unknown key 'flavour' in [global]"},
    {"[tenant a]\nreserve = 1GiB\nlimits = 2GiB\n", ":3: unknown key 'limits' in [tenant a]"},
    {"[card 0]\nreserve = 1GiB\n", ":2: unknown key 'reserve' in [card 0]"},
    {"[globals]\n", ":1: unknown section [globals] (known: [global], [card N], [card GPU-UUID], [tenant NAME])"},
    {"[tenant a b]\n", ":1: unknown section [tenant a b] (known: [global], [card N], [card GPU-UUID], [tenant NAME])"},
    {"[tenant]\n", ":1: section [tenant] needs a name, e.g. [tenant llm]"},
    {"[tenant l/m]\n", ":1: bad tenant name 'l/m': a tenant name is 1 to 63 bytes of letters, digits, '_', '-' and '.'"},
    {"[card]\n", ":1: section [card] needs a card index or a GPU UUID, e.g. [card 0]"},
    {"[card 64]\n", ":1: bad card index '64': expected 0 to 63 or a GPU UUID"},
    {"[card gpu0]\n", ":1: bad card 'gpu0': expected an index or a UUID like GPU-8c1f0e2a-..."},
    {"[global]\n[global]\n", ":2: duplicate section [global] (first at line 1)"},
    {"[tenant a]\n\n[tenant b]\n[tenant a]\n", ":4: duplicate section [tenant a] (first at line 1)"},
    {"[card 1]\n[card 1]\n", ":2: duplicate section [card 1] (first at line 1)"},
    {"[tenant a]\nlimit = 1GiB\nlimit = 2GiB\n", ":3: duplicate key 'limit' in [tenant a] (first at line 2)"},
    {"[global]\narena = vmm\n arena = off\n", ":3: duplicate key 'arena' in [global] (first at line 2)"},
    {"limit = 1GiB\n", ":1: key 'limit' outside any section"},
    {"[tenant a]\nreserve = 16 gigs\n",
     ":2: bad size '16 gigs' for 'reserve': expected a number with B, KiB, MiB, GiB, TiB, KB, MB, GB, or a percentage like 25%"},
    {"[tenant a]\nlimit = 120%\n",
     ":2: bad size '120%' for 'limit': expected a number with B, KiB, MiB, GiB, TiB, KB, MB, GB, or a percentage like 25%"},
    {"[tenant a]\nreserve =\n",
     ":2: bad size '' for 'reserve': expected a number with B, KiB, MiB, GiB, TiB, KB, MB, GB, or a percentage like 25%"},
    {"[card 0]\nheadroom = 1 GiB # one\n",
     ":2: bad size '1 GiB # one' for 'headroom': expected a number with B, KiB, MiB, GiB, TiB, KB, MB, GB, or a percentage like 25%"},
    {"[global]\nrelease_threshold = lots\n",
     ":2: bad size 'lots' for 'release_threshold': expected a number with B, KiB, MiB, GiB, TiB, KB, MB, GB, or a percentage like 25%"},
    {"[global]\ntimeline_interval = 10\n",
     ":2: bad duration '10' for 'timeline_interval': expected a number with ms, s or min, e.g. 30s"},
    /* issue 23, point 10: 11971936903837499 ms once wrapped to 1,216 ns */
    {"[global]\ntimeline_interval = 11971936903837499ms\n",
     ":2: bad duration '11971936903837499ms' for 'timeline_interval': longer than the maximum of 365 days"},
    {"[global]\ntimeline_interval = 99999999999999999999999min\n",
     ":2: bad duration '99999999999999999999999min' for 'timeline_interval': longer than the maximum of 365 days"},
    {"[tenant a]\nlimit = 1048577TiB\n", ":2: bad size '1048577TiB' for 'limit': larger than the maximum of 1 EiB"},
    {"[tenant a]\nreserve = 18446744073709551615\n",
     ":2: bad size '18446744073709551615' for 'reserve': larger than the maximum of 1 EiB"},
    {"[card 0]\nheadroom = 99999999999999999999GB\n",
     ":2: bad size '99999999999999999999GB' for 'headroom': larger than the maximum of 1 EiB"},
    {"[global]\nrelease_threshold = 2000000TiB\n",
     ":2: bad size '2000000TiB' for 'release_threshold': larger than the maximum of 1 EiB"},
    {"[tenant a]\non_limit = spill:1048577TiB\n",
     ":2: bad value 'spill:1048577TiB' for 'on_limit': spill:MAX needs a size above 0, e.g. spill:8GiB (larger than the maximum of 1 EiB)"},
    {"[tenant a]\non_limit = wait:99999999999999999999999ms\n",
     ":2: bad value 'wait:99999999999999999999999ms' for 'on_limit': the wait is longer than the maximum of 24 h"},
    {"[global]\nrelease_decay = 1441min\n",
     ":2: bad duration '1441min' for 'release_decay': expected a number with ms, s or min, e.g. 30s, at most 1440min (a day)"},
    {"[global]\narena = cuda\n", ":2: bad value 'cuda' for 'arena': expected vmm, chunks or off"},
    {"[global]\ndump_signal = HUP\n", ":2: bad value 'HUP' for 'dump_signal': expected none, USR1 or USR2"},
    {"[global]\nledger_dir = shm/vs\n", ":2: 'ledger_dir' must be an absolute path, not 'shm/vs'"},
    {"[tenant a]\nwarn_at = 90\n",
     ":2: bad value '90' for 'warn_at': expected a percentage of the limit above 0, e.g. 90%"},
    {"[tenant a]\non_limit = wait\n",
     ":2: bad value 'wait' for 'on_limit': expected fail, wait:DURATION or spill:MAX, e.g. wait:30s or spill:8GiB"},
    {"[tenant a]\non_limit = wait:soon\n",
     ":2: bad value 'wait:soon' for 'on_limit': expected fail, wait:DURATION or spill:MAX, e.g. wait:30s or spill:8GiB"},
    {"[tenant a]\non_limit = spill:0\n",
     ":2: bad value 'spill:0' for 'on_limit': spill:MAX needs a size above 0, e.g. spill:8GiB (expected a number with B, KiB, MiB, GiB, TiB, KB, MB, GB, or a percentage like 25%)"},
    {"[tenant a]\non_limit = spill:lots\n",
     ":2: bad value 'spill:lots' for 'on_limit': spill:MAX needs a size above 0, e.g. spill:8GiB (expected a number with B, KiB, MiB, GiB, TiB, KB, MB, GB, or a percentage like 25%)"},
    /* issue 10, point 8: 18446744073710 ms once wrapped to a 7 ms wait */
    {"[tenant a]\non_limit = wait:18446744073710ms\n",
     ":2: bad value 'wait:18446744073710ms' for 'on_limit': the wait is longer than the maximum of 24 h"},
    {"[tenant a]\non_limit = wait:1441min\n",
     ":2: bad value 'wait:1441min' for 'on_limit': the wait is longer than the maximum of 24 h"},
    {"[tenant a]\ncards = 0, x\n", ":2: bad card index 'x' in 'cards': expected indexes 0 to 63 or GPU UUIDs, comma-separated"},
    {"[tenant a]\ncards = ,\n", ":2: 'cards' is empty: list card indexes or UUIDs, or remove the key for all cards"},
    {"[tenant a]\ncards = GPU-xyz\n", ":2: bad card 'GPU-xyz' in 'cards': expected an index or a UUID like GPU-8c1f0e2a-..."},
    {"[tenant a]\non_warn = /usr/bin/degrade\n",
     ":2: bad value '/usr/bin/degrade' for 'on_warn': expected run:PROGRAM with an absolute path and no arguments, "
     "e.g. run:/usr/local/bin/llm-degrade"},
    {"[card 0]\non_refuse = run:page --now\n",
     ":2: bad value 'run:page --now' for 'on_refuse': expected run:PROGRAM with an absolute path and no arguments, "
     "e.g. run:/usr/local/bin/llm-degrade"},
    {"[card 0]\non_warn = run:/bin/a\non_warn = run:/bin/b\n", ":3: duplicate key 'on_warn' in [card 0] (first at line 2)"},
    {"[tenant a]\nmatch_exe = /usr/bin/vllm\n",
     ":2: bad executable name '/usr/bin/vllm' in 'match_exe': a file name without '/'"},
    {"[tenant a]\nmatch_exe = vllm\n[tenant b]\nmatch_exe = x, vllm\n",
     ":4: executable 'vllm' is already matched by tenant 'a'"},
    {"[tenant a]\nlimit = 4GiB\nreserve = 8GiB\n", ":3: reserve 8.00 GiB of tenant 'a' is above its limit 4.00 GiB (line 2)"},
    {"[tenant a]\nreserve = 50%\nlimit = 25%\n", ":2: reserve 50% of tenant 'a' is above its limit 25% (line 3)"},
    {"[tenant a]\nthis line has no equals sign\n", ":2: syntax error: expected [section], key = value, or a comment"},
    {"[tenant a\nlimit = 1GiB\n", ":1: syntax error: expected [section], key = value, or a comment"},
    {"[global] extra\n", ":1: unexpected text after the section header"},
};

static void bad_inputs(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    char err[VS_ERR_MAX] = "";
    if (parse_both(bad_cases[i].text, cfg, err, sizeof err) != -1)
      fail_msg("case %zu was accepted:\n%s", i, bad_cases[i].text);
    const char *msg = strchr(err, ':');
    if (strcmp(msg, bad_cases[i].message))
      fail_msg("case %zu:\n  got      '%s'\n  expected '%s'", i, msg, bad_cases[i].message);
  }
  free(cfg);
}

static void long_line_and_missing_file(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX];
  char text[400] = "[tenant a]\nmatch_exe = ";
  memset(text + strlen(text), 'x', 250);
  assert_int_equal(vs_config_parse_string(text, "c.conf", cfg, err, sizeof err), -1);
  assert_string_equal(err, "c.conf:2: line too long (at most 198 characters)");
  assert_int_equal(vs_config_parse_file("/nonexistent/vs.conf", cfg, err, sizeof err), -1);
  assert_string_equal(err, "/nonexistent/vs.conf: cannot read the config file: No such file or directory");
  free(cfg);
}

static void cards_checked_against_capacity(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX];
  assert_int_equal(vs_config_parse_string(three_tenants, "t.conf", cfg, err, sizeof err), 0);
  uint64_t caps24[] = {24 * GiB, 24 * GiB};
  assert_int_equal(vs_config_check_cards(cfg, caps24, 2, err, sizeof err), 0);
  /* 16 + 2 + 10% of 20 GiB = 20 GiB reserved, + 1 GiB headroom > 20 GiB. */
  uint64_t caps20[] = {20 * GiB};
  assert_int_equal(vs_config_check_cards(cfg, caps20, 1, err, sizeof err), -1);
  assert_string_equal(err, "t.conf:30: reservations overcommit card 0: headroom 1.00 GiB + reservations 20.00 GiB = "
                           "21.00 GiB, above its capacity 20.00 GiB");
  /* Percent limit against byte reserve only shows with a capacity. */
  assert_int_equal(vs_config_parse_string("[tenant a]\nreserve = 2GiB\nlimit = 10%\n", "p.conf", cfg, err,
                                          sizeof err), 0);
  uint64_t cap8[] = {8 * GiB};
  assert_int_equal(vs_config_check_cards(cfg, cap8, 1, err, sizeof err), -1);
  assert_string_equal(err, "p.conf:2: reserve 2.00 GiB of tenant 'a' is above its limit 819.20 MiB on card 0 "
                           "(capacity 8.00 GiB)");
  uint64_t cap40[] = {40 * GiB};
  assert_int_equal(vs_config_check_cards(cfg, cap40, 1, err, sizeof err), 0);
  /* Headroom alone above the card. */
  assert_int_equal(vs_config_parse_string("[card 0]\nheadroom = 4GiB\n", "h.conf", cfg, err, sizeof err), 0);
  uint64_t cap3[] = {3 * GiB};
  assert_int_equal(vs_config_check_cards(cfg, cap3, 1, err, sizeof err), -1);
  assert_string_equal(err, "h.conf:2: headroom 4.00 GiB of card 0 is above its capacity 3.00 GiB");
  free(cfg);
}

static void plan_per_card(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  vs_plan *plan = malloc(sizeof *plan);
  char err[VS_ERR_MAX];
  assert_int_equal(vs_config_parse_string(three_tenants, "t.conf", cfg, err, sizeof err), 0);
  assert_int_equal(vs_plan_build(cfg, 0, NULL, 24 * GiB, plan, err, sizeof err), 0);
  assert_int_equal(plan->capacity, 24 * GiB);
  assert_int_equal(plan->headroom, GiB);
  assert_int_equal(plan->generation, cfg->generation);
  assert_int_equal(plan->ntenants, 4);
  const vs_plan_tenant *rr = vs_plan_find(plan, "rerank");
  assert_int_equal(rr->reserve, (uint64_t)(24 * GiB / 10));
  assert_int_equal(rr->limit, 6 * GiB);
  assert_int_equal(vs_plan_find(plan, "default")->limit, 2 * GiB);
  assert_int_equal(vs_plan_find(plan, "default")->reserve, 0);
  uint64_t reserved = GiB + 16 * GiB + 2 * GiB + 24 * GiB / 10;
  assert_int_equal(vs_plan_reserved(plan), reserved);
  /* total = min(L, C - H - sum of others' R) */
  /* llm's limit (20 GiB) is above what the others' reservations leave. */
  assert_int_equal(vs_plan_total(plan, "llm"), 24 * GiB - GiB - 2 * GiB - 24 * GiB / 10);
  assert_int_equal(vs_plan_total(plan, "embed"), 3 * GiB);
  assert_int_equal(vs_plan_total(plan, "default"), 2 * GiB);
  /* A tenant without a section follows default's limit (issue 10, point 9). */
  assert_int_equal(vs_plan_total(plan, "unknown"), 2 * GiB);
  assert_ptr_equal(vs_plan_rules(plan, "unknown"), vs_plan_find(plan, "default"));
  /* Card 1: llm is not on it (cards = 0): no reserve, no limit there; the
   * UUID section gives the headroom when the UUID matches. */
  assert_int_equal(vs_plan_build(cfg, 1, "GPU-8c1f0e2a-1111-2222-3333-444455556666", 10 * GiB, plan, err, sizeof err), 0);
  assert_int_equal(plan->headroom, GiB / 2);
  assert_int_equal(vs_plan_find(plan, "llm")->reserve, 0);
  assert_int_equal(vs_plan_find(plan, "llm")->limit, VS_NO_LIMIT);
  assert_int_equal(vs_plan_total(plan, "llm"), 10 * GiB - GiB / 2 - 2 * GiB - GiB);
  free(plan);
  free(cfg);
}

static void tenant_selection(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX], name[VS_NAME_MAX];
  assert_int_equal(vs_config_parse_string(three_tenants, "t.conf", cfg, err, sizeof err), 0);
  assert_string_equal(vs_config_select_tenant(cfg, "rerank", "vllm", name), "VRAMSHIM_TENANT");
  assert_string_equal(name, "rerank");
  assert_string_equal(vs_config_select_tenant(cfg, "", "/opt/venv/bin/python3.11", name), "match_exe");
  assert_string_equal(name, "llm");
  assert_string_equal(vs_config_select_tenant(cfg, NULL, "text-embeddings-router", name), "match_exe");
  assert_string_equal(name, "embed");
  assert_string_equal(vs_config_select_tenant(cfg, NULL, "bash", name), "default");
  assert_string_equal(name, "default");
  assert_string_equal(vs_config_select_tenant(cfg, NULL, NULL, name), "default");
  /* An env tenant need not have a section. */
  assert_string_equal(vs_config_select_tenant(cfg, "batch", "vllm", name), "VRAMSHIM_TENANT");
  assert_string_equal(name, "batch");
  char exe[VS_NAME_MAX];
  vs_self_exe("ignored", exe);
  assert_string_equal(exe, "tenant_config");
  /* issue 22: a name outside 1..63 bytes of [A-Za-z0-9._-] is refused
   * whole, never cut (two long names once became one tenant). */
  char n63[64], n64[65], n65[66];
  memset(n63, 'a', 63), n63[63] = 0;
  memset(n64, 'a', 64), n64[64] = 0;
  memset(n65, 'a', 65), n65[65] = 0;
  assert_string_equal(vs_config_select_tenant(cfg, n63, NULL, name), "VRAMSHIM_TENANT");
  assert_string_equal(name, n63);
  assert_null(vs_config_select_tenant(cfg, n64, NULL, name));
  assert_string_equal(name, "default");
  assert_null(vs_config_select_tenant(cfg, n65, NULL, name));
  assert_null(vs_config_select_tenant(cfg, "evil\nvramshim: forged", NULL, name));
  assert_null(vs_config_select_tenant(cfg, "a b", NULL, name));
  assert_null(vs_config_select_tenant(cfg, "t/..", NULL, name));
  assert_true(vs_tenant_name_ok("llm-2.small_x"));
  assert_false(vs_tenant_name_ok(""));
  vs_config_bad_tenant("evil\nvramshim: forged", err, sizeof err);
  assert_null(strchr(err, '\n'));
  assert_non_null(strstr(err, "evil\\nvramshim: forged"));
  assert_non_null(strstr(err, "1 to 63 bytes"));
  /* a section name obeys the same rule */
  char text[200];
  snprintf(text, sizeof text, "[tenant %s]\nlimit = 1GiB\n", n64);
  assert_int_not_equal(vs_config_parse_string(text, "t.conf", cfg, err, sizeof err), 0);
  assert_non_null(strstr(err, "1 to 63 bytes"));
  free(cfg);
}

/* issue 22: a card's rules are its physical index's and UUID's, never the
 * ordinal a process gives it; `cards =` names cards by UUID too. */
static void card_identity(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  vs_plan *plan = malloc(sizeof *plan);
  char err[VS_ERR_MAX];
  const char *text = "[card 1]\nheadroom = 1GiB\n"
                     "[tenant a]\ncards = 1\nlimit = 2GiB\n"
                     "[tenant b]\ncards = GPU-AAAAAAAA-1111-2222-3333-444455556666, 0\nlimit = 3GiB\n";
  assert_int_equal(vs_config_parse_string(text, "t.conf", cfg, err, sizeof err), 0);
  /* physical card 1, device 0 of this process: card 1's rules */
  assert_int_equal(vs_plan_build_card(cfg, 1, 0, "GPU-bbbbbbbb-1111-2222-3333-444455556666", 10 * GiB, plan, err,
                                      sizeof err), 0);
  assert_int_equal(plan->card, 1);
  assert_int_equal(plan->headroom, GiB);
  assert_int_equal(vs_plan_find(plan, "a")->limit, 2 * GiB);
  assert_int_equal(vs_plan_find(plan, "b")->limit, VS_NO_LIMIT);
  /* index unknown: only UUID rules match (case does not matter) */
  assert_int_equal(vs_plan_build_card(cfg, -1, 1, "GPU-aaaaaaaa-1111-2222-3333-444455556666", 10 * GiB, plan, err,
                                      sizeof err), 0);
  assert_int_equal(plan->headroom, 0);
  assert_int_equal(vs_plan_find(plan, "a")->limit, VS_NO_LIMIT);
  assert_int_equal(vs_plan_find(plan, "b")->limit, 3 * GiB);
  /* the physical index from CUDA_VISIBLE_DEVICES */
  const char *u = "GPU-bbbbbbbb-1111-2222-3333-444455556666";
  assert_int_equal(vs_card_index(1, u, NULL, "/nonexistent"), 1);
  assert_int_equal(vs_card_index(0, u, "3, 1", "/nonexistent"), 3);
  assert_int_equal(vs_card_index(1, u, "3, 1", "/nonexistent"), 1);
  assert_int_equal(vs_card_index(2, u, "3,1", "/nonexistent"), -1);
  /* a UUID entry: the card's ledger header says, when there is one */
  assert_int_equal(vs_card_index(0, u, "GPU-bbbb", "/nonexistent"), -1);
  free(plan);
  free(cfg);
}

/* The error policy at load: exit 78, or passthrough with a line. */
static void error_policy(void **state) {
  (void)state;
  for (int passthrough = 0; passthrough < 2; passthrough++) {
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(pipefd[1], 2);
      if (passthrough) setenv("VRAMSHIM_ON_ERROR", "passthrough", 1);
      else unsetenv("VRAMSHIM_ON_ERROR");
      unsetenv("VRAMSHIM_LOG");
      int r = vs_config_on_error("x.conf:3: unknown key 'lmit' in [tenant a]");
      _exit(r == 0 ? 0 : 99);
    }
    close(pipefd[1]);
    char out[2048] = "";
    size_t got = 0;
    ssize_t n;
    while ((n = read(pipefd[0], out + got, sizeof out - 1 - got)) > 0) got += (size_t)n;
    out[got] = 0;
    close(pipefd[0]);
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_non_null(strstr(out, "vramshim: x.conf:3: unknown key 'lmit' in [tenant a]\n"));
    if (passthrough) {
      assert_int_equal(WEXITSTATUS(st), 0);
      assert_non_null(strstr(out, "running WITHOUT quota enforcement"));
    } else {
      assert_int_equal(WEXITSTATUS(st), 78);
      assert_non_null(strstr(out, "stopping (exit status 78)"));
    }
  }
}

static void load_from_env(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX], path[512];
  tt_write_file(g_dir, "env.conf", "[tenant only]\nlimit = 1GiB\n", path, sizeof path);
  setenv("VRAMSHIM_CONFIG", path, 1);
  assert_int_equal(vs_config_load_env(cfg, err, sizeof err), 0);
  assert_non_null(vs_config_tenant(cfg, "only"));
  setenv("VRAMSHIM_CONFIG", "/nonexistent.conf", 1);
  assert_int_equal(vs_config_load_env(cfg, err, sizeof err), -1);
  unsetenv("VRAMSHIM_CONFIG");
  free(cfg);
}

static int setup(void **state) {
  (void)state;
  tt_tempdir(g_dir, sizeof g_dir);
  return 0;
}
static int teardown(void **state) {
  (void)state;
  tt_rmdir(g_dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_key),
      cmocka_unit_test(spill_values),
      cmocka_unit_test(action_values),
      cmocka_unit_test(bad_inputs),
      cmocka_unit_test(long_line_and_missing_file),
      cmocka_unit_test(cards_checked_against_capacity),
      cmocka_unit_test(plan_per_card),
      cmocka_unit_test(tenant_selection), cmocka_unit_test(card_identity),
      cmocka_unit_test(error_policy),
      cmocka_unit_test(load_from_env),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}

/* `vramshim check` and `vramshim status` as a user runs them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "config.h"
#include "json.h"
#include "ledger.h"
#include "plan.h"
#include "tenant_test.h"

/* The fixture's folders (tt_ledger_setup, tenant_test.h). */
static char *const g_tmp = tt_tmp, *const g_dir = tt_ledger_dir;

/* Runs the tool with args (stderr folded into stdout); returns exit status. */
static int run_tool(const char *args, char *out, size_t len) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", VS_TOOL, args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t got = fread(out, 1, len - 1, p);
  out[got] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void check_example(void **state) {
  (void)state;
  static char out[16384];
  assert_int_equal(run_tool(VS_EXAMPLE " --card-capacity 24GiB", out, sizeof out), 0);
  assert_non_null(strstr(out, "is valid"));
  assert_non_null(strstr(out, "card 0: capacity 24.00 GiB (from --card-capacity)"));
  assert_non_null(strstr(out, "  llm                 16.00 GiB    19.00 GiB      19.00 GiB  fail               vllm\n"));
  assert_non_null(strstr(out, "  headroom             1.50 GiB\n"));
  assert_non_null(strstr(out, "  unreserved           3.00 GiB"));
  /* Too small a card: the overcommit, with file and line. */
  assert_int_equal(run_tool(VS_EXAMPLE " --card-capacity 16GiB", out, sizeof out), 1);
  assert_non_null(strstr(out, "vramshim.conf:27: reservations overcommit card 0"));
  /* No capacity: the assumption is stated. */
  assert_int_equal(run_tool(VS_EXAMPLE, out, sizeof out), 0);
  assert_non_null(strstr(out, "no --card-capacity given"));
  /* A bad file and bad usage. */
  char path[512], args[600];
  tt_write_file(g_tmp, "bad.conf", "[tenant a]\nreserve = 1 GiB\nlimit = lots\n", path, sizeof path);
  snprintf(args, sizeof args, "check '%s'", path);
  assert_int_equal(run_tool(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "bad.conf:3: bad size 'lots' for 'limit'"));
  /* on_limit = spill:MAX in the plan: as written, and resolved on a card. */
  tt_write_file(g_tmp, "spill.conf", "[tenant s]\nlimit = 1GiB\non_limit = spill:25%\n", path, sizeof path);
  snprintf(args, sizeof args, "check '%s'", path);
  assert_int_equal(run_tool(args, out, sizeof out), 0);
  assert_non_null(strstr(out, " spill:25% "));
  snprintf(args, sizeof args, "check '%s' --card-capacity 8GiB", path);
  assert_int_equal(run_tool(args, out, sizeof out), 0);
  assert_non_null(strstr(out, "  s                         0 B     1.00 GiB       1.00 GiB  spill:2.00 GiB     -\n"));
  /* A limit of zero is valid, and said to refuse everything. */
  tt_write_file(g_tmp, "zero.conf", "[tenant z]\nreserve = 0\nlimit = 0%\n[tenant y]\nlimit = 1 MiB\n", path,
                sizeof path);
  snprintf(args, sizeof args, "check '%s'", path);
  assert_int_equal(run_tool(args, out, sizeof out), 0);
  assert_non_null(strstr(out, "zero.conf:3: [tenant z] limit = 0: every device allocation"));
  assert_null(strstr(out, "[tenant y] limit"));
  assert_int_equal(run_tool("check", out, sizeof out), 2);
  assert_int_equal(run_tool(VS_EXAMPLE " --card-capacity 10%", out, sizeof out), 2);
}

static void status_views(void **state) {
  (void)state;
  static char out[65536];
  char args[600];
  snprintf(args, sizeof args, "status --ledger-dir '%s'", g_dir);
  assert_int_equal(run_tool(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "vramshim: no ledger"));

  vs_plan plan;
  char err[VS_ERR_MAX];
  tt_make_plan(&plan, "[card 0]\nheadroom = 1GiB\n[tenant a]\nreserve = 4GiB\nlimit = 6GiB\n"
                      "warn_at = 50%\n[tenant b]\nreserve = 2GiB\n", 16 * GiB);
  vs_ledger *a = vs_ledger_open(g_dir, "0", &plan, "a", err, sizeof err);
  vs_ledger *b = vs_ledger_open(g_dir, "0", &plan, "b", err, sizeof err);
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(vs_ledger_charge(a, 4 * GiB, NULL), 0);
  vs_ledger_set_live(a, 3 * GiB);
  assert_int_equal(vs_ledger_charge(b, 512 * MiB, NULL), 0);

  assert_int_equal(run_tool(args, out, sizeof out), 0);
  assert_non_null(strstr(out, "card 0: capacity 16.00 GiB, headroom 1.00 GiB"));
  assert_non_null(strstr(out, "  a                    4.00 GiB     6.00 GiB     4.00 GiB     4.00 GiB   25.0%      1\n"));
  assert_non_null(strstr(out, "  b                    2.00 GiB         none   512.00 MiB"));
  assert_non_null(strstr(out, "4.00 GiB     3.00 GiB"));

  /* JSON: parsed (the project's strict parser), values compared; its
   * schema is checked by tests/outputs. */
  snprintf(args, sizeof args, "status --ledger-dir '%s' --json --events", g_dir);
  assert_int_equal(run_tool(args, out, sizeof out), 0);
  vs_json doc;
  char jerr[256];
  assert_int_equal(vs_json_parse(out, strlen(out), &doc, jerr, sizeof jerr), 0);
  const vs_json *v = vs_json_get(&doc, "schema_version");
  assert_true(v && v->type == VS_JSON_STRING && !strncmp(v->str, "1.", 2));
  const vs_json *cards = vs_json_get(&doc, "cards");
  assert_true(cards && cards->type == VS_JSON_ARRAY && cards->n == 1);
  const vs_json *tenants = vs_json_get(&cards->items[0], "tenants");
  assert_true(tenants && tenants->type == VS_JSON_ARRAY && tenants->n == 2);
  const vs_json *ta = &tenants->items[0], *tb = &tenants->items[1];
  uint64_t u;
  assert_string_equal(vs_json_get(ta, "name")->str, "a");
  assert_true(vs_json_u64(vs_json_get(ta, "reserve"), &u) == 0 && u == 4 * GiB);
  assert_true(vs_json_u64(vs_json_get(ta, "limit"), &u) == 0 && u == 6 * GiB);
  assert_true(vs_json_u64(vs_json_get(ta, "used"), &u) == 0 && u == 4 * GiB);
  assert_string_equal(vs_json_get(tb, "name")->str, "b");
  assert_int_equal(vs_json_get(tb, "limit")->type, VS_JSON_NULL);
  const vs_json *events = vs_json_get(&cards->items[0], "events");
  assert_true(events && events->type == VS_JSON_ARRAY && events->n >= 1);
  int warned = 0;
  for (size_t e = 0; e < events->n; e++) warned |= !strcmp(vs_json_get(&events->items[e], "kind")->str, "warn");
  assert_true(warned);
  vs_json_free(&doc);

  snprintf(args, sizeof args, "status --ledger-dir '%s' --prometheus", g_dir);
  assert_int_equal(run_tool(args, out, sizeof out), 0);
  assert_non_null(strstr(out, "# TYPE vramshim_tenant_used_bytes gauge\n"));
  assert_non_null(strstr(out, "vramshim_tenant_used_bytes{card=\"0\",tenant=\"a\"} 4294967296\n"));
  assert_non_null(strstr(out, "vramshim_card_capacity_bytes{card=\"0\"} 17179869184\n"));
  assert_null(strstr(out, "vramshim_tenant_limit_bytes{card=\"0\",tenant=\"b\"}"));
  assert_non_null(strstr(out, "vramshim_events_recent{card=\"0\",kind=\"warn\"} 1\n"));

  /* A second config generation shows as a note. */
  vs_plan plan2 = plan;
  plan2.generation ^= 1;
  vs_ledger *a2 = vs_ledger_open(g_dir, "0", &plan2, "a", err, sizeof err);
  snprintf(args, sizeof args, "status --ledger-dir '%s' --events", g_dir);
  assert_int_equal(run_tool(args, out, sizeof out), 0);
  assert_non_null(strstr(out, "note: processes on this card run 2 different config generations"));
  assert_non_null(strstr(out, " warn "));
  vs_ledger_close(a2);
  vs_ledger_close(a);
  vs_ledger_close(b);
}

int main(void) {
  unsetenv("VRAMSHIM_CONFIG");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(check_example, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(status_views, tt_ledger_setup, tt_ledger_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The session the shim uses: config from the environment, tenant selection,
 * per-card ledgers, trim before refusing, wait mode, warn hook, exit 78,
 * passthrough, fork. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ledger_read.h"
#include "session.h"
#include "tenant_test.h"

static char g_tmp[256], g_conf[512];

static void write_conf(const char *body) {
  char text[2048];
  snprintf(text, sizeof text, "[global]\nledger_dir = %s/ledger\n%s", g_tmp, body);
  tt_write_file(g_tmp, "vs.conf", text, g_conf, sizeof g_conf);
  setenv("VRAMSHIM_CONFIG", g_conf, 1);
}

/* An arena with `cached` bytes it can give back. */
struct arena {
  vs_tenant_session *s;
  uint64_t cached;
  int trims, warns;
  uint64_t warn_used;
};
static uint64_t trim(void *arg, int card, uint64_t want) {
  struct arena *a = arg;
  uint64_t give = a->cached < want ? a->cached : want;
  a->cached -= give;
  a->trims++;
  vs_tenant_release(a->s, card, give);
  return give;
}
static void warn(void *arg, int card, uint64_t used) {
  struct arena *a = arg;
  (void)card;
  a->warns++;
  a->warn_used = used;
}

static void admit_trim_warn_view(void **state) {
  (void)state;
  write_conf("[card 0]\nheadroom = 100\n[tenant llm]\nreserve = 400\nlimit = 600\nwarn_at = 50%\n"
             "[tenant other]\nreserve = 200\n");
  setenv("VRAMSHIM_TENANT", "llm", 1);
  vs_tenant_session *s = vs_tenant_init(NULL);
  assert_non_null(s);
  assert_true(vs_tenant_enforcing(s));
  assert_string_equal(vs_tenant_name(s), "llm");
  struct arena a = {s, 0, 0, 0, 0};
  vs_tenant_set_hooks(s, trim, warn, &a);
  assert_non_null(vs_tenant_card(s, 0, NULL, 1000));
  uint64_t f, t;
  assert_int_equal(vs_tenant_view(s, 0, 0, &f, &t), 0);
  assert_int_equal(t, 600); /* min(600, 1000 - 100 - 200) */
  assert_int_equal(f, 600);
  assert_int_equal(vs_tenant_admit(s, 0, 250), 0);
  assert_int_equal(a.warns, 0);
  assert_int_equal(vs_tenant_admit(s, 0, 250), 0); /* crosses 300 */
  assert_int_equal(a.warns, 1);
  assert_int_equal(a.warn_used, 500);
  a.cached = 150; /* 150 of the 500 are the arena's cache */
  assert_int_equal(vs_tenant_view(s, 0, a.cached, &f, &t), 0);
  assert_int_equal(f, 100 + 150);
  /* 200 more: over the limit until the arena trims. */
  assert_int_equal(vs_tenant_admit(s, 0, 200), 0);
  assert_int_equal(a.trims, 1);
  assert_int_equal(a.cached, 0);
  /* Nothing left to trim: refused (fail mode). */
  assert_int_equal(vs_tenant_admit(s, 0, 100), 1);
  assert_int_equal(a.trims, 2);
  /* A card never opened (or not enforced) admits everything; no view. */
  assert_int_equal(vs_tenant_admit(s, 5, 1 << 30), 0);
  assert_int_equal(vs_tenant_view(s, 5, 0, &f, &t), -1);
  vs_tenant_fini(s);
}

static void init_with_a_loaded_config(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX], text[512];
  snprintf(text, sizeof text, "[global]\nledger_dir = %s/ledger\n[tenant x]\nlimit = 10\non_limit = wait:50ms\n", g_tmp);
  assert_int_equal(vs_config_parse_string(text, "x.conf", cfg, err, sizeof err), 0);
  vs_tenant_session *s = vs_tenant_init_with(cfg, "x", 1);
  free(cfg);
  assert_string_equal(vs_tenant_name(s), "x");
  assert_non_null(vs_tenant_card(s, 2, NULL, 100));
  assert_int_equal(vs_tenant_admit(s, 2, 10), 0);
  assert_int_equal(vs_tenant_admit(s, 2, 1), 1);
  vs_tenant_fini(s);
  /* Not enforcing: no ledger, everything admitted. */
  vs_config *d = malloc(sizeof *d);
  vs_config_defaults(d);
  s = vs_tenant_init_with(d, NULL, 0);
  free(d);
  assert_string_equal(vs_tenant_name(s), "default");
  assert_null(vs_tenant_card(s, 0, NULL, 100));
  assert_int_equal(vs_tenant_admit(s, 0, 1000), 0);
  vs_tenant_fini(s);
}

static void wait_mode_times_out(void **state) {
  (void)state;
  write_conf("[tenant w]\nlimit = 100\non_limit = wait:300ms\n");
  setenv("VRAMSHIM_TENANT", "w", 1);
  vs_tenant_session *s = vs_tenant_init(NULL);
  assert_non_null(vs_tenant_card(s, 0, "GPU-0123abcd", 1000));
  assert_int_equal(vs_tenant_admit(s, 0, 80), 0);
  double t0 = tt_now_ms();
  assert_int_equal(vs_tenant_admit(s, 0, 30), 1);
  double waited = tt_now_ms() - t0;
  assert_true(waited >= 250 && waited < 2000);
  vs_tenant_release(s, 0, 80);
  assert_int_equal(vs_tenant_admit(s, 0, 30), 0);
  vs_tenant_fini(s);
  char path[600];
  snprintf(path, sizeof path, "%s/ledger/card-GPU-0123abcd.ledger", g_tmp);
  assert_int_equal(access(path, F_OK), 0);
}

static void match_exe_selects(void **state) {
  (void)state;
  write_conf("[tenant mine]\nmatch_exe = other, tenant_session\n");
  unsetenv("VRAMSHIM_TENANT");
  vs_tenant_session *s = vs_tenant_init("ignored");
  assert_string_equal(vs_tenant_name(s), "mine");
  vs_tenant_fini(s);
  write_conf("[tenant mine]\nmatch_exe = other\n");
  s = vs_tenant_init(NULL);
  assert_string_equal(vs_tenant_name(s), "default");
  vs_tenant_fini(s);
}

/* Runs fn in a child; returns its exit status (or -1). */
static int in_child(void (*fn)(void)) {
  pid_t pid = fork();
  if (pid == 0) {
    fn();
    _exit(0);
  }
  int st;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
static void child_init(void) {
  vs_tenant_session *s = vs_tenant_init(NULL);
  _exit(s && !vs_tenant_enforcing(s) ? 40 : 41);
}
static void child_card(void) {
  vs_tenant_session *s = vs_tenant_init(NULL);
  vs_ledger *h = vs_tenant_card(s, 0, NULL, 1000);
  _exit(h ? 42 : vs_tenant_admit(s, 0, 5000) == 0 && vs_tenant_view(s, 0, 0, NULL, NULL) == -1 ? 43 : 44);
}

static void errors_exit_78_or_passthrough(void **state) {
  (void)state;
  unsetenv("VRAMSHIM_ON_ERROR");
  setenv("VRAMSHIM_LOG", "error", 1);
  write_conf("[tenant a]\nlimits = 1GiB\n");
  assert_int_equal(in_child(child_init), 78);
  setenv("VRAMSHIM_ON_ERROR", "passthrough", 1);
  assert_int_equal(in_child(child_init), 40);
  /* Overcommitted once the card's real capacity is known. */
  unsetenv("VRAMSHIM_ON_ERROR");
  write_conf("[tenant a]\nreserve = 2000\n");
  assert_int_equal(in_child(child_card), 78);
  setenv("VRAMSHIM_ON_ERROR", "passthrough", 1);
  assert_int_equal(in_child(child_card), 43);
  unsetenv("VRAMSHIM_ON_ERROR");
  setenv("VRAMSHIM_CONFIG", "/nonexistent/vramshim.conf", 1);
  assert_int_equal(in_child(child_init), 78);
  unsetenv("VRAMSHIM_LOG");
}

static void fork_child_takes_its_own_slot(void **state) {
  (void)state;
  write_conf("[tenant f]\nlimit = 1000\n");
  setenv("VRAMSHIM_TENANT", "f", 1);
  vs_tenant_session *s = vs_tenant_init(NULL);
  assert_non_null(vs_tenant_card(s, 0, NULL, 10000));
  assert_int_equal(vs_tenant_admit(s, 0, 600), 0);
  int p[2], q[2];
  assert_int_equal(pipe(p), 0);
  assert_int_equal(pipe(q), 0);
  pid_t pid = fork();
  if (pid == 0) {
    /* The tenant's 600 are the parent's: 400 more fit, 401 do not. */
    int bad = vs_tenant_admit(s, 0, 401) != 1 || vs_tenant_admit(s, 0, 400) != 0;
    char c = (char)bad;
    if (write(p[1], &c, 1) != 1 || read(q[0], &c, 1) != 1) bad = 1;
    vs_tenant_fini(s);
    _exit(bad);
  }
  char c;
  assert_int_equal(read(p[0], &c, 1), 1);
  assert_int_equal(c, 0);
  vs_ledger_snapshot *snap = malloc(sizeof *snap);
  char err[VS_ERR_MAX], dir[400];
  snprintf(dir, sizeof dir, "%s/ledger", g_tmp);
  assert_int_equal(vs_ledger_snapshot_read(dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->nprocs, 2);
  assert_int_equal(snap->tenants[0].used, 1000);
  assert_int_equal(write(q[1], "x", 1), 1);
  int st;
  waitpid(pid, &st, 0);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* The parent's slot is intact. */
  assert_int_equal(vs_tenant_admit(s, 0, 401), 1);
  assert_int_equal(vs_tenant_admit(s, 0, 400), 0);
  free(snap);
  vs_tenant_fini(s);
  close(p[0]), close(p[1]), close(q[0]), close(q[1]);
}

/* The steps the shim uses: a quiet try, a wait that charges nothing, one
 * report; a forced charge; no config file still means a ledger. */
static void steps_for_the_shim(void **state) {
  (void)state;
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX], text[512];
  /* A wait far longer than the test: a step that waited where it must not
   * would show as a time past TT_EVENTUALLY_MS. */
  snprintf(text, sizeof text, "[global]\nledger_dir = %s/ledger\n[tenant s]\nlimit = 100\non_limit = wait:2min\n", g_tmp);
  assert_int_equal(vs_config_parse_string(text, "s.conf", cfg, err, sizeof err), 0);
  vs_tenant_session *s = vs_tenant_init_with(cfg, "s", 1);
  assert_int_equal(vs_tenant_wait_ms(s), 120000);
  assert_int_equal(vs_tenant_card_open(s, 1), 0);
  assert_non_null(vs_tenant_card(s, 1, NULL, 1000));
  assert_int_equal(vs_tenant_card_open(s, 1), 1);
  vs_refusal why;
  assert_int_equal(vs_tenant_try(s, 1, 80, &why), 0);
  double t0 = tt_now_ms();
  assert_int_equal(vs_tenant_try(s, 1, 30, &why), 1); /* never waits */
  assert_true(tt_now_ms() - t0 < TT_EVENTUALLY_MS);
  assert_int_equal(why.kind, VS_REFUSE_LIMIT);
  assert_int_equal(why.used, 80);
  /* A request above the limit never fits: no wait. */
  t0 = tt_now_ms();
  assert_int_equal(vs_tenant_wait_fit(s, 1, 200, UINT64_MAX, &why), 1);
  assert_true(tt_now_ms() - t0 < TT_EVENTUALLY_MS);
  /* Another process of the tenant gives back: the waiter wakes, charges
   * nothing. The child says when it holds its 20 (a pipe) and when it gave
   * them back (a shared page), so the test does not depend on timing. */
  volatile double *released_at = mmap(NULL, sizeof *released_at, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(released_at != MAP_FAILED);
  *released_at = 0;
  int holds[2];
  assert_int_equal(pipe(holds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(holds[0]);
    vs_tenant_session *c = vs_tenant_init_with(cfg, "s", 1);
    if (!vs_tenant_card(c, 1, NULL, 1000) || vs_tenant_try(c, 1, 20, NULL) != 0) _exit(2);
    if (write(holds[1], "h", 1) != 1) _exit(3);
    usleep(300000);
    *released_at = tt_now_ms();
    vs_tenant_release(c, 1, 20);
    usleep(300000);
    _exit(0);
  }
  close(holds[1]);
  char c;
  assert_int_equal(read(holds[0], &c, 1), 1); /* the child holds its 20 */
  close(holds[0]);
  assert_int_equal(vs_tenant_waiters(s, 1), 0);
  vs_tenant_release(s, 1, 70); /* we hold 10, the child 20 */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  assert_int_equal(vs_tenant_wait_fit(s, 1, 85, now + TT_EVENTUALLY_MS * 1000000ull, &why), 0);
  double woke = tt_now_ms(), at = *released_at;
  print_message("a waiter woke %.1f ms after another process gave back\n", woke - at);
  assert_true(at > 0 && woke >= at); /* woken by the release, not before it */
  assert_int_equal(vs_tenant_try(s, 1, 85, &why), 0); /* the wait charged nothing */
  assert_int_equal(vs_tenant_try(s, 1, 10, &why), 1);
  /* Timeout: kind TIMEOUT, cause the condition. */
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t watcher = fork();
  if (watcher == 0) { /* sees the waiter from another process */
    close(ready[0]);
    vs_tenant_session *c = vs_tenant_init_with(cfg, "s", 1);
    if (!vs_tenant_card(c, 1, NULL, 1000)) _exit(2);
    if (write(ready[1], "r", 1) != 1) _exit(4);
    for (double w0 = tt_now_ms(); tt_now_ms() - w0 < TT_EVENTUALLY_MS; usleep(1000))
      if (vs_tenant_waiters(c, 1) == 1) _exit(0);
    _exit(3);
  }
  close(ready[1]);
  assert_int_equal(read(ready[0], &c, 1), 1); /* the watcher is looking */
  close(ready[0]);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  assert_int_equal(vs_tenant_wait_fit(s, 1, 10, now + 1000000000ull, &why), 1);
  int wst = 0;
  waitpid(watcher, &wst, 0);
  assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
  assert_int_equal(vs_tenant_waiters(s, 1), 0);
  assert_int_equal(why.kind, VS_REFUSE_TIMEOUT);
  assert_int_equal(why.cause, VS_REFUSE_LIMIT);
  vs_tenant_report(s, 1, &why);
  int st = 0;
  waitpid(pid, &st, 0);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  munmap((void *)released_at, sizeof *released_at);
  /* Forced: above the limit, counted. */
  vs_tenant_force(s, 1, 50);
  vs_ledger_snapshot *snap = malloc(sizeof *snap);
  char dir[600];
  snprintf(dir, sizeof dir, "%s/ledger", g_tmp);
  assert_int_equal(vs_ledger_snapshot_read(dir, "1", snap, err, sizeof err), 0);
  assert_int_equal(snap->tenants[0].used, 95 + 50);
  int limit_events = 0;
  for (int i = 0; i < snap->nevents; i++) limit_events += !strcmp(snap->events[i].kind, "limit");
  assert_int_equal(limit_events, 1);
  vs_tenant_fini(s);
  free(cfg);

  /* No config file: defaults, tenant default, a ledger all the same. */
  vs_config *d = malloc(sizeof *d);
  vs_config_defaults(d);
  snprintf(d->ledger_dir, sizeof d->ledger_dir, "%.200s/ledger2", g_tmp);
  s = vs_tenant_init_with(d, NULL, 1);
  assert_non_null(vs_tenant_card(s, 0, "GPU-77", 1000));
  assert_int_equal(vs_tenant_try(s, 0, 1000, NULL), 0);
  assert_int_equal(vs_tenant_try(s, 0, 1, &why), 1);
  assert_int_equal(why.kind, VS_REFUSE_CAPACITY);
  snprintf(dir, sizeof dir, "%s/ledger2", g_tmp);
  assert_int_equal(vs_ledger_snapshot_read(dir, "GPU-77", snap, err, sizeof err), 0);
  assert_int_equal(snap->nprocs, 1);
  assert_string_equal(snap->procs[0].tenant, "default");
  vs_tenant_fini(s);
  free(d);
  free(snap);
}

static int setup(void **state) {
  (void)state;
  tt_tempdir(g_tmp, sizeof g_tmp);
  unsetenv("VRAMSHIM_ON_ERROR");
  return 0;
}
static int teardown(void **state) {
  (void)state;
  tt_rmdir(g_tmp);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(admit_trim_warn_view, setup, teardown),
      cmocka_unit_test_setup_teardown(init_with_a_loaded_config, setup, teardown),
      cmocka_unit_test_setup_teardown(wait_mode_times_out, setup, teardown),
      cmocka_unit_test_setup_teardown(match_exe_selects, setup, teardown),
      cmocka_unit_test_setup_teardown(errors_exit_78_or_passthrough, setup, teardown),
      cmocka_unit_test_setup_teardown(fork_child_takes_its_own_slot, setup, teardown),
      cmocka_unit_test_setup_teardown(steps_for_the_shim, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

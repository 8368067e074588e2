/* Threads of one process sharing a ledger handle, with other handles
 * (other tenants) in the same process and a lock-free reader of the view. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "ledger.h"
#include "ledger_read.h"
#include "plan.h"
#include "tenant_test.h"

/* The fixture's ledger folder (tt_ledger_setup, tenant_test.h). */
static char *const g_dir = tt_ledger_dir;
static vs_plan g_plan;
static vs_ledger *g_shared;
static int g_stop, g_view_bad;

struct worker {
  vs_ledger *h;
  unsigned seed;
  uint64_t ok;
};

static void *work(void *arg) {
  struct worker *w = arg;
  for (int i = 0; i < 20000; i++) {
    uint64_t n = 1 + rand_r(&w->seed) % 3000;
    if (vs_ledger_charge(w->h, n, NULL) == 0) {
      w->ok++;
      vs_ledger_uncharge(w->h, n);
    }
  }
  return NULL;
}

static void *viewer(void *arg) {
  (void)arg;
  while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
    uint64_t f, t;
    vs_ledger_view(g_shared, 0, &f, &t);
    if (f > t) __atomic_store_n(&g_view_bad, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

/* A waiter thread is admitted when another thread of the process frees. */
static void *waiter(void *arg) {
  vs_ledger *h = arg;
  vs_refusal why;
  intptr_t r = vs_ledger_wait_charge(h, 60000, 5000, &why);
  return (void *)r;
}

static void threads_share_a_handle(void **state) {
  (void)state;
  char err[VS_ERR_MAX];
  tt_make_plan(&g_plan, "[tenant a]\nreserve = 40000\nlimit = 60000\n[tenant b]\nreserve = 20000\n", 100000);
  g_shared = vs_ledger_open(g_dir, "0", &g_plan, "a", err, sizeof err);
  vs_ledger *hb = vs_ledger_open(g_dir, "0", &g_plan, "b", err, sizeof err);
  vs_ledger *hc = vs_ledger_open(g_dir, "0", &g_plan, "c", err, sizeof err);
  assert_non_null(g_shared);
  assert_non_null(hb);
  assert_non_null(hc);
  struct worker w[6] = {{g_shared, 1, 0}, {g_shared, 2, 0}, {g_shared, 3, 0}, {g_shared, 4, 0}, {hb, 5, 0}, {hc, 6, 0}};
  pthread_t t[6], v;
  pthread_create(&v, NULL, viewer, NULL);
  for (int i = 0; i < 6; i++) pthread_create(&t[i], NULL, work, &w[i]);
  for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
  __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
  pthread_join(v, NULL);
  assert_false(g_view_bad);
  for (int i = 0; i < 6; i++) assert_true(w[i].ok > 0);
  assert_int_equal(vs_ledger_held(g_shared), 0);
  assert_int_equal(vs_ledger_held(hb), 0);

  /* c holds 30000 of what a may take (100000 - 20000 reserved for b): a's
   * waiter for 60000 needs c to free. */
  assert_int_equal(vs_ledger_charge(hc, 30000, NULL), 0);
  pthread_t wt;
  pthread_create(&wt, NULL, waiter, g_shared);
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL);
  vs_ledger_uncharge(hc, 30000);
  void *r;
  pthread_join(wt, &r);
  assert_int_equal((intptr_t)r, 0);
  assert_int_equal(vs_ledger_held(g_shared), 60000);

  vs_ledger_snapshot *snap = malloc(sizeof *snap);
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->tenants[0].recorded, 60000);
  assert_int_equal(snap->nprocs, 3);
  free(snap);
  vs_ledger_close(g_shared);
  vs_ledger_close(hb);
  vs_ledger_close(hc);
}


/* Tenant entries reused (the table full) while threads of the process charge
 * and a lock-free reader takes the view on a handle whose tenant stays: the
 * reuse is a write section like any other (TSan checks the readers), and the
 * handle keeps charging its own tenant. */
static void reuse_under_readers(void **state) {
  (void)state;
  char err[VS_ERR_MAX], name[32];
  tt_make_plan(&g_plan, "[tenant a]\nreserve = 40000\nlimit = 60000\n", 100000);
  g_stop = 0;
  g_view_bad = 0;
  g_shared = vs_ledger_open(g_dir, "0", &g_plan, "a", err, sizeof err);
  assert_non_null(g_shared);
  struct worker w[2] = {{g_shared, 7, 0}, {g_shared, 8, 0}};
  pthread_t t[2], v;
  pthread_create(&v, NULL, viewer, NULL);
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, &w[i]);
  int opened = 0;
  for (int i = 0; i < 200; i++) {
    snprintf(name, sizeof name, "n-%d", i);
    vs_ledger *h = vs_ledger_open(g_dir, "0", &g_plan, name, err, sizeof err);
    if (!h) fail_msg("tenant %s: %s", name, err);
    if (vs_ledger_charge(h, 100, NULL) == 0) vs_ledger_uncharge(h, 100);
    vs_ledger_close(h);
    opened++;
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
  pthread_join(v, NULL);
  assert_int_equal(opened, 200);
  assert_false(g_view_bad);
  for (int i = 0; i < 2; i++) assert_true(w[i].ok > 0);
  assert_int_equal(vs_ledger_charge(g_shared, 1234, NULL), 0);
  vs_ledger_snapshot *snap = malloc(sizeof *snap);
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->ntenants, 64);
  assert_string_equal(snap->tenants[0].name, "a");
  assert_int_equal(snap->tenants[0].used, 1234);
  assert_int_equal(snap->tenants[0].recorded, 1234);
  int newest = 0;
  for (int k = 0; k < snap->ntenants; k++) newest |= !strcmp(snap->tenants[k].name, "n-199");
  assert_true(newest);
  free(snap);
  vs_ledger_close(g_shared);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(threads_share_a_handle, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(reuse_under_readers, tt_ledger_setup, tt_ledger_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit test of the tenant's view (quota.c, view()) and its second reading
 * of the books: a growth this process charges while the view walks its
 * arenas, and frees into their cache before the walk finds it, must not
 * count twice (once in the room read before the charge, once as cache).
 * The arenas are a stand-in registered with vs_quota_set_cache: its walk
 * charges the growth itself (as another thread would in that instant) and
 * reports it as cache. Linked with the static interposer library over the
 * simulated driver (VS_SIM_LIBCUDA, no preload); the books are a real
 * ledger in a folder of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "driver_table.h"
#include "interpose.h"
#include "quota.h"
#include "served.h"

/* quota.c's exit check pulls in the platform's interposition (its dlsym
 * override and load-time constructor), which call back into the shim's
 * entry layer, not linked here: nothing to hook, nothing to start. */
void *vs_shim_lookup(const char *name) { (void)name; return NULL; }
void *vs_shim_hook_for(const char *name) { (void)name; return NULL; }
void vs_shim_start(void) {}
void vs_shim_exit(void) {}

#define MiB (1ull << 20)
#define LIMIT (1024 * MiB)
#define LIVE (256 * MiB)
#define GROWTH (128 * MiB)

static uint64_t g_growth;   /* charged during the walk when nonzero */
static int g_walks;

static uint64_t walk_one_piece(int card, uint64_t room) {
  g_walks++;
  if (!g_growth) return room;
  assert_int_equal(vs_quota_charge(card, g_growth), CUDA_SUCCESS);
  return room + g_growth;   /* the growth, freed meanwhile, is the arenas' cache */
}
static void walk_trim(int card, uint64_t keep) { (void)card, (void)keep; }
static uint64_t walk_reclaimable(int card) { (void)card; return 0; }

static uint64_t view_free(void) {
  uint64_t f = 0, t = 0;
  /* The driver's own figures far above the books: the books bind. */
  assert_int_equal(vs_quota_view_driver(0, 64 * 1024 * MiB, 64 * 1024 * MiB, &f, &t), VS_MEM_DONE);
  assert_int_equal(t, LIMIT);
  return f;
}

/* Nothing charged meanwhile: the room as the books give it. */
static void view_quiet(void **s) {
  (void)s;
  g_growth = 0;
  g_walks = 0;
  assert_int_equal(view_free(), LIMIT - LIVE);
  assert_int_equal(g_walks, 1);
}

/* A growth charged during the walk and found there as cache: what one
 * allocation can have is still the limit less what is live, not more. */
static void view_growth_during_walk(void **s) {
  (void)s;
  g_growth = GROWTH;
  g_walks = 0;
  assert_int_equal(view_free(), LIMIT - LIVE);
  assert_int_equal(g_walks, 1);
  vs_quota_uncharge(0, GROWTH);
  g_growth = 0;
  assert_int_equal(view_free(), LIMIT - LIVE);
}

static char g_dir[] = "/tmp/vs-unit-view-XXXXXX";

static int setup(void **s) {
  (void)s;
  if (!mkdtemp(g_dir)) return -1;
  char conf[96], path[128];
  snprintf(conf, sizeof conf, "%s/vramshim.conf", g_dir);
  FILE *f = fopen(conf, "w");
  if (!f) return -1;
  fprintf(f, "[global]\nledger_dir = %s/ledger\narena = off\n\n[tenant default]\nlimit = 1GiB\n", g_dir);
  fclose(f);
  setenv("VRAMSHIM_CONFIG", conf, 1);
  snprintf(path, sizeof path, "%s/sim.state", g_dir);
  setenv("VRAMSIM_STATE", path, 1);
  setenv("VRAMSIM_CARDS", "8GiB", 1);
  const vs_real_table *real = vs_driver();
  if (!real || real->cuInit(0) != CUDA_SUCCESS) return -1;
  static const vs_quota_cache walk = {walk_one_piece, walk_trim, walk_reclaimable};
  vs_quota_set_cache(&walk);
  return vs_quota_charge(0, LIVE) == CUDA_SUCCESS ? 0 : -1;
}

static int teardown(void **s) {
  (void)s;
  vs_quota_uncharge(0, LIVE);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  setenv("VRAMSHIM_DRIVER", VS_SIM_LIBCUDA, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(view_quiet),
      cmocka_unit_test(view_growth_during_walk),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}

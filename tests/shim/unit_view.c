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
#include "unit_over_sim.h"

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
  if (unit_over_sim_setup(g_dir, "off", "1GiB")) return -1;
  static const vs_quota_cache walk = {walk_one_piece, walk_trim, walk_reclaimable};
  vs_quota_set_cache(&walk);
  return vs_quota_charge(0, LIVE) == CUDA_SUCCESS ? 0 : -1;
}

static int teardown(void **s) {
  (void)s;
  vs_quota_uncharge(0, LIVE);
  return unit_over_sim_teardown(g_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(view_quiet),
      cmocka_unit_test(view_growth_during_walk),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}

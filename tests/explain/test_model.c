/* The dump model's derived figures against a hand-computed state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "layout.h"

static void test_histogram_largest_fragmentation(void **state) {
  (void)state;
  vs_dump d;
  vs_dump_init(&d, 1, "x", "t", NULL, 0);
  vs_dump_card *c = vs_dump_add_card(&d, 0);
  layout_walk(c);
  assert_int_equal(c->nregions, 3);
  assert_int_equal(c->regions[0].nblocks, 6);
  assert_int_equal(c->regions[1].kind, VS_DUMP_REGION_SLAB);
  assert_int_equal(c->regions[1].class_size, 512 * KiB);
  vs_dump_card_derive_free(c);
  for (unsigned i = 0; i < VS_DUMP_HIST_BUCKETS; i++) {
    uint64_t count = 0, bytes = 0;
    if (i == 19) count = 2, bytes = 1 * MiB;
    if (i == 21) count = 1, bytes = 3 * MiB;
    if (i == 22) count = 1, bytes = 4 * MiB;
    if (i == 25) count = 1, bytes = 32 * MiB;
    assert_int_equal(c->hist_count[i], count);
    assert_int_equal(c->hist_bytes[i], bytes);
  }
  assert_int_equal(c->free_bytes, 44 * MiB);
  assert_int_equal(c->pending_bytes, 4 * MiB);
  assert_int_equal(c->largest_free, 32 * MiB);
  assert_true(c->external_fragmentation > 1.0 - 32.0 / 44.0 - 1e-12);
  assert_true(c->external_fragmentation < 1.0 - 32.0 / 44.0 + 1e-12);
  char err[128];
  assert_int_equal(vs_dump_check(&d, err, sizeof err), 0);
  vs_dump_free(&d);
}

static void test_bucket_and_fragmentation_edges(void **state) {
  (void)state;
  assert_int_equal(vs_dump_bucket(1), 0);
  assert_int_equal(vs_dump_bucket(511), 8);
  assert_int_equal(vs_dump_bucket(512), 9);
  assert_int_equal(vs_dump_bucket(UINT64_MAX), VS_DUMP_HIST_BUCKETS - 1);
  assert_true(vs_dump_fragmentation(0, 0) == 0.0);          /* nothing free */
  assert_true(vs_dump_fragmentation(100, 100) == 0.0);      /* one extent */
  assert_true(vs_dump_fragmentation(25, 100) == 0.75);
}

static void test_arena_off_allocations(void **state) {
  (void)state;
  vs_dump d;
  vs_dump_init(&d, 1, "x", "t", NULL, 0);
  vs_dump_card *c = vs_dump_add_card(&d, 1);
  /* Unsorted on purpose: the builder orders regions by address. */
  vs_dump_alloc allocs[] = {{0x7000200000, 3 * MiB}, {0x7000000000, 1 * MiB}, {0x7000100000, 512}};
  assert_int_equal(vs_dump_card_from_allocations(c, allocs, 3), 0);
  assert_string_equal(c->arena, "off");
  assert_int_equal(c->nregions, 3);
  assert_int_equal(c->regions[0].base, 0x7000000000);
  assert_int_equal(c->regions[2].size, 3 * MiB);
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(c->regions[i].kind, VS_DUMP_REGION_ALLOCATION);
    assert_int_equal(c->regions[i].nblocks, 1);
    assert_int_equal(c->regions[i].blocks[0].state, VS_DUMP_LIVE);
  }
  assert_int_equal(c->live_bytes, 4 * MiB + 512);
  assert_int_equal(c->reserved_bytes, 4 * MiB + 512);
  assert_int_equal(c->live_count, 3);
  assert_int_equal(c->free_bytes, 0);
  assert_int_equal(c->largest_free, 0);
  assert_true(c->external_fragmentation == 0.0);
  vs_dump_free(&d);
}

static void test_check_refuses_overlap(void **state) {
  (void)state;
  vs_dump d;
  char err[160];
  vs_dump_init(&d, 1, "x", "t", NULL, 0);
  vs_dump_card *c = vs_dump_add_card(&d, 0);
  vs_dump_region *r = vs_dump_card_add_region(c, 0x1000, 4096, VS_DUMP_REGION_CHUNK, 0);
  vs_dump_region_add_block(r, 0, 2048, VS_DUMP_LIVE);
  vs_dump_region_add_block(r, 1024, 1024, VS_DUMP_FREE);
  assert_int_equal(vs_dump_check(&d, err, sizeof err), -1);
  assert_non_null(strstr(err, "overlaps"));
  r->blocks[1].offset = 2048;
  r->blocks[1].size = 4096;
  assert_int_equal(vs_dump_check(&d, err, sizeof err), -1);
  assert_non_null(strstr(err, "past the region"));
  r->blocks[1].size = 2048;
  assert_int_equal(vs_dump_check(&d, err, sizeof err), 0);
  /* A slab carved from the heap: inside the live block, accepted. */
  vs_dump_region *slab = vs_dump_card_add_region(c, 0x1200, 1024, VS_DUMP_REGION_SLAB, 512);
  vs_dump_region_add_block(slab, 0, 512, VS_DUMP_LIVE);
  assert_int_equal(vs_dump_check(&d, err, sizeof err), 0);
  /* Reaching into the free block: refused. */
  slab->base = 0x1600;
  assert_int_equal(vs_dump_check(&d, err, sizeof err), -1);
  assert_non_null(strstr(err, "overlap"));
  slab->base = 0x1200;
  vs_dump_card_add_region(c, 0x1800, 4096, VS_DUMP_REGION_CHUNK, 0);
  assert_int_equal(vs_dump_check(&d, err, sizeof err), -1);
  assert_non_null(strstr(err, "overlap"));
  vs_dump_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_histogram_largest_fragmentation),
      cmocka_unit_test(test_bucket_and_fragmentation_edges),
      cmocka_unit_test(test_arena_off_allocations),
      cmocka_unit_test(test_check_refuses_overlap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

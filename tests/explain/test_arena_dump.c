/* Dumps of a real arena (over the simulated address space): the map is
 * consistent, every live allocation is a live block where the arena says
 * it is, and in chunks mode the histogram the map gives equals the
 * arena's own. The written JSON reads back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_build.h"
#include "dump_json.h"
#include "space_backend.h"
#include "stats.h"

#define MiB (1ull << 20)
#define N 600

static uint64_t rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static const vs_dump_block *find_live(const vs_dump_card *c, uint64_t base, uint64_t off) {
  for (size_t i = 0; i < c->nregions; i++) {
    const vs_dump_region *r = &c->regions[i];
    if (r->base > base + off || base + off >= r->base + r->size) continue;
    for (size_t j = 0; j < r->nblocks; j++)
      if (r->base + r->blocks[j].offset == base + off && r->blocks[j].state == VS_DUMP_LIVE) return &r->blocks[j];
  }
  return NULL;
}

static void run(int vmm) {
  vs_space_backend *sb = vs_space_backend_create(4096 * MiB, 0);
  vs_arena_backend be = vs_space_backend_get_mode(sb, vmm);
  vs_arena_config cfg = {vmm ? VS_ARENA_VMM : VS_ARENA_CHUNKS, 256 * MiB};
  vs_arena *a = vs_arena_create(&cfg, &be);
  assert_non_null(a);
  uint64_t addr[N], size[N], seed = 42 + (uint64_t)vmm;
  for (int i = 0; i < N; i++) {
    uint64_t k = rnd(&seed) % 10;
    size[i] = k < 6 ? 256 + rnd(&seed) % 8192 : k < 9 ? (1 + rnd(&seed) % 64) * 65536 : (1 + rnd(&seed) % 24) * MiB;
    assert_int_equal(vs_arena_alloc(a, size[i], &addr[i]), 0);
  }
  for (int i = 0; i < N; i += 2) assert_int_equal(vs_arena_free(a, addr[i]), 0);
  /* A hot size class: slabs (VMM: after a slab's worth of requests, 32 of
   * 64 KiB), so the map holds a slab too; left live. */
  uint64_t hot;
  for (int i = 0; i < 40; i++) assert_int_equal(vs_arena_alloc(a, 64 << 10, &hot), 0);

  vs_dump d;
  vs_dump_init(&d, 1, "test", "default", "manual", 1);
  vs_dump_card *c = vs_dump_add_card(&d, 0);
  assert_int_equal(vs_dump_card_from_arena(c, a, vmm ? "vmm" : "chunks"), 0);
  char err[256];
  if (vs_dump_check(&d, err, sizeof err)) fail_msg("%s", err);
  assert_true(c->nregions > 0);
  for (int i = 1; i < N; i += 2) {
    uint64_t base, off;
    int vb;
    assert_int_equal(vs_arena_placement(a, addr[i], &base, &off, &vb), 0);
    const vs_dump_block *b = find_live(c, base, off);
    if (!b) fail_msg("live allocation 0x%llx (%llu B) is not a live block of the map", (unsigned long long)addr[i],
                     (unsigned long long)size[i]);
    assert_true(b->size >= size[i]);
  }
  if (!vmm) {
    /* The map's own extents are the arena's extents. */
    vs_dump_card copy = *c;
    vs_dump_card_derive_free(&copy);
    assert_memory_equal(copy.hist_count, c->hist_count, sizeof c->hist_count);
    assert_memory_equal(copy.hist_bytes, c->hist_bytes, sizeof c->hist_bytes);
    assert_int_equal(copy.largest_free, c->largest_free);
  }
  assert_true(c->external_fragmentation >= 0 && c->external_fragmentation <= 1);
  size_t len;
  char *text = vs_dump_to_json(&d, &len);
  vs_dump e;
  assert_int_equal(vs_dump_from_json(text, len, &e, err, sizeof err), 0);
  assert_int_equal(e.cards[0].nregions, c->nregions);
  /* EXPLAIN_ARENA_DUMP=path keeps the JSON for the schema test. */
  const char *keep = getenv("EXPLAIN_ARENA_DUMP");
  if (keep) {
    char path[512];
    snprintf(path, sizeof path, "%s-%s.json", keep, vmm ? "vmm" : "chunks");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(text, 1, len, f);
    fclose(f);
  }
  free(text);
  vs_dump_free(&e);
  vs_dump_free(&d);
  vs_arena_destroy(a);
  vs_space_backend_destroy(sb);
}

/* The one-call builder the shim uses, both ways. */
static void test_add_card_from(void **state) {
  (void)state;
  vs_space_backend *sb = vs_space_backend_create(1024 * MiB, 0);
  vs_arena_backend be = vs_space_backend_get_mode(sb, 1);
  vs_arena_config cfg = {VS_ARENA_VMM, 64 * MiB};
  vs_arena *a = vs_arena_create(&cfg, &be);
  vs_card_stats st;
  assert_int_equal(vs_card_stats_init(&st, 8), 0);
  uint64_t p1, p2;
  assert_int_equal(vs_arena_alloc(a, 3 * MiB, &p1), 0);
  vs_stats_on_call(&st, VS_CALL_MEM_CREATE);
  vs_stats_sample_arena(&st, a);
  assert_int_equal(vs_arena_alloc(a, 5000, &p2), 0);
  vs_stats_sample_arena(&st, a);
  vs_dump_tenant_use tu = {1, 512 * MiB, VS_DUMP_UNLIMITED, 10 * MiB, 0, 0, 0};
  vs_dump d;
  vs_dump_init(&d, 77, "/bin/srv", "llm", "refused", vs_now_unix_ms());
  vs_dump_card_source src = {.index = 1, .capacity = 1024 * MiB, .arena = a, .arena_mode = "vmm", .stats = &st,
                             .tenant = &tu};
  assert_int_equal(vs_dump_add_card_from(&d, &src), 0);
  vs_dump_card *c = &d.cards[0];
  assert_int_equal(c->index, 1);
  assert_string_equal(c->arena, "vmm");
  assert_int_equal(c->live_bytes, 3 * MiB + 5000);
  assert_int_equal(c->live_count, 2);
  assert_int_equal(c->nsamples, 2);
  assert_int_equal(c->samples[0].live, 3 * MiB);
  assert_int_equal(c->samples[1].live, 3 * MiB + 5000);
  assert_int_equal(c->ncalls, 1);
  assert_true(c->tenant.present && c->tenant.limit == VS_DUMP_UNLIMITED);

  /* arena = off: the list of live allocations is the map. */
  vs_card_stats st2;
  vs_card_stats_init(&st2, 8);
  vs_dump_alloc al[] = {{0x7f0000200000ull, 2 * MiB}, {0x7f0000000000ull, 1 * MiB}};
  vs_stats_on_reserve(&st2, 4 * MiB);
  vs_stats_on_alloc(&st2, 4 * MiB);
  vs_stats_on_release(&st2, 4 * MiB);
  vs_stats_on_free(&st2, 4 * MiB);
  for (int i = 0; i < 2; i++) {
    vs_stats_on_reserve(&st2, al[i].size);
    vs_stats_on_alloc(&st2, al[i].size);
  }
  vs_stats_sample_off(&st2);
  vs_dump_card_source off = {.index = 0, .allocs = al, .nallocs = 2, .stats = &st2};
  assert_int_equal(vs_dump_add_card_from(&d, &off), 0);
  c = &d.cards[1];
  assert_string_equal(c->arena, "off");
  assert_int_equal(c->nregions, 2);
  assert_int_equal(c->live_bytes, 3 * MiB);
  assert_int_equal(c->peak_live_bytes, 4 * MiB);
  assert_int_equal(c->samples[0].reserved, 3 * MiB);
  char err[256];
  assert_int_equal(vs_dump_check(&d, err, sizeof err), 0);
  vs_dump_free(&d);
  vs_card_stats_destroy(&st2);
  vs_card_stats_destroy(&st);
  vs_arena_destroy(a);
  vs_space_backend_destroy(sb);
}

static void test_chunks(void **state) { (void)state; run(0); }
static void test_vmm(void **state) { (void)state; run(1); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chunks),
      cmocka_unit_test(test_vmm),
      cmocka_unit_test(test_add_card_from),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

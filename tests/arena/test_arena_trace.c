/* The real traces (../shared/traces) through both arena modes, with the
 * invariant check every 64 events and a lookup of every allocation: the
 * arena's structures stay consistent on real workloads, and nothing is
 * refused on an unlimited backend. Skipped when the traces are absent. */
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "arena_test_util.h"

typedef struct { uint64_t key, addr, size; UT_hash_handle hh; } pmap;

static void replay(const char *name, vs_arena_mode mode) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", VS_TRACES_DIR, name);
  FILE *f = fopen(path, "r");
  if (!f) { print_message("  %s: not found, skipped\n", path); return; }
  fixture fx;
  fx_open(&fx, mode, UINT64_MAX, GiB);
  pmap *m = NULL;
  char line[512];
  uint64_t events = 0, live = 0;
  while (fgets(line, sizeof line, f)) {
    char *fld[6] = {0};
    int i = 0;
    for (char *s = line; i < 6 && s; i++) { fld[i] = s; s = strchr(s, ','); if (s) *s++ = 0; }
    if (i < 5 || !strcmp(fld[2], "Action")) continue;
    uint64_t ptr = strtoull(fld[3], NULL, 16), size = strtoull(fld[4], NULL, 10);
    pmap *e;
    if (!strcmp(fld[2], "allocate")) {
      e = calloc(1, sizeof *e);
      e->key = ptr;
      e->size = size;
      assert_int_equal(vs_arena_alloc(fx.a, size, &e->addr), 0);
      uint64_t s0, z;
      assert_int_equal(vs_arena_lookup(fx.a, e->addr + size / 2, &s0, &z), 0);
      assert_int_equal(s0, e->addr);
      assert_int_equal(z, size);
      HASH_ADD(hh, m, key, sizeof(uint64_t), e);
      live += size;
    } else if (!strcmp(fld[2], "free")) {
      HASH_FIND(hh, m, &ptr, sizeof(uint64_t), e);
      if (!e) continue;
      assert_int_equal(vs_arena_free(fx.a, e->addr), 0);
      live -= e->size;
      HASH_DEL(m, e);
      free(e);
    }
    if (++events % 64 == 0) CHECK(fx.a);
  }
  fclose(f);
  CHECK(fx.a);
  vs_arena_stats st;
  vs_arena_get_stats(fx.a, &st);
  assert_int_equal(st.live_bytes, live);
  assert_true(st.peak_reserved_bytes >= st.peak_live_bytes);
  pmap *e, *tmp;
  HASH_ITER(hh, m, e, tmp) { HASH_DEL(m, e); free(e); }
  /* destroy with blocks still live: everything goes back all the same */
  fx_close(&fx);
}

static void arena_trace_forward(void **s) {
  (void)s;
  replay("cs336-ctx128-forward.csv", VS_ARENA_VMM);
  replay("cs336-ctx128-forward.csv", VS_ARENA_CHUNKS);
}
static void arena_trace_fullstep(void **s) {
  (void)s;
  replay("cs336-ctx256-fullstep.csv", VS_ARENA_VMM);
  replay("cs336-ctx512-forward-mixed.csv", VS_ARENA_CHUNKS);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(arena_trace_forward), cmocka_unit_test(arena_trace_fullstep)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

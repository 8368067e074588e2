/* Randomized alloc/free against a shadow model, both modes, with the
 * invariant check after every step: no overlap between live blocks, every
 * lookup (start, interior, end) right, frees of anything not live refused,
 * accounting equal to the model. A capacity-limited variant exercises the
 * OOM ladder under churn. */
#include <stdlib.h>
#include <string.h>

#include "arena_test_util.h"

typedef struct { uint64_t addr, size; } blk;

static int by_addr(const void *x, const void *y) {
  const blk *a = x, *b = y;
  return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static void assert_no_overlap(blk *live, int n) {
  blk *s = malloc((size_t)(n ? n : 1) * sizeof *s);
  memcpy(s, live, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, by_addr);
  for (int i = 1; i < n; i++)
    if (s[i - 1].addr + s[i - 1].size > s[i].addr)
      fail_msg("overlap: [0x%llx,+%llu) and 0x%llx", (unsigned long long)s[i - 1].addr,
               (unsigned long long)s[i - 1].size, (unsigned long long)s[i].addr);
  free(s);
}

static uint64_t rand_size(uint64_t *seed) {
  uint64_t r = rng_next(seed);
  switch (r % 4) {
    case 0: return 1 + (r >> 8) % 4096;                 /* tiny */
    case 1: return 1 + (r >> 8) % (64 << 10);           /* small classes */
    case 2: return 1 + (r >> 8) % (8 * MiB);            /* medium */
    default: return 1 + (r >> 8) % (96 * MiB);          /* large */
  }
}

static void churn_ordered(vs_arena_mode mode, uint64_t capacity, int steps, uint64_t seed, int ordered) {
  fixture f;
  fx_open(&f, mode, capacity, 256 * MiB);
  vs_arena_set_stream_ordered(f.a, ordered);   /* frees reusable at once (docs/arena.md) */
  enum { MAXLIVE = 400 };
  blk live[MAXLIVE];
  int n = 0;
  uint64_t live_bytes = 0, ooms = 0;
  for (int step = 0; step < steps; step++) {
    uint64_t r = rng_next(&seed);
    if (n && (n == MAXLIVE || r % 100 < 45)) {
      int k = (int)((r >> 16) % (uint64_t)n);
      assert_int_equal(vs_arena_free(f.a, live[k].addr), 0);
      assert_int_equal(vs_arena_free(f.a, live[k].addr), -1);
      live_bytes -= live[k].size;
      live[k] = live[--n];
    } else {
      uint64_t size = rand_size(&seed), addr;
      int rc = vs_arena_alloc(f.a, size, &addr);
      if (rc == VS_BACKEND_OOM) {
        ooms++;
        /* Refused only when even an empty cache could not fit it. */
        vs_space_counters c;
        vs_space_backend_counters(f.sb, &c);
        uint64_t g = mode == VS_ARENA_VMM ? 2 * MiB : 512, need = (size + g - 1) / g * g + (g > 512 ? g : 0);
        assert_true(capacity != UINT64_MAX);
        if (need <= capacity - c.held)
          fail_msg("refused %llu B with %llu B of the backend free", (unsigned long long)size,
                   (unsigned long long)(capacity - c.held));
      } else {
        assert_int_equal(rc, 0);
        assert_int_equal(addr % 512, 0);
        live[n++] = (blk){addr, size};
        live_bytes += size;
      }
    }
    CHECK(f.a);
    if (n) {   /* lookups: start, interior, last byte */
      int k = (int)((r >> 24) % (uint64_t)n);
      uint64_t s, z, at = live[k].addr + (r >> 32) % live[k].size;
      assert_int_equal(vs_arena_lookup(f.a, at, &s, &z), 0);
      assert_int_equal(s, live[k].addr);
      assert_int_equal(z, live[k].size);
    }
    if (step % 50 == 0) {
      assert_no_overlap(live, n);
      vs_arena_stats st;
      vs_arena_get_stats(f.a, &st);
      assert_int_equal(st.live_bytes, live_bytes);
      assert_int_equal(st.live_count, (uint64_t)n);
      assert_true(st.reserved_bytes >= st.live_bytes);
      assert_int_equal(vs_arena_free(f.a, 0x1234), -1);
    }
  }
  assert_no_overlap(live, n);
  while (n) assert_int_equal(vs_arena_free(f.a, live[--n].addr), 0);
  CHECK(f.a);
  if (capacity != UINT64_MAX) print_message("  %llu refusals on a %llu MiB backend\n", (unsigned long long)ooms,
                                            (unsigned long long)(capacity >> 20));
  fx_close(&f);
}

static void churn(vs_arena_mode mode, uint64_t capacity, int steps, uint64_t seed) {
  churn_ordered(mode, capacity, steps, seed, 0);
}

static void arena_random_vmm(void **s) { (void)s; churn(VS_ARENA_VMM, UINT64_MAX, 10000, 1); }
/* The same in stream order: every free reusable at once (leaving stream
 * order is covered by test_arena_stream.c). */
static void arena_random_vmm_ordered(void **s) { (void)s; churn_ordered(VS_ARENA_VMM, UINT64_MAX, 10000, 5, 1); }
static void arena_random_chunks_ordered(void **s) { (void)s; churn_ordered(VS_ARENA_CHUNKS, UINT64_MAX, 10000, 6, 1); }
static void arena_random_vmm_limited_ordered(void **s) { (void)s; churn_ordered(VS_ARENA_VMM, 2 * GiB, 10000, 7, 1); }
static void arena_random_chunks_limited_ordered(void **s) {
  (void)s;
  churn_ordered(VS_ARENA_CHUNKS, 2 * GiB, 10000, 8, 1);
}
static void arena_random_chunks(void **s) { (void)s; churn(VS_ARENA_CHUNKS, UINT64_MAX, 10000, 2); }
static void arena_random_vmm_limited(void **s) { (void)s; churn(VS_ARENA_VMM, 2 * GiB, 10000, 3); }
static void arena_random_chunks_limited(void **s) { (void)s; churn(VS_ARENA_CHUNKS, 2 * GiB, 10000, 4); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(arena_random_vmm),
      cmocka_unit_test(arena_random_chunks),
      cmocka_unit_test(arena_random_vmm_limited),
      cmocka_unit_test(arena_random_chunks_limited),
      cmocka_unit_test(arena_random_vmm_ordered),
      cmocka_unit_test(arena_random_chunks_ordered),
      cmocka_unit_test(arena_random_vmm_limited_ordered),
      cmocka_unit_test(arena_random_chunks_limited_ordered),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Threads: random alloc/free/lookup from several threads at once, with
 * blocks handed to other threads to free (remote frees into slabs owned by
 * another bin). At the end: no two live blocks overlap, lookups right,
 * accounting equal to what the threads hold, every invariant holds. Must
 * be clean under ThreadSanitizer (label: concurrent). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "arena_test_util.h"

enum { THREADS = 4, OPS = 20000, KEEP = 64, XFER = 256 };

typedef struct { uint64_t addr, size; } blk;
typedef struct {
  pthread_mutex_t mu;
  blk q[XFER];
  int n;
} mailbox;

static vs_arena *g_arena;
static mailbox g_box;

typedef struct { int id; blk keep[KEEP]; int n; uint64_t seed; } worker;

static void *run(void *p) {
  worker *w = p;
  for (int i = 0; i < OPS; i++) {
    uint64_t r = rng_next(&w->seed);
    if (w->n == KEEP || (w->n && r % 2)) {
      int k = (int)((r >> 8) % (uint64_t)w->n);
      blk b = w->keep[k];
      w->keep[k] = w->keep[--w->n];
      int given = 0;
      if ((r >> 20) % 4 == 0) {   /* hand it to whichever thread takes it next */
        pthread_mutex_lock(&g_box.mu);
        if (g_box.n < XFER) { g_box.q[g_box.n++] = b; given = 1; }
        pthread_mutex_unlock(&g_box.mu);
      }
      if (!given && vs_arena_free(g_arena, b.addr)) fail_msg("free of a live block refused");
    } else {
      uint64_t size = (r >> 30) % 8 ? 1 + (r >> 8) % (48 << 10) : 1 + (r >> 8) % (6 * MiB), addr;
      if (vs_arena_alloc(g_arena, size, &addr)) fail_msg("allocation refused");
      uint64_t s, z;
      if (vs_arena_lookup(g_arena, addr + size - 1, &s, &z) || s != addr || z != size) fail_msg("lookup wrong");
      w->keep[w->n++] = (blk){addr, size};
    }
    if (i % 16 == 0) {   /* free what others handed over */
      pthread_mutex_lock(&g_box.mu);
      blk b = g_box.n ? g_box.q[--g_box.n] : (blk){0, 0};
      pthread_mutex_unlock(&g_box.mu);
      if (b.addr && vs_arena_free(g_arena, b.addr)) fail_msg("remote free refused");
    }
  }
  return NULL;
}

static int by_addr(const void *x, const void *y) {
  const blk *a = x, *b = y;
  return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static void threads_case_ordered(vs_arena_mode mode, int ordered) {
  fixture f;
  fx_open(&f, mode, UINT64_MAX, 256 * MiB);
  vs_arena_set_stream_ordered(f.a, ordered);   /* stream order: frees reusable at once */
  g_arena = f.a;
  pthread_mutex_init(&g_box.mu, NULL);
  g_box.n = 0;
  worker w[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = i;
    w[i].seed = 100 + (uint64_t)i;
    assert_int_equal(pthread_create(&th[i], NULL, run, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  CHECK(f.a);
  blk all[THREADS * KEEP + XFER];
  int n = 0;
  uint64_t bytes = 0;
  for (int i = 0; i < THREADS; i++)
    for (int k = 0; k < w[i].n; k++) all[n++] = w[i].keep[k];
  for (int k = 0; k < g_box.n; k++) all[n++] = g_box.q[k];
  qsort(all, (size_t)n, sizeof all[0], by_addr);
  for (int i = 0; i < n; i++) {
    bytes += all[i].size;
    if (i && all[i - 1].addr + all[i - 1].size > all[i].addr) fail_msg("overlapping live blocks");
  }
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.live_bytes, bytes);
  assert_int_equal(st.live_count, (uint64_t)n);
  for (int i = 0; i < n; i++) assert_int_equal(vs_arena_free(f.a, all[i].addr), 0);
  pthread_mutex_destroy(&g_box.mu);
  fx_close(&f);
}

static void threads_case(vs_arena_mode mode) { threads_case_ordered(mode, 0); }
static void arena_threads_vmm(void **s) { (void)s; threads_case(VS_ARENA_VMM); }
static void arena_threads_chunks(void **s) { (void)s; threads_case(VS_ARENA_CHUNKS); }
static void arena_threads_vmm_ordered(void **s) { (void)s; threads_case_ordered(VS_ARENA_VMM, 1); }
static void arena_threads_chunks_ordered(void **s) { (void)s; threads_case_ordered(VS_ARENA_CHUNKS, 1); }

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(arena_threads_vmm), cmocka_unit_test(arena_threads_chunks),
                                     cmocka_unit_test(arena_threads_vmm_ordered),
                                     cmocka_unit_test(arena_threads_chunks_ordered)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Stream safety with an observable sync, the OOM ladder, and the release
 * threshold.
 *
 * The stream model: freeing a block leaves "device work" in flight on it,
 * which completes only when the backend's sync() runs (the space backend's
 * hook). Handing out any byte of such a block before that is the bug these
 * tests catch: they fail if the arena made freed memory reusable at once. */
#include <stdlib.h>
#include <string.h>

#include "arena_test_util.h"

enum { MAXF = 4096 };
typedef struct {
  uint64_t addr[MAXF], size[MAXF];
  int n;          /* blocks with work in flight */
  int syncs;
} device;

static void on_sync(void *u) {   /* all enqueued work finishes */
  device *d = u;
  d->n = 0;
  d->syncs++;
}

static void in_flight_free(fixture *f, device *d, uint64_t addr, uint64_t size) {
  assert_true(d->n < MAXF);
  d->addr[d->n] = addr;
  d->size[d->n] = size;
  d->n++;
  assert_int_equal(vs_arena_free(f->a, addr), 0);
}

static void assert_not_in_flight(device *d, uint64_t addr, uint64_t size) {
  for (int i = 0; i < d->n; i++)
    if (addr < d->addr[i] + d->size[i] && d->addr[i] < addr + size)
      fail_msg("0x%llx handed out while work on freed 0x%llx may still run", (unsigned long long)addr,
               (unsigned long long)d->addr[i]);
}

static void stream_case(vs_arena_mode mode, uint64_t size) {
  fixture f;
  device d = {0};
  fx_open(&f, mode, UINT64_MAX, GiB);
  vs_space_backend_set_sync_hook(f.sb, on_sync, &d);
  /* One block, freed with work in flight, then allocations of the same
   * size: an allocator with immediate reuse returns the same address. */
  uint64_t first, p, reused = 0;
  assert_int_equal(vs_arena_alloc(f.a, size, &first), 0);
  in_flight_free(&f, &d, first, size);
  CHECK(f.a);
  /* Small sizes: enough rounds to fill a slab, so reuse must come up. */
  int rounds = size <= (64 << 10) ? (int)(3 * (2 * MiB / size)) : 64, frees = 1;
  uint64_t *held = calloc((size_t)rounds, sizeof *held), *freed = calloc((size_t)rounds + 1, sizeof *freed);
  int nh = 0, nfreed = 0;
  freed[nfreed++] = first;
  for (int i = 0; i < rounds; i++) {
    assert_int_equal(vs_arena_alloc(f.a, size, &p), 0);
    assert_not_in_flight(&d, p, size);
    for (int k = 0; k < nfreed && !reused; k++) reused = p == freed[k];
    held[nh++] = p;
    /* Churn: free with work in flight, so pending blocks accumulate. */
    if (i % 2) { freed[nfreed++] = held[nh - 1]; in_flight_free(&f, &d, held[--nh], size); frees++; }
    if (rounds <= 64 || i % 64 == 0) CHECK(f.a);
  }
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  /* Freed memory was handed out again after syncs (the model is not
   * vacuous), and never
   * more than one sync per free (cuMemFree itself synchronises). */
  assert_true(d.syncs >= 1);
  assert_true(reused);
  assert_true(st.syncs <= (uint64_t)frees);
  print_message("  %d frees, %llu syncs\n", frees, (unsigned long long)st.syncs);
  while (nh) assert_int_equal(vs_arena_free(f.a, held[--nh]), 0);
  free(held);
  free(freed);
  fx_close(&f);
}

static void arena_stream_small_vmm(void **s) { (void)s; stream_case(VS_ARENA_VMM, 1000); }
static void arena_stream_small_chunks(void **s) { (void)s; stream_case(VS_ARENA_CHUNKS, 60000); }
static void arena_stream_medium_vmm(void **s) { (void)s; stream_case(VS_ARENA_VMM, 3 * MiB + 5); }
static void arena_stream_large_vmm(void **s) { (void)s; stream_case(VS_ARENA_VMM, 300 * MiB); }
static void arena_stream_large_chunks(void **s) { (void)s; stream_case(VS_ARENA_CHUNKS, 300 * MiB); }

/* Stream order (the program's work is all on one serialised stream): a
 * freed block is the next allocation of its size at once, slab, heap and
 * large, with no sync at all; leaving stream order syncs exactly once, and
 * from then on a freed block is pending again until a sync. Fails if
 * stream order still syncs (every reuse then costs a sync), or if leaving
 * it does not sync, or if it leaves frees reusable at once afterwards. */
static void ordered_case(vs_arena_mode mode) {
  fixture f;
  device d = {0};
  fx_open(&f, mode, UINT64_MAX, GiB);
  vs_space_backend_set_sync_hook(f.sb, on_sync, &d);
  vs_arena_set_stream_ordered(f.a, 1);
  assert_int_equal(vs_arena_stream_ordered(f.a), 1);
  const uint64_t sizes[] = {512, 4096, 48 << 10, 300 << 10, 3 * MiB + 5, 64 * MiB, 300 * MiB};
  for (int r = 0; r < 200; r++)
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      uint64_t p, q;
      assert_int_equal(vs_arena_alloc(f.a, sizes[i], &p), 0);
      assert_int_equal(vs_arena_free(f.a, p), 0);
      assert_int_equal(vs_arena_alloc(f.a, sizes[i], &q), 0);
      assert_true(q == p);   /* in stream order the freed block is reusable at once */
      assert_int_equal(vs_arena_free(f.a, q), 0);
      if (r < 2) CHECK(f.a);
    }
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(d.syncs, 0);
  assert_int_equal(st.syncs, 0);
  assert_int_equal(st.pending_bytes, 0);
  /* Leaving: one sync, at once (what was freed in order is idle before any
   * other stream can see it). */
  uint64_t held, p;
  assert_int_equal(vs_arena_alloc(f.a, 8 * MiB, &held), 0);
  vs_arena_set_stream_ordered(f.a, 0);
  assert_int_equal(d.syncs, 1);
  vs_arena_set_stream_ordered(f.a, 0);   /* again: nothing more */
  assert_int_equal(d.syncs, 1);
  /* Out of order: the free is in flight; nothing of it comes back unsynced. */
  in_flight_free(&f, &d, held, 8 * MiB);
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.pending_bytes, 8 * MiB);
  for (int i = 0; i < 64; i++) {
    assert_int_equal(vs_arena_alloc(f.a, 8 * MiB, &p), 0);
    assert_not_in_flight(&d, p, 8 * MiB);
    assert_int_equal(vs_arena_free(f.a, p), 0);
  }
  CHECK(f.a);
  fx_close(&f);
}
static void arena_stream_ordered_vmm(void **s) { (void)s; ordered_case(VS_ARENA_VMM); }
static void arena_stream_ordered_chunks(void **s) { (void)s; ordered_case(VS_ARENA_CHUNKS); }

/* One sync makes a whole batch of pending frees reusable together. */
static void arena_stream_batch(void **s) {
  (void)s;
  fixture f;
  device d = {0};
  fx_open(&f, VS_ARENA_VMM, UINT64_MAX, GiB);
  vs_space_backend_set_sync_hook(f.sb, on_sync, &d);
  uint64_t p[100];
  for (int i = 0; i < 100; i++) assert_int_equal(vs_arena_alloc(f.a, 8 * MiB, &p[i]), 0);
  for (int i = 0; i < 100; i++) in_flight_free(&f, &d, p[i], 8 * MiB);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.pending_bytes, 800 * MiB);
  uint64_t calls0 = st.backend_calls;
  for (int i = 0; i < 100; i++) {
    assert_int_equal(vs_arena_alloc(f.a, 8 * MiB, &p[i]), 0);
    assert_not_in_flight(&d, p[i], 8 * MiB);
  }
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(d.syncs, 1);                         /* one sync for the batch */
  assert_int_equal(st.backend_calls - calls0, 1);       /* and no growth */
  for (int i = 0; i < 100; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  CHECK(f.a);
  fx_close(&f);
}

/* A card whose memory sits in the cache (freed, some still pending), then
 * one large request: it succeeds after the ladder releases the cache, as it
 * would with no arena; one beyond the card is refused and nothing leaks. */
static void oom_case(vs_arena_mode mode) {
  fixture f;
  fx_open(&f, mode, GiB, 4 * GiB);   /* threshold above the card: only the ladder releases */
  uint64_t p[64], s[64];
  int n = 0;
  uint64_t sizes[] = {40 * MiB, 7 * MiB, 3 * MiB, 100 << 10, 5000};
  for (int i = 0; n < 64; i++) {
    s[n] = sizes[i % 5];
    if (vs_arena_alloc(f.a, s[n], &p[n])) break;
    n++;
  }
  for (int i = 0; i < n; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  CHECK(f.a);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  assert_true(st.reserved_bytes > 512 * MiB);   /* the cache holds the card */
  uint64_t big;
  assert_int_equal(vs_arena_alloc(f.a, 900 * MiB, &big), 0);
  CHECK(f.a);
  uint64_t huge;
  assert_int_equal(vs_arena_alloc(f.a, 200 * MiB, &huge), VS_BACKEND_OOM);
  CHECK(f.a);
  assert_int_equal(vs_arena_free(f.a, big), 0);
  assert_int_equal(vs_arena_alloc(f.a, 1000 * MiB, &huge), 0);   /* pending big: the ladder syncs */
  assert_int_equal(vs_arena_free(f.a, huge), 0);
  fx_close(&f);
}
static void arena_oom_ladder_vmm(void **s) { (void)s; oom_case(VS_ARENA_VMM); }
static void arena_oom_ladder_chunks(void **s) { (void)s; oom_case(VS_ARENA_CHUNKS); }

/* Free memory beyond release_threshold goes back to the backend. */
static void threshold_case(vs_arena_mode mode) {
  fixture f;
  uint64_t thr = 128 * MiB;
  fx_open(&f, mode, UINT64_MAX, thr);
  vs_arena_set_decay(f.a, VS_ARENA_DECAY_NONE);   /* the threshold alone: no decay window */
  uint64_t p[32];
  for (int i = 0; i < 32; i++) assert_int_equal(vs_arena_alloc(f.a, 48 * MiB, &p[i]), 0);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  assert_true(st.reserved_bytes >= 32 * 48 * MiB);
  for (int i = 0; i < 32; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  CHECK(f.a);
  /* The frees themselves settle each batch of pending bytes (a sync, then
   * the cache trimmed to the threshold), so what stays pending is less
   * than one batch (max(peak reserved / 8, 256 MiB)) and everything else
   * beyond the threshold is already back. */
  uint64_t q;
  assert_int_equal(vs_arena_alloc(f.a, 4096, &q), 0);
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  uint64_t batch = st.peak_reserved_bytes / 8 > 256 * MiB ? st.peak_reserved_bytes / 8 : 256 * MiB;
  assert_true(st.pending_bytes <= batch);
  uint64_t slack = 64 * MiB + 4 * MiB;   /* hysteresis + a slab and a granule */
  if (st.reserved_bytes > thr + slack + st.pending_bytes)
    fail_msg("reserved %llu MiB with threshold %llu MiB and %llu MiB pending",
             (unsigned long long)(st.reserved_bytes >> 20), (unsigned long long)(thr >> 20),
             (unsigned long long)(st.pending_bytes >> 20));
  assert_int_equal(vs_arena_free(f.a, q), 0);
  fx_close(&f);
}
static void arena_release_threshold_vmm(void **s) { (void)s; threshold_case(VS_ARENA_VMM); }

/* A burst of allocations, all freed, then nothing: an idle program. The
 * frees alone must settle the pending memory and give what is beyond
 * release_threshold back (at most one batch may stay pending), without a
 * sync per free. */
static void idle_case(vs_arena_mode mode) {
  fixture f;
  device d = {0};
  fx_open(&f, mode, UINT64_MAX, 256 * MiB);
  vs_arena_set_decay(f.a, VS_ARENA_DECAY_NONE);
  vs_space_backend_set_sync_hook(f.sb, on_sync, &d);
  enum { N = 64 };
  uint64_t p[N];
  for (int i = 0; i < N; i++) assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &p[i]), 0);
  for (int i = 0; i < N; i++) in_flight_free(&f, &d, p[i], 64 * MiB);
  CHECK(f.a);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  /* 4 GiB was live; the batch limit is max(peak reserved / 8, 256 MiB). */
  uint64_t batch = st.peak_reserved_bytes / 8 > 256 * MiB ? st.peak_reserved_bytes / 8 : 256 * MiB;
  print_message("  reserved after the burst %llu MiB (pending %llu MiB), %llu syncs for %d frees\n",
                (unsigned long long)(st.reserved_bytes / MiB), (unsigned long long)(st.pending_bytes / MiB),
                (unsigned long long)st.syncs, N);
  assert_true(st.syncs >= 1);
  assert_true(st.syncs < N / 4);
  assert_true(st.reserved_bytes <= 256 * MiB + 64 * MiB + batch + 64 * MiB);
  fx_close(&f);
}
static void arena_idle_release_vmm(void **s) { (void)s; idle_case(VS_ARENA_VMM); }
static void arena_idle_release_chunks(void **s) { (void)s; idle_case(VS_ARENA_CHUNKS); }
static void arena_release_threshold_chunks(void **s) { (void)s; threshold_case(VS_ARENA_CHUNKS); }

/* A program that allocates and frees in a loop: the frees must be made
 * reusable in batches, not by a sync per allocation (each sync is a driver
 * call), and the heap must not grow without bound meanwhile. The in-flight
 * model still checks that no freed byte comes back before a sync. */
static void loop_case(vs_arena_mode mode) {
  fixture f;
  device d = {0};
  fx_open(&f, mode, UINT64_MAX, GiB);
  vs_space_backend_set_sync_hook(f.sb, on_sync, &d);
  enum { PAIRS = 2000 };
  for (int i = 0; i < PAIRS; i++) {
    uint64_t a, b;
    assert_int_equal(vs_arena_alloc(f.a, 4096, &a), 0);
    assert_not_in_flight(&d, a, 4096);
    assert_int_equal(vs_arena_alloc(f.a, MiB, &b), 0);
    assert_not_in_flight(&d, b, MiB);
    in_flight_free(&f, &d, a, 4096);
    in_flight_free(&f, &d, b, MiB);
    if (i % 64 == 0) CHECK(f.a);
  }
  vs_space_counters c;
  vs_space_backend_counters(f.sb, &c);
  uint64_t calls = vs_space_backend_calls(&c);
  /* 4 requests per pair would be 8000 calls without the arena; before
   * batching, VMM synced on every 1 MiB allocation (~2000 calls). */
  if (calls * 100 > 4 * PAIRS) fail_msg("%llu backend calls for %d alloc/free pairs (%llu syncs)",
                                        (unsigned long long)calls, PAIRS, (unsigned long long)c.sync);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  if (st.peak_reserved_bytes > 512 * MiB) fail_msg("peak reserved %llu MiB for 1 MiB live",
                                                   (unsigned long long)(st.peak_reserved_bytes >> 20));
  fx_close(&f);
}
static void arena_loop_calls_vmm(void **s) { (void)s; loop_case(VS_ARENA_VMM); }
static void arena_loop_calls_chunks(void **s) { (void)s; loop_case(VS_ARENA_CHUNKS); }

static void region_sizes(void *user, const vs_region_info *r) {
  uint64_t *v = user;
  if (r->kind == VS_REGION_DEDICATED || r->kind == VS_REGION_CHUNK) v[v[0]++ + 1] = r->size;
}

/* chunks: a large request gets a chunk of exactly its (2 MiB rounded) size,
 * even once the heap is big enough that a growth step would be larger; a
 * medium one still grows the heap by at least a step. */
static void arena_own_chunks(void **s) {
  (void)s;
  fixture f;
  fx_open(&f, VS_ARENA_CHUNKS, UINT64_MAX, GiB);
  uint64_t p[40];
  for (int i = 0; i < 40; i++) assert_int_equal(vs_arena_alloc(f.a, 100 * MiB, &p[i]), 0);   /* 4 GiB held */
  uint64_t big, mid;
  assert_int_equal(vs_arena_alloc(f.a, 39 * MiB + 512, &big), 0);   /* < the step (held / 64 > 62 MiB) */
  assert_int_equal(vs_arena_alloc(f.a, 9 * MiB, &mid), 0);
  CHECK(f.a);
  uint64_t v[64] = {0};
  vs_arena_walker w = {.user = v, .region = region_sizes};
  vs_arena_walk(f.a, &w);
  assert_int_equal(v[0], 42);
  int own100 = 0, own40 = 0, other = 0;
  for (uint64_t i = 1; i <= v[0]; i++) {
    if (v[i] == 100 * MiB) own100++;
    else if (v[i] == 40 * MiB) own40++;
    else {
      other++;
      assert_true(v[i] >= 4000 * MiB / 64);   /* the 9 MiB request's chunk: at least held / 64 */
    }
  }
  assert_int_equal(own100, 40);
  assert_int_equal(own40, 1);
  assert_int_equal(other, 1);
  for (int i = 0; i < 40; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  assert_int_equal(vs_arena_free(f.a, big), 0);
  assert_int_equal(vs_arena_free(f.a, mid), 0);
  fx_close(&f);
}

/* Decay on an injected clock. */
static uint64_t clk_ns;
static uint64_t test_clock(void *ctx) { (void)ctx; return clk_ns; }

static uint64_t backend_calls(fixture *f) {
  vs_space_counters c;
  vs_space_backend_counters(f->sb, &c);
  return vs_space_backend_calls(&c) - c.sync;
}

/* An arena on the injected clock (at 1 µs) with a 1 s decay. */
static void fx_open_decay(fixture *f, vs_arena_mode mode, uint64_t thr) {
  fx_open(f, mode, UINT64_MAX, thr);
  clk_ns = 1000;
  vs_arena_set_clock(f->a, test_clock, NULL);
  vs_arena_set_decay(f->a, 1000);
}

/* A burst freed: what is beyond release_threshold stays cached while the
 * decay window still remembers the burst, and goes back at the first call
 * after decay_ms have passed with no such use. */
static void decay_burst_case(vs_arena_mode mode) {
  fixture f;
  uint64_t thr = 128 * MiB;
  fx_open_decay(&f, mode, thr);
  enum { N = 32 };
  uint64_t p[N];
  for (int i = 0; i < N; i++) assert_int_equal(vs_arena_alloc(f.a, 48 * MiB, &p[i]), 0);
  for (int i = 0; i < N; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  CHECK(f.a);
  vs_arena_stats st;
  uint64_t q;
  /* 0.5 s later: the burst is within the window, nothing goes back. */
  clk_ns += 500000000ull;
  assert_int_equal(vs_arena_alloc(f.a, 48 * MiB, &q), 0);
  assert_int_equal(vs_arena_free(f.a, q), 0);
  vs_arena_get_stats(f.a, &st);
  print_message("  0.5 s after the burst: %llu MiB reserved\n", (unsigned long long)(st.reserved_bytes >> 20));
  assert_true(st.reserved_bytes >= N * 48 * MiB);
  /* 2 s later, and a call: beyond the threshold goes back. */
  clk_ns += 2000000000ull;
  assert_int_equal(vs_arena_alloc(f.a, 48 * MiB, &q), 0);
  assert_int_equal(vs_arena_free(f.a, q), 0);
  assert_int_equal(vs_arena_trim(f.a, UINT64_MAX), 0);   /* settles pending, releases nothing more */
  assert_int_equal(vs_arena_alloc(f.a, 48 * MiB, &q), 0);
  assert_int_equal(vs_arena_free(f.a, q), 0);
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  print_message("  2.5 s after the burst: %llu MiB reserved\n", (unsigned long long)(st.reserved_bytes >> 20));
  if (st.reserved_bytes > thr + 64 * MiB + 48 * MiB + st.pending_bytes + 4 * MiB)
    fail_msg("reserved %llu MiB 2.5 s after the burst with a 1 s decay and a %llu MiB threshold",
             (unsigned long long)(st.reserved_bytes >> 20), (unsigned long long)(thr >> 20));
  fx_close(&f);
}
static void arena_decay_burst_vmm(void **s) { (void)s; decay_burst_case(VS_ARENA_VMM); }
static void arena_decay_burst_chunks(void **s) { (void)s; decay_burst_case(VS_ARENA_CHUNKS); }

/* A level held for longer than the decay window, busy all along but never
 * above its first high, then dropped at once (a server's lull, a large
 * free, shutdown): the memory was in use until the drop, so decay keeps it
 * for a window after it and gives it back only then. Until issue 27's
 * third round the window had forgotten a level that set no new high within
 * it (the allocation path notes only new highs), and the drop gave all
 * beyond release_threshold back at once. Out of stream order (the frees
 * pend until a sync reclaims them) and in it (reusable at the free). */
static void decay_level_case(vs_arena_mode mode, int ordered) {
  fixture f;
  uint64_t thr = 128 * MiB;
  fx_open_decay(&f, mode, thr);
  if (ordered) vs_arena_set_stream_ordered(f.a, 1);
  enum { N = 32 };
  uint64_t p[N], q;
  for (int i = 0; i < N; i++) assert_int_equal(vs_arena_alloc(f.a, 48 * MiB, &p[i]), 0);
  for (int i = 0; i < 50; i++) {   /* 5 s at the level: one more block, every 0.1 s */
    clk_ns += 100000000ull;
    assert_int_equal(vs_arena_alloc(f.a, 48 * MiB, &q), 0);
    assert_int_equal(vs_arena_free(f.a, q), 0);
  }
  assert_int_equal(vs_arena_trim(f.a, UINT64_MAX), 0);   /* settles pending, releases nothing */
  uint64_t calls = backend_calls(&f);
  for (int i = 0; i < N; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  assert_int_equal(vs_arena_trim(f.a, UINT64_MAX), 0);
  CHECK(f.a);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  print_message("  right after the drop: %llu MiB reserved, %llu release calls\n",
                (unsigned long long)(st.reserved_bytes >> 20), (unsigned long long)(backend_calls(&f) - calls));
  assert_true(st.reserved_bytes >= N * 48 * MiB);
  assert_int_equal(backend_calls(&f), calls);
  /* 2 s later, and a call: beyond the threshold goes back. */
  clk_ns += 2000000000ull;
  assert_int_equal(vs_arena_alloc(f.a, 48 * MiB, &q), 0);
  assert_int_equal(vs_arena_free(f.a, q), 0);
  assert_int_equal(vs_arena_trim(f.a, UINT64_MAX), 0);
  vs_arena_decay(f.a);
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  print_message("  2 s after the drop: %llu MiB reserved\n", (unsigned long long)(st.reserved_bytes >> 20));
  if (st.reserved_bytes > thr + 64 * MiB + 48 * MiB + 4 * MiB)
    fail_msg("reserved %llu MiB 2 s after the drop with a 1 s decay and a %llu MiB threshold",
             (unsigned long long)(st.reserved_bytes >> 20), (unsigned long long)(thr >> 20));
  fx_close(&f);
}
static void arena_decay_level_vmm(void **s) { (void)s; decay_level_case(VS_ARENA_VMM, 0); }
static void arena_decay_level_chunks(void **s) { (void)s; decay_level_case(VS_ARENA_CHUNKS, 0); }
static void arena_decay_level_ordered_vmm(void **s) { (void)s; decay_level_case(VS_ARENA_VMM, 1); }
static void arena_decay_level_ordered_chunks(void **s) { (void)s; decay_level_case(VS_ARENA_CHUNKS, 1); }

/* A training step on a decaying heap: n 64 MiB blocks and a 1 GiB one
 * (the logits); the blocks [f0, f1) freed and nw 96 MiB ones made, which
 * fit in none of their holes; the logits freed and the pending frees
 * settled. The next logits must cost no call, and once idle for three
 * decays the heap holds at most release_threshold. */
static void decay_step_case(vs_arena_mode mode, int n, int f0, int f1, int nw) {
  fixture f;
  const uint64_t thr = 128 * MiB;
  fx_open_decay(&f, mode, thr);
  uint64_t act[16], wide[8], logits;
  assert_true(n <= 16 && nw <= 8);
  for (int i = 0; i < n; i++) assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &act[i]), 0);
  assert_int_equal(vs_arena_alloc(f.a, 1 * GiB, &logits), 0);
  clk_ns += 10000000ull;
  for (int i = f0; i < f1; i++) assert_int_equal(vs_arena_free(f.a, act[i]), 0);
  for (int i = 0; i < nw; i++) assert_int_equal(vs_arena_alloc(f.a, 96 * MiB, &wide[i]), 0);
  clk_ns += 10000000ull;
  assert_int_equal(vs_arena_free(f.a, logits), 0);
  assert_int_equal(vs_arena_trim(f.a, UINT64_MAX), 0);   /* settles pending: the release check runs */
  CHECK(f.a);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  uint64_t calls = backend_calls(&f);
  clk_ns += 10000000ull;
  assert_int_equal(vs_arena_alloc(f.a, 1 * GiB, &logits), 0);
  print_message("  %s: %llu MiB reserved after the logits' free; the next logits: %llu calls\n",
                mode == VS_ARENA_VMM ? "vmm" : "chunks", (unsigned long long)(st.reserved_bytes >> 20),
                (unsigned long long)(backend_calls(&f) - calls));
  assert_int_equal(backend_calls(&f), calls);
  assert_int_equal(vs_arena_free(f.a, logits), 0);
  for (int i = 0; i < n; i++)
    if (i < f0 || i >= f1) assert_int_equal(vs_arena_free(f.a, act[i]), 0);
  for (int i = 0; i < nw; i++) assert_int_equal(vs_arena_free(f.a, wide[i]), 0);
  vs_arena_decay(f.a);       /* the background thread's ticks: one now, one three decays later */
  clk_ns += 3000000000ull;
  vs_arena_decay(f.a);
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  print_message("  idle 3 s: %llu MiB reserved\n", (unsigned long long)(st.reserved_bytes >> 20));
  assert_true(st.reserved_bytes <= thr);
  fx_close(&f);
}
/* Decay's trims release only what brings the cache nearer to its keep. A
 * step of a training loop: eight 64 MiB activations, a 1 GiB logits
 * tensor; half the activations freed and four 96 MiB ones made (no freed
 * 64 MiB piece fits them: the heap holds more than its use high); then the
 * logits freed. What is cached passes decay's keep by less than half the
 * logits' memory, and releasing that memory to trim the excess left the
 * heap below the use the window projects, so the next step's logits took
 * it again (a release and a growth per step, the largest calls there are).
 * Now the logits' memory stays and the next step's logits cost no call;
 * the idle trim still gives back everything beyond release_threshold.
 * Checked to fail without the rule in chunks mode (896 MiB held, one
 * growth for the next logits); VMM holds the logits here either way (its
 * handle backs the step mapped with them too), the case guards it. */
static void decay_no_overshoot_case(vs_arena_mode mode) { decay_step_case(mode, 8, 0, 4, 4); }
static void arena_decay_no_overshoot_vmm(void **s) { (void)s; decay_no_overshoot_case(VS_ARENA_VMM); }
static void arena_decay_no_overshoot_chunks(void **s) { (void)s; decay_no_overshoot_case(VS_ARENA_CHUNKS); }

/* Decay keeps the level of the heap's last growth, holes included, for as
 * long as the window's use reaches the use it grew at: a training step
 * whose small blocks left holes that its later blocks could not use grew
 * past its use high, and the release check gave back the logits chunk as
 * a surplus, which the next step grew again (a checkpointed gpt2 loop: one
 * 1.5 GiB release and regrowth, 24.6 ms of modeled driver time against
 * PyTorch's 18.8). Sixteen 64 MiB blocks and a 1 GiB one; twelve of the
 * 64s freed and eight 96 MiB ones made, which fit in no hole; the 1 GiB
 * freed: the next 1 GiB costs no call, and an idle process still gives
 * everything beyond release_threshold back. */
static void decay_keeps_growth_case(vs_arena_mode mode) { decay_step_case(mode, 16, 4, 16, 8); }
static void arena_decay_keeps_growth_vmm(void **s) { (void)s; decay_keeps_growth_case(VS_ARENA_VMM); }
static void arena_decay_keeps_growth_chunks(void **s) { (void)s; decay_keeps_growth_case(VS_ARENA_CHUNKS); }

/* Decay's trims give back the largest pieces first and stop at one that
 * would overshoot. The heap ends a step holding two free 512 MiB chunks (a
 * step's logits), a free 256 MiB one, eight free 16 MiB ones and a live
 * 600 MiB block that fits in none of them. Its last growth (the 600 MiB
 * one) came at a use of 1,408 MiB, and decay keeps that level while the
 * window's use reaches it; a whole window later the use high is 1,240 MiB
 * (a logits block and the small ones again, from the cache), and once the
 * logits are freed decay keeps about 550 MiB beyond the 728 live: one
 * 512 MiB chunk goes (216 MiB still to go, and the other 512 would
 * overshoot by more than it trims), the rest stays, and the next step's
 * logits and small blocks cost no call. (Released in list order, 768 MiB
 * went: the 256 MiB chunk too, and the check fails.) */
static void arena_decay_largest_first(void **state) {
  (void)state;
  fixture f;
  fx_open_decay(&f, VS_ARENA_CHUNKS, 128 * MiB);
  uint64_t small[8], logits[2], tmp, wide;
  for (int i = 0; i < 8; i++) assert_int_equal(vs_arena_alloc(f.a, 16 * MiB, &small[i]), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(vs_arena_alloc(f.a, 512 * MiB, &logits[i]), 0);
  assert_int_equal(vs_arena_alloc(f.a, 256 * MiB, &tmp), 0);
  clk_ns += 10000000ull;
  assert_int_equal(vs_arena_alloc(f.a, 600 * MiB, &wide), 0);
  assert_int_equal(vs_arena_free(f.a, tmp), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(vs_arena_free(f.a, logits[i]), 0);
  for (int i = 0; i < 8; i++) assert_int_equal(vs_arena_free(f.a, small[i]), 0);
  assert_int_equal(vs_arena_trim(f.a, UINT64_MAX), 0);   /* settles pending */
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  const uint64_t held = st.reserved_bytes;
  clk_ns += 2000000000ull;   /* two decays: the growth's level has left the window */
  uint64_t calls = backend_calls(&f);
  assert_int_equal(vs_arena_alloc(f.a, 512 * MiB, &logits[0]), 0);
  for (int i = 0; i < 8; i++) assert_int_equal(vs_arena_alloc(f.a, 16 * MiB, &small[i]), 0);
  assert_int_equal(backend_calls(&f), calls);   /* all from the cache */
  clk_ns += 10000000ull;
  assert_int_equal(vs_arena_free(f.a, logits[0]), 0);
  for (int i = 0; i < 8; i++) assert_int_equal(vs_arena_free(f.a, small[i]), 0);
  assert_int_equal(vs_arena_trim(f.a, UINT64_MAX), 0);   /* settles pending: the release check runs */
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  calls = backend_calls(&f);
  clk_ns += 10000000ull;
  assert_int_equal(vs_arena_alloc(f.a, 512 * MiB, &logits[0]), 0);
  for (int i = 0; i < 8; i++) assert_int_equal(vs_arena_alloc(f.a, 16 * MiB, &small[i]), 0);
  print_message("  %llu MiB reserved after the step, %llu after the trim (600 live); the next logits and small blocks: "
                "%llu calls\n", (unsigned long long)(held >> 20), (unsigned long long)(st.reserved_bytes >> 20),
                (unsigned long long)(backend_calls(&f) - calls));
  assert_true(held - st.reserved_bytes == 512 * MiB);   /* one logits chunk, nothing else */
  assert_int_equal(backend_calls(&f), calls);
  assert_int_equal(vs_arena_free(f.a, logits[0]), 0);
  assert_int_equal(vs_arena_free(f.a, wide), 0);
  for (int i = 0; i < 8; i++) assert_int_equal(vs_arena_free(f.a, small[i]), 0);
  fx_close(&f);
}

/* A workload that swings between 1 GiB and 3 GiB in use every 0.2 s, with
 * a 1 s decay: after the first high it makes no growth or release call
 * again (the fixed threshold gave the high back and took it again every
 * swing: checked with VS_ARENA_DECAY_NONE, which must churn). */
static void decay_swing_case(vs_arena_mode mode, int decay) {
  fixture f;
  fx_open(&f, mode, UINT64_MAX, 256 * MiB);
  clk_ns = 1000;
  vs_arena_set_clock(f.a, test_clock, NULL);
  vs_arena_set_decay(f.a, decay ? 1000 : VS_ARENA_DECAY_NONE);
  enum { BASE = 16, SWING = 32 };
  uint64_t base[BASE], sw[SWING];
  for (int i = 0; i < BASE; i++) assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &base[i]), 0);
  uint64_t after_first = 0;
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < SWING; i++) assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &sw[i]), 0);
    clk_ns += 100000000ull;
    for (int i = 0; i < SWING; i++) assert_int_equal(vs_arena_free(f.a, sw[i]), 0);
    clk_ns += 100000000ull;
    for (int i = 0; i < 8; i++) {   /* the low phase keeps allocating */
      uint64_t q;
      assert_int_equal(vs_arena_alloc(f.a, 8 * MiB, &q), 0);
      assert_int_equal(vs_arena_free(f.a, q), 0);
    }
    if (round == 0) after_first = backend_calls(&f);
    CHECK(f.a);
  }
  uint64_t later = backend_calls(&f) - after_first;
  print_message("  %s: %llu growth/release calls after the first swing\n", decay ? "decay 1 s" : "no decay",
                (unsigned long long)later);
  if (decay) assert_int_equal(later, 0);
  else assert_true(later >= 19);
  for (int i = 0; i < BASE; i++) assert_int_equal(vs_arena_free(f.a, base[i]), 0);
  fx_close(&f);
}
static void arena_decay_swing_vmm(void **s) { (void)s; decay_swing_case(VS_ARENA_VMM, 1); }
static void arena_decay_swing_chunks(void **s) { (void)s; decay_swing_case(VS_ARENA_CHUNKS, 1); }
static void arena_nodecay_swing_churns(void **s) { (void)s; decay_swing_case(VS_ARENA_VMM, 0); }

/* Swings over a 1 s decay, the program busy all along: a high of 32 more
 * 64 MiB blocks for 0.1 s, then a low of low_ticks × tick_ns with an 8 MiB
 * allocation and free every tick; rounds of it. The backend's growth and
 * release calls after round 0 and after round 3. */
typedef struct { uint64_t first, after_warm, later; } regret_calls;
static regret_calls regret_swings(vs_arena_mode mode, int rounds, int low_ticks, uint64_t tick_ns) {
  fixture f;
  fx_open_decay(&f, mode, 256 * MiB);
  enum { BASE = 16, SWING = 32 };
  uint64_t base[BASE], sw[SWING];
  regret_calls c = {0, 0, 0};
  for (int i = 0; i < BASE; i++) assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &base[i]), 0);
  for (int round = 0; round < rounds; round++) {
    for (int i = 0; i < SWING; i++) assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &sw[i]), 0);
    clk_ns += 100000000ull;
    for (int i = 0; i < SWING; i++) assert_int_equal(vs_arena_free(f.a, sw[i]), 0);
    for (int t = 0; t < low_ticks; t++) {
      clk_ns += tick_ns;
      uint64_t q;
      assert_int_equal(vs_arena_alloc(f.a, 8 * MiB, &q), 0);
      assert_int_equal(vs_arena_free(f.a, q), 0);
    }
    if (round == 0) c.first = backend_calls(&f);
    if (round == 3) c.after_warm = backend_calls(&f);
    CHECK(f.a);
  }
  c.later = backend_calls(&f) - c.after_warm;
  for (int i = 0; i < BASE; i++) assert_int_equal(vs_arena_free(f.a, base[i]), 0);
  fx_close(&f);
  return c;
}

/* Lows of 3 s, longer than the 1 s decay: each low lets decay give the
 * high back, and each high takes it again. Regret (heap.c, decay_regret)
 * lengthens the window once a growth follows a decay release: the churn
 * stops after the first rounds, where the fixed window made calls in every
 * round (checked: without decay_regret, 2 or more calls a round). */
static void decay_regret_case(vs_arena_mode mode) {
  regret_calls c = regret_swings(mode, 40, 30, 100000000ull);   /* 3 s of low, busy every 0.1 s */
  print_message("  %llu growth/release calls in rounds 4..%d (3 s lows, 1 s decay)\n", (unsigned long long)c.later,
                40 - 1);
  assert_int_equal(c.later, 0);
}
/* A loop stationary after its first step whose steps need more than their
 * use high (fragmentation): each step places a 256 MiB block, a 16 MiB one
 * after it, frees the first and asks for 300 MiB, which fits in no hole
 * the first step left until the heap has grown for it. Its use high is
 * 316 MiB; it holds about 600. Once the warm-up's growths left the decay
 * window, decay's bytes alone (the window's use high) gave back what the
 * next step grew again; the last growth's reserved level is kept while the
 * window's use reaches the use it grew at: no call after the first step,
 * for 30 windows. Then the loop stops at a lower level (64 MiB in use):
 * the level is forgotten and the cache goes back to release_threshold. */
static void decay_fragmented_loop_case(vs_arena_mode mode) {
  fixture f;
  uint64_t thr = 64 * MiB;
  fx_open_decay(&f, mode, thr);
  vs_arena_set_stream_ordered(f.a, 1);
  uint64_t a, b, c, calls = 0;
  for (int step = 0; step < 300; step++) {   /* a step every 0.1 s: 30 s, 30 decay windows */
    if (step == 1) calls = backend_calls(&f);
    clk_ns += 100000000ull;
    assert_int_equal(vs_arena_alloc(f.a, 256 * MiB, &a), 0);
    assert_int_equal(vs_arena_alloc(f.a, 16 * MiB, &b), 0);
    assert_int_equal(vs_arena_free(f.a, a), 0);
    assert_int_equal(vs_arena_alloc(f.a, 300 * MiB, &c), 0);
    assert_int_equal(vs_arena_free(f.a, b), 0);
    assert_int_equal(vs_arena_free(f.a, c), 0);
    if (step % 50 == 0) CHECK(f.a);
  }
  print_message("  %llu growth/release calls after the first step, 300 steps\n",
                (unsigned long long)(backend_calls(&f) - calls));
  assert_int_equal(backend_calls(&f), calls);
  /* A lower level for 3 s: what the loop held goes back. */
  for (int i = 0; i < 30; i++) {
    clk_ns += 100000000ull;
    assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &a), 0);
    assert_int_equal(vs_arena_free(f.a, a), 0);
  }
  vs_arena_decay(f.a);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  print_message("  after 3 s at 64 MiB: %llu MiB reserved\n", (unsigned long long)(st.reserved_bytes >> 20));
  if (st.reserved_bytes > 64 * MiB + thr + 64 * MiB + 32 * MiB)
    fail_msg("reserved %llu MiB after 3 s at 64 MiB in use (1 s decay)", (unsigned long long)(st.reserved_bytes >> 20));
  fx_close(&f);
}
static void arena_decay_fragmented_loop_vmm(void **s) { (void)s; decay_fragmented_loop_case(VS_ARENA_VMM); }

static void arena_decay_regret_vmm(void **s) { (void)s; decay_regret_case(VS_ARENA_VMM); }
static void arena_decay_regret_chunks(void **s) { (void)s; decay_regret_case(VS_ARENA_CHUNKS); }

/* Lows far longer than the regret's first window (issue 27): 100 s lows
 * with a 1 s decay, busy every second. The first regret takes the window
 * to 64 s, still shorter than a low; each further regret doubles it, so
 * the churn stops after a few rounds however long the lows are (a regret
 * counted only within 8 windows of the release, or a window capped at
 * 64 x decay, released and regrew in every round). */
static void decay_regret_long_case(vs_arena_mode mode) {
  regret_calls c = regret_swings(mode, 12, 100, 1000000000ull);   /* 100 s of low, busy every second */
  print_message("  %llu growth/release calls in rounds 4..%d (100 s lows, 1 s decay); %llu in round 0\n",
                (unsigned long long)c.later, 12 - 1, (unsigned long long)c.first);
  assert_true(c.after_warm > c.first);   /* the lows did release before regret caught up */
  assert_int_equal(c.later, 0);
}
static void arena_decay_regret_long_vmm(void **s) { (void)s; decay_regret_long_case(VS_ARENA_VMM); }
static void arena_decay_regret_long_chunks(void **s) { (void)s; decay_regret_long_case(VS_ARENA_CHUNKS); }

/* The backend's hold (arena_types.h): while it holds, no sync and no
 * release reach the backend; freed blocks waiting for a sync are not handed
 * out (the arena grows instead); trims give nothing back; once the hold
 * ends, all of it goes on. vs_arena_mappings lists the VMM mappings. */
static int g_hold;
static int hold_of(void *ctx) {
  (void)ctx;
  return g_hold;
}
static void count_map(void *user, uint64_t va, uint64_t size) {
  (void)va;
  *(uint64_t *)user += size;
}

static void hold_case(vs_arena_mode mode) {
  fixture f;
  device d = {0};
  f.sb = vs_space_backend_create(UINT64_MAX, 0);
  assert_non_null(f.sb);
  f.be = vs_space_backend_get_mode(f.sb, mode == VS_ARENA_VMM);
  f.be.hold = hold_of;
  vs_arena_config cfg = {.mode = mode, .release_threshold = 0};   /* everything freed goes back at once */
  f.a = vs_arena_create(&cfg, &f.be);
  assert_non_null(f.a);
  vs_space_backend_set_sync_hook(f.sb, on_sync, &d);
  uint64_t p[8], q[8];
  for (int i = 0; i < 8; i++) assert_int_equal(vs_arena_alloc(f.a, 40 * MiB, &p[i]), 0);
  g_hold = 1;
  for (int i = 0; i < 8; i++) in_flight_free(&f, &d, p[i], 40 * MiB);
  vs_space_counters c0, c1;
  vs_space_backend_counters(f.sb, &c0);
  for (int i = 0; i < 8; i++) {
    assert_int_equal(vs_arena_alloc(f.a, 40 * MiB, &q[i]), 0);
    assert_not_in_flight(&d, q[i], 40 * MiB);
  }
  assert_int_equal(vs_arena_trim(f.a, 0), 0);
  vs_arena_decay(f.a);
  vs_space_backend_counters(f.sb, &c1);
  assert_int_equal(c1.sync, c0.sync);
  assert_int_equal(c1.chunk_free + c1.phys_release + c1.unmap, c0.chunk_free + c0.phys_release + c0.unmap);
  assert_true(c1.held > c0.held);   /* it grew instead */
  uint64_t mapped = 0;
  vs_arena_mappings(f.a, count_map, &mapped);
  assert_int_equal(mapped, mode == VS_ARENA_VMM ? c1.mapped : 0);
  CHECK(f.a);
  g_hold = 0;   /* the hold ends: the sync and the releases come */
  for (int i = 0; i < 8; i++) assert_int_equal(vs_arena_free(f.a, q[i]), 0);
  assert_true(vs_arena_trim(f.a, 0) > 0);
  vs_space_backend_counters(f.sb, &c1);
  assert_true(c1.sync > c0.sync);
  assert_int_equal(c1.held, 0);
  fx_close(&f);
}
static void arena_hold_vmm(void **s) { (void)s; hold_case(VS_ARENA_VMM); }
static void arena_hold_chunks(void **s) { (void)s; hold_case(VS_ARENA_CHUNKS); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(arena_loop_calls_vmm),        cmocka_unit_test(arena_loop_calls_chunks),
      cmocka_unit_test(arena_own_chunks),
      cmocka_unit_test(arena_stream_small_vmm),      cmocka_unit_test(arena_stream_small_chunks),
      cmocka_unit_test(arena_stream_medium_vmm),     cmocka_unit_test(arena_stream_large_vmm),
      cmocka_unit_test(arena_stream_large_chunks),   cmocka_unit_test(arena_stream_batch),
      cmocka_unit_test(arena_oom_ladder_vmm),        cmocka_unit_test(arena_oom_ladder_chunks),
      cmocka_unit_test(arena_release_threshold_vmm), cmocka_unit_test(arena_release_threshold_chunks),
      cmocka_unit_test(arena_idle_release_vmm),      cmocka_unit_test(arena_idle_release_chunks),
      cmocka_unit_test(arena_decay_burst_vmm),       cmocka_unit_test(arena_decay_burst_chunks),
      cmocka_unit_test(arena_decay_level_vmm),       cmocka_unit_test(arena_decay_level_chunks),
      cmocka_unit_test(arena_decay_no_overshoot_vmm),     cmocka_unit_test(arena_decay_no_overshoot_chunks),
      cmocka_unit_test(arena_decay_largest_first),
      cmocka_unit_test(arena_decay_keeps_growth_vmm),
      cmocka_unit_test(arena_decay_keeps_growth_chunks),
      cmocka_unit_test(arena_decay_level_ordered_vmm), cmocka_unit_test(arena_decay_level_ordered_chunks),
      cmocka_unit_test(arena_decay_swing_vmm),       cmocka_unit_test(arena_decay_swing_chunks),
      cmocka_unit_test(arena_decay_regret_vmm),      cmocka_unit_test(arena_decay_regret_chunks),
      cmocka_unit_test(arena_decay_fragmented_loop_vmm),
      cmocka_unit_test(arena_decay_regret_long_vmm), cmocka_unit_test(arena_decay_regret_long_chunks),
      cmocka_unit_test(arena_nodecay_swing_churns),
      cmocka_unit_test(arena_stream_ordered_vmm),    cmocka_unit_test(arena_stream_ordered_chunks),
      cmocka_unit_test(arena_hold_vmm),              cmocka_unit_test(arena_hold_chunks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

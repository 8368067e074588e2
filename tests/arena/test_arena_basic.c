/* Unit tests per layer: space backend, small slabs, heap (both modes),
 * lookup/placement, stats, walk, with the invariant check after each step. */
#include <stdlib.h>
#include <string.h>

#include "arena_test_util.h"
#include "core.h"
#include "tlsf.h"

static void arena_space_backend(void **state) {
  (void)state;
  vs_space_backend *sb = vs_space_backend_create(10 * MiB, 0);
  vs_arena_backend be = vs_space_backend_get(sb);
  uint64_t c1, c2, h, va;
  assert_int_equal(be.chunk_alloc(be.ctx, 4 * MiB, &c1), VS_BACKEND_OK);
  assert_int_equal(c1 % 512, 0);
  assert_int_equal(be.chunk_alloc(be.ctx, 8 * MiB, &c2), VS_BACKEND_OOM);
  assert_int_equal(be.phys_create(be.ctx, 6 * MiB, &h), VS_BACKEND_OK);
  assert_int_equal(be.phys_create(be.ctx, 2 * MiB, &c2), VS_BACKEND_OOM);
  assert_int_equal(be.va_reserve(be.ctx, 64 * MiB, &va), VS_BACKEND_OK);
  assert_int_equal(va % (2 * MiB), 0);
  assert_int_equal(be.map(be.ctx, va, 6 * MiB, h), VS_BACKEND_OK);
  assert_int_equal(be.map(be.ctx, va, 6 * MiB, h), VS_BACKEND_ERROR);     /* over a mapping */
  assert_int_equal(be.phys_release(be.ctx, h, 6 * MiB), VS_BACKEND_ERROR); /* still mapped */
  assert_int_equal(be.va_free(be.ctx, va, 64 * MiB), VS_BACKEND_ERROR);     /* still mapped */
  assert_int_equal(be.unmap(be.ctx, va, 6 * MiB), VS_BACKEND_OK);
  assert_int_equal(be.phys_release(be.ctx, h, 6 * MiB), VS_BACKEND_OK);
  assert_int_equal(be.va_free(be.ctx, va, 64 * MiB), VS_BACKEND_OK);
  assert_int_equal(be.chunk_free(be.ctx, c1, 4 * MiB), VS_BACKEND_OK);
  assert_int_equal(be.chunk_free(be.ctx, c1, 4 * MiB), VS_BACKEND_ERROR);   /* double free */
  assert_int_equal(be.sync(be.ctx), VS_BACKEND_OK);
  vs_space_counters c;
  vs_space_backend_counters(sb, &c);
  assert_int_equal(c.held, 0);
  assert_int_equal(c.peak_held, 10 * MiB);
  assert_int_equal(c.oom, 2);
  assert_int_equal(c.errors, 4);
  assert_int_equal(c.sync, 1);
  assert_int_equal(c.map, 2);
  vs_space_backend_destroy(sb);
}

static void small_layer(vs_arena_mode mode) {
  fixture f;
  fx_open(&f, mode, UINT64_MAX, GiB);
  enum { N = 3000 };
  fx_hot_classes(f.a);   /* the slab layer under test (VMM: classes take slabs after traffic) */
  uint64_t *p = calloc(N, sizeof *p), *sz = calloc(N, sizeof *sz), seed = 7;
  for (int i = 0; i < N; i++) {
    sz[i] = 1 + rng_next(&seed) % (64 << 10);
    assert_int_equal(vs_arena_alloc(f.a, sz[i], &p[i]), 0);
    assert_int_equal(p[i] % 512, 0);
    uint64_t s, n;
    assert_int_equal(vs_arena_lookup(f.a, p[i] + sz[i] - 1, &s, &n), 0);
    assert_int_equal(s, p[i]);
    assert_int_equal(n, sz[i]);
    if (i % 97 == 0) CHECK(f.a);
  }
  CHECK(f.a);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.live_count, N);
  assert_true(st.class_count >= 20);
  uint64_t slots = 0, live = 0;
  for (uint32_t c = 0; c < st.class_count; c++) { slots += st.class_slots[c]; live += st.class_live[c]; }
  assert_int_equal(live, N);
  assert_true(slots >= N);
  for (int i = 0; i < N; i += 2) {
    assert_int_equal(vs_arena_free(f.a, p[i]), 0);
    assert_int_equal(vs_arena_free(f.a, p[i]), -1);   /* double free: refused, nothing changes */
    if (i % 101 == 0) CHECK(f.a);
  }
  CHECK(f.a);
  for (int i = 1; i < N; i += 2) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  CHECK(f.a);
  vs_arena_trim(f.a, 0);
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.live_bytes, 0);
  assert_int_equal(st.reserved_bytes, 0);
  free(p);
  free(sz);
  fx_close(&f);
}
static void arena_small_vmm(void **s) { (void)s; small_layer(VS_ARENA_VMM); }
static void arena_small_chunks(void **s) { (void)s; small_layer(VS_ARENA_CHUNKS); }

static void heap_layer(vs_arena_mode mode) {
  fixture f;
  fx_open(&f, mode, UINT64_MAX, 0);
  uint64_t a, b, c, s, n;
  assert_int_equal(vs_arena_alloc(f.a, 100 * MiB + 1, &a), 0);
  CHECK(f.a);
  assert_int_equal(vs_arena_alloc(f.a, 5 * MiB, &b), 0);
  CHECK(f.a);
  assert_int_equal(vs_arena_alloc(f.a, 300 << 10, &c), 0);
  CHECK(f.a);
  assert_int_equal(a % 512 + b % 512 + c % 512, 0);
  assert_int_equal(vs_arena_lookup(f.a, a + 100 * MiB, &s, &n), 0);
  assert_int_equal(s, a);
  assert_int_equal(n, 100 * MiB + 1);
  assert_int_equal(vs_arena_lookup(f.a, a + 100 * MiB + 1, &s, &n) == 0 && s == a, 0);  /* past the request */
  uint64_t base, off;
  int vmm;
  assert_int_equal(vs_arena_placement(f.a, b + 10, &base, &off, &vmm), 0);
  assert_int_equal(base + off, b);
  assert_int_equal(vmm, mode == VS_ARENA_VMM);
  assert_int_equal(vs_arena_lookup(f.a, 12345, &s, &n), -1);
  assert_int_equal(vs_arena_free(f.a, 12345), -1);
  assert_int_equal(vs_arena_free(f.a, b + 512), -1);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.live_bytes, 100 * MiB + 1 + 5 * MiB + (300 << 10));
  assert_int_equal(st.internal_waste, 511);
  assert_true(st.reserved_bytes >= st.live_bytes);
  assert_int_equal(vs_arena_free(f.a, a), 0);
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.pending_bytes, 100 * MiB + 512);
  assert_int_equal(vs_arena_free(f.a, b), 0);
  assert_int_equal(vs_arena_free(f.a, c), 0);
  CHECK(f.a);
  /* With release_threshold 0, a trim gives everything back. */
  vs_arena_trim(f.a, 0);
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.reserved_bytes, 0);
  assert_int_equal(st.pending_bytes, 0);
  fx_close(&f);
}
/* Chunks mode: blocks between VS_DEDICATED_MIN and VS_OWN_CHUNK_MIN get
 * a chunk of VS_SHARED_CHUNK_MULT times their size, which later such
 * blocks share, rather than one each while the heap is small (its growth
 * step then is below their size); from VS_OWN_CHUNK_MIN on a block's chunk
 * is its own size. */
static void arena_chunks_share_mid_blocks(void **s) {
  (void)s;
  fixture f;
  uint64_t x[4], big;
  vs_space_counters c;
  fx_open(&f, VS_ARENA_CHUNKS, UINT64_MAX, GiB);
  vs_arena_set_stream_ordered(f.a, 1);
  for (int i = 0; i < 4; i++) assert_int_equal(vs_arena_alloc(f.a, 10 * MiB, &x[i]), 0);
  CHECK(f.a);
  vs_space_backend_counters(f.sb, &c);
  assert_int_equal(c.chunk_alloc, 4 / VS_SHARED_CHUNK_MULT);   /* 10 MiB blocks, 20 MiB chunks */
  assert_int_equal(c.held, 40 * MiB);
  assert_int_equal(vs_arena_alloc(f.a, 40 * MiB, &big), 0);
  vs_space_backend_counters(f.sb, &c);
  assert_int_equal(c.chunk_alloc, 4 / VS_SHARED_CHUNK_MULT + 1);
  assert_int_equal(c.held, 80 * MiB);                           /* a large block's chunk: its size */
  CHECK(f.a);
  for (int i = 0; i < 4; i++) assert_int_equal(vs_arena_free(f.a, x[i]), 0);
  assert_int_equal(vs_arena_free(f.a, big), 0);
  fx_close(&f);
}

/* chunks: a block up to VS_KEEP_OUT_MAX does not take the wholly free
 * chunk of a large block that died while a medium chunk can be made for
 * it: placed there, it would pin the whole chunk, and the next large block
 * would need new memory the card may not have. Unconstrained: a new medium
 * chunk. On a 96 MiB card (pressure: the medium chunk would leave no room
 * beside the free 64 MiB): a chunk of the block's own size, and the next
 * 64 MiB block still fits (without the rule it was refused). On a 64 MiB
 * card, where nothing new can be had: the own chunk after all. */
static void arena_small_blocks_keep_out_of_own_chunks(void **s) {
  (void)s;
  const uint64_t cards[3] = {UINT64_MAX, 96 * MiB, 64 * MiB};
  for (int i = 0; i < 3; i++) {
    fixture f;
    fx_open(&f, VS_ARENA_CHUNKS, cards[i], GiB);
    vs_arena_set_stream_ordered(f.a, 1);
    uint64_t big, small, big2, base_big, base_small, off;
    int vmm;
    vs_space_counters c;
    assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &big), 0);
    assert_int_equal(vs_arena_placement(f.a, big, &base_big, &off, &vmm), 0);
    assert_int_equal(vs_arena_free(f.a, big), 0);
    assert_int_equal(vs_arena_alloc(f.a, 256 << 10, &small), 0);
    CHECK(f.a);
    assert_int_equal(vs_arena_placement(f.a, small, &base_small, &off, &vmm), 0);
    vs_space_backend_counters(f.sb, &c);
    if (i == 2) {
      assert_int_equal(base_small, base_big);
      assert_int_equal(c.held, 64 * MiB);
    } else {
      assert_true(base_small != base_big);
      assert_int_equal(c.held, 64 * MiB + (i == 0 ? VS_CHUNK_MEDIUM : VS_SLAB_SIZE));
      assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &big2), 0);
      assert_int_equal(vs_arena_placement(f.a, big2, &base_big, &off, &vmm), 0);
      assert_int_equal(base_big, big);   /* the own chunk, whole again */
      assert_int_equal(vs_arena_free(f.a, big2), 0);
    }
    CHECK(f.a);
    assert_int_equal(vs_arena_free(f.a, small), 0);
    fx_close(&f);
  }
}

static void arena_heap_vmm(void **s) { (void)s; heap_layer(VS_ARENA_VMM); }
static void arena_heap_chunks(void **s) { (void)s; heap_layer(VS_ARENA_CHUNKS); }

/* Two chunks (chunks mode) or two physical handles (VMM: 32 MiB growth
 * steps) of 1 MiB blocks, each with equally good holes: the allocation is
 * taken from the fuller one, so the sparse one drains and can go back whole
 * -- even though its holes have lower addresses. */
static void fullest_first(vs_arena_mode mode) {
  fixture f;
  fx_open(&f, mode, UINT64_MAX, GiB);
  enum { N = 64, HALF = 32 };
  uint64_t p[N], base[N], off;
  int vmm;
  for (int i = 0; i < N; i++) {
    assert_int_equal(vs_arena_alloc(f.a, MiB, &p[i]), 0);
    assert_int_equal(vs_arena_placement(f.a, p[i], &base[i], &off, &vmm), 0);
    if (i) assert_int_equal(p[i], p[i - 1] + MiB);  /* packed, rising */
  }
  CHECK(f.a);
  if (mode == VS_ARENA_CHUNKS) {
    assert_int_equal(base[0], base[HALF - 1]);
    assert_int_equal(base[HALF], base[N - 1]);
    assert_true(base[0] != base[HALF]);
  } else {
    vs_space_counters c;
    vs_space_backend_counters(f.sb, &c);
    assert_int_equal(c.phys_create, 2);  /* two handles of 32 MiB */
  }
  /* The first keeps every other block; the second loses one. */
  for (int i = 0; i < HALF; i += 2) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  assert_int_equal(vs_arena_free(f.a, p[HALF + 1]), 0);
  vs_arena_trim(f.a, GiB);  /* one sync: the pending frees become free; nothing goes back */
  CHECK(f.a);
  uint64_t q;
  assert_int_equal(vs_arena_alloc(f.a, MiB, &q), 0);
  assert_int_equal(q, p[HALF + 1]);
  CHECK(f.a);
  fx_close(&f);
}
static void arena_fullest_chunk_first(void **s) { (void)s; fullest_first(VS_ARENA_CHUNKS); }
static void arena_fullest_handle_first(void **s) { (void)s; fullest_first(VS_ARENA_VMM); }

/* VMM: a request that fits in no mapped free space grows the heap while the
 * backend grants memory, leaving a wholly free handle elsewhere where it is
 * (moving it costs an unmap, a map and an access, what a new handle costs,
 * and the hole it left is where the next step of a loop wanted memory); at
 * the limit, once the backend has refused, such a handle is moved under
 * the request instead (stitching). */
static void arena_moves_handles_only_at_limit(void **s) {
  (void)s;
  fixture f;
  fx_open(&f, VS_ARENA_VMM, UINT64_MAX, GiB);
  vs_arena_set_stream_ordered(f.a, 1);   /* frees reusable at once */
  vs_space_counters c;
  uint64_t a, b, x, y;
  assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &a), 0);   /* its own handle: the first allocation */
  assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &b), 0);
  assert_int_equal(vs_arena_free(f.a, a), 0);   /* a's handle: wholly free, 64 MiB of VA */
  CHECK(f.a);
  vs_space_backend_counters(f.sb, &c);
  const uint64_t created = c.phys_create;
  assert_int_equal(vs_arena_alloc(f.a, 160 * MiB, &x), 0);   /* fits in no free mapped range */
  CHECK(f.a);
  vs_space_backend_counters(f.sb, &c);
  assert_int_equal(c.unmap, 0);   /* a's handle stayed where it was */
  assert_true(c.phys_create > created);
  assert_int_equal(vs_arena_free(f.a, x), 0);
  assert_int_equal(vs_arena_free(f.a, b), 0);
  fx_close(&f);

  /* A card of 256 MiB: a refused request turns pressure on (physical
   * memory in smaller handles from then on: 1/VS_HANDLE_PRESSURE_DIV of
   * the run each, here 48 MiB / 8). p1's handles, wholly free in a range the
   * 72 MiB request does not fit in, are moved under it. */
  fx_open(&f, VS_ARENA_VMM, 256 * MiB, GiB);
  vs_arena_set_stream_ordered(f.a, 1);
  uint64_t p1, p2, q;
  assert_int_not_equal(vs_arena_alloc(f.a, 300 * MiB, &y), 0);
  assert_int_equal(vs_arena_alloc(f.a, 48 * MiB, &p1), 0);
  assert_int_equal(vs_arena_alloc(f.a, 48 * MiB, &p2), 0);
  assert_int_equal(vs_arena_free(f.a, p1), 0);
  CHECK(f.a);
  vs_space_counters c0;
  vs_space_backend_counters(f.sb, &c0);
  assert_int_equal(vs_arena_alloc(f.a, 72 * MiB, &q), 0);
  CHECK(f.a);
  vs_space_backend_counters(f.sb, &c);
  assert_int_equal(c.oom, c0.oom);
  assert_int_equal(c.phys_release, c0.phys_release);
  assert_int_equal(c.unmap - c0.unmap, VS_HANDLE_PRESSURE_DIV);   /* p1's 48 MiB, in 48 MiB / DIV handles, moved */
  assert_int_equal(c.held - c0.held, 24 * MiB);      /* and only the rest is new */
  assert_int_equal(vs_arena_free(f.a, q), 0);
  assert_int_equal(vs_arena_free(f.a, p2), 0);
  fx_close(&f);
}

/* Under pressure a handle is an eighth of the run it backs: a small block
 * later laid where a freed large one was pins an eighth of it, and the rest
 * moves under the next large request. A 256 MiB card, pressure on (a
 * refusal); a 64 MiB block (eight 8 MiB handles) and a 176 MiB one leave
 * 16 MiB of room; the 64 MiB block freed and a 2 MiB one made in its hole;
 * a 70 MiB request fits in no hole: seven handles (56 MiB) move under it
 * and 14 MiB are new. With handles a quarter of the run (the rule before)
 * the 2 MiB block pinned 16 MiB and 22 MiB new did not fit: refused. */
static void arena_pressure_handles_eighth(void **s) {
  (void)s;
  fixture f;
  uint64_t y, a, big, small, q;
  vs_space_counters c0, c;
  fx_open(&f, VS_ARENA_VMM, 256 * MiB, GiB);
  vs_arena_set_stream_ordered(f.a, 1);
  assert_int_not_equal(vs_arena_alloc(f.a, 300 * MiB, &y), 0);   /* pressure on */
  assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &a), 0);
  assert_int_equal(vs_arena_alloc(f.a, 176 * MiB, &big), 0);
  assert_int_equal(vs_arena_free(f.a, a), 0);
  assert_int_equal(vs_arena_alloc(f.a, 2 * MiB, &small), 0);
  assert_true(small >= a && small < a + 64 * MiB);                 /* in the freed block's hole */
  CHECK(f.a);
  vs_space_backend_counters(f.sb, &c0);
  assert_int_equal(c0.held, 240 * MiB);
  assert_int_equal(vs_arena_alloc(f.a, 70 * MiB, &q), 0);
  CHECK(f.a);
  vs_space_backend_counters(f.sb, &c);
  assert_int_equal(c.oom, c0.oom);
  assert_int_equal(c.unmap - c0.unmap, 7);           /* the handles the small block does not touch */
  assert_int_equal(c.held - c0.held, 14 * MiB);      /* and only the rest is new */
  assert_int_equal(vs_arena_free(f.a, q), 0);
  assert_int_equal(vs_arena_free(f.a, small), 0);
  assert_int_equal(vs_arena_free(f.a, big), 0);
  fx_close(&f);
}

/* Between two readings of the backend's counters nothing was released,
 * mapped, unmapped or held anew. */
static void nothing_moved(const vs_space_counters *c0, const vs_space_counters *c) {
  assert_int_equal(c->phys_release, c0->phys_release);
  assert_int_equal(c->map, c0->map);
  assert_int_equal(c->unmap, c0->unmap);
  assert_int_equal(c->held, c0->held);
}

/* Under pressure a run is covered by small handles (an eighth of it), and
 * a growth the backend could not grant in full made every handle before
 * the refused one, then released them (heap.c, cannot_cover): at a
 * tenant's limit under on_limit = spill that was a handful of creates and
 * releases per spilled request. A growth beyond the backend's room and
 * the pooled handles is now asked for in one handle: refused before any
 * is made. A growth within the room is still made in small handles. */
static void arena_refused_growth_makes_no_handle(void **s) {
  (void)s;
  fixture f;
  uint64_t y, big, q, ok;
  vs_space_counters c0, c;
  fx_open(&f, VS_ARENA_VMM, 256 * MiB, GiB);
  vs_arena_set_stream_ordered(f.a, 1);
  assert_int_not_equal(vs_arena_alloc(f.a, 300 * MiB, &y), 0);   /* pressure on */
  assert_int_equal(vs_arena_alloc(f.a, 200 * MiB, &big), 0);
  CHECK(f.a);
  vs_space_backend_counters(f.sb, &c0);
  assert_true(c0.held >= 200 * MiB && c0.held <= 208 * MiB);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(vs_arena_alloc(f.a, 100 * MiB, &q), VS_BACKEND_OOM);
    CHECK(f.a);
  }
  vs_space_backend_counters(f.sb, &c);
  /* Every create asked for was refused (the space backend counts those
   * too; the shim's quota refuses one before the driver is called). */
  assert_true(c.oom > c0.oom);
  assert_int_equal(c.phys_create - c0.phys_create, c.oom - c0.oom);
  nothing_moved(&c0, &c);
  c0 = c;
  assert_int_equal(vs_arena_alloc(f.a, 40 * MiB, &ok), 0);
  CHECK(f.a);
  vs_space_backend_counters(f.sb, &c);
  assert_int_equal(c.oom, c0.oom);
  assert_true(c.phys_create - c0.phys_create >= 2);   /* small handles, as before */
  assert_int_equal(vs_arena_free(f.a, ok), 0);
  assert_int_equal(vs_arena_free(f.a, big), 0);
  fx_close(&f);
}

/* Sixteen random steps over the 64 slots of live: a slot holding a block
 * frees it, an empty one allocates 1 B to 56 MiB (left empty if refused). */
static void random_steps(fixture *f, uint64_t *live, uint64_t *seed) {
  for (int i = 0; i < 16; i++) {
    int j = (int)(rng_next(seed) % 64);
    if (live[j]) {
      assert_int_equal(vs_arena_free(f->a, live[j]), 0);
      live[j] = 0;
    } else {
      uint64_t k = rng_next(seed) % 10, size = k < 5 ? 1 + rng_next(seed) % (64 << 10)
                                              : k < 9 ? (64 << 10) + rng_next(seed) % (8 * MiB)
                                                      : 8 * MiB + rng_next(seed) % (48 * MiB);
      if (vs_arena_alloc(f->a, size, &live[j]) != 0) live[j] = 0;
    }
  }
}

static void free_slots(fixture *f, uint64_t *live) {
  for (int j = 0; j < 64; j++)
    if (live[j]) assert_int_equal(vs_arena_free(f->a, live[j]), 0);
}

/* What a 512 MiB space backend still grants. */
static uint64_t room_of(fixture *f) {
  vs_space_counters c;
  vs_space_backend_counters(f->sb, &c);
  return 512 * MiB - c.held;
}

/* vs_heap_ladder_piece is an upper bound: after random traffic near a
 * full 512 MiB card (random_steps), with the whole cache given back, a
 * request one byte longer than the piece it named is refused (were it
 * low, the ladder would keep a cache whose release let the request fit),
 * and the piece itself mostly granted (a bound that is no use would skip
 * no ladder). */
static void arena_ladder_piece_bounds_retry(void **s) {
  (void)s;
  fixture f;
  fx_open(&f, VS_ARENA_VMM, 512 * MiB, 64 * MiB);
  vs_arena_set_stream_ordered(f.a, 1);
  uint64_t live[64] = {0}, seed = 91, x;
  int checked = 0, granted = 0;
  for (int round = 0; round < 60; round++) {
    random_steps(&f, live, &seed);
    vs_slab_trim(f.a);
    vs_heap *h = &f.a->heap;
    vs_lock_take(&h->mu);
    vs_heap_reclaim(f.a);
    uint64_t piece = vs_heap_ladder_piece(h, room_of(&f));
    vs_lock_give(&h->mu);
    vs_arena_trim(f.a, 0);
    CHECK(f.a);
    if (piece < 8 * MiB || piece >= 512 * MiB) continue;
    checked++;
    if (vs_arena_alloc(f.a, piece + 1, &x) == 0)
      fail_msg("round %d: %llu bytes granted beyond the ladder's piece", round, (unsigned long long)piece);
    CHECK(f.a);
    /* Not a vacuous bound: the piece itself is mostly granted. */
    if (vs_arena_alloc(f.a, piece, &x) == 0) {
      granted++;
      assert_int_equal(vs_arena_free(f.a, x), 0);
    }
    CHECK(f.a);
  }
  assert_true(checked >= 20);
  assert_true(granted * 2 >= checked);
  free_slots(&f, live);
  fx_close(&f);
}

/* A VMM arena on a card of `card` bytes holding two 64 MiB blocks' worth,
 * the first freed (a wholly free handle) and the second, *b, live; *c0 the
 * backend's counters then. */
static void open_with_free_handle(fixture *f, uint64_t card, uint64_t *b, vs_space_counters *c0) {
  uint64_t a;
  fx_open(f, VS_ARENA_VMM, card, GiB);
  vs_arena_set_stream_ordered(f->a, 1);
  assert_int_equal(vs_arena_alloc(f->a, 64 * MiB, &a), 0);
  assert_int_equal(vs_arena_alloc(f->a, 64 * MiB, b), 0);
  assert_int_equal(vs_arena_free(f->a, a), 0);
  CHECK(f->a);
  vs_space_backend_counters(f->sb, c0);
  assert_true(c0->held >= 128 * MiB && c0->held < 160 * MiB);   /* b may have grown a step */
}

/* The OOM ladder keeps its cache where its retry cannot fit (heap.c,
 * ladder_futile). A 64 MiB wholly free handle beside a live 64 MiB block
 * on a 256 MiB card (open_with_free_handle): a 200 MiB request cannot fit
 * even with the handle released (room at most 128 MiB + 64 MiB). Refused
 * with nothing released or moved, and the handle then serves a 64 MiB
 * request with no new one made (before: the ladder released it, and the
 * next request made it again). */
static void arena_futile_ladder_keeps_cache(void **s) {
  (void)s;
  fixture f;
  uint64_t a, b, x;
  vs_space_counters c0, c;
  open_with_free_handle(&f, 256 * MiB, &b, &c0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(vs_arena_alloc(f.a, 200 * MiB, &x), VS_BACKEND_OOM);
    CHECK(f.a);
  }
  vs_space_backend_counters(f.sb, &c);
  nothing_moved(&c0, &c);   /* nor moved under the refused block first (heap.c, steal_short) */
  c0 = c;
  assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &a), 0);
  CHECK(f.a);
  vs_space_backend_counters(f.sb, &c);
  assert_int_equal(c.phys_create, c0.phys_create);
  assert_int_equal(c.oom, c0.oom);
  /* A request that fits once the cache is given back is still granted. */
  assert_int_equal(vs_arena_free(f.a, a), 0);
  assert_int_equal(vs_arena_alloc(f.a, 150 * MiB, &x), 0);
  CHECK(f.a);
  assert_int_equal(vs_arena_free(f.a, x), 0);
  assert_int_equal(vs_arena_free(f.a, b), 0);
  fx_close(&f);
}

/* A card nearly full is treated as one that has refused (heap.c,
 * pressure_from_room). 128 MiB held, 64 of them a wholly free handle; a
 * 160 MiB request fits in no mapped free range (b may have grown a few
 * MiB of step beyond it). On a 1 GiB card it grows and the free handle
 * stays where it is. On a 256 MiB card the growth would leave the card
 * less room than the heap holds free: the free handle is moved under the
 * request and only the rest is new, so the card never refuses and nothing
 * is given back (before the rule: a refusal, then the OOM ladder released
 * the handle and the retry grew 160 MiB). */
/* One 160 MiB request on a card of `card` bytes (open_with_free_handle):
 * under pressure the free handle moves under it and only the rest is new;
 * on a 1 GiB card it grows and the handle stays. Never a refusal. With
 * `room_left`, the card must still have room for a second 160 MiB block,
 * which then fits with no refusal. */
static void pressure_case(uint64_t card, int room_left) {
  fixture f;
  uint64_t b, x, y = 0;
  vs_space_counters c0, c;
  open_with_free_handle(&f, card, &b, &c0);
  assert_int_equal(vs_arena_alloc(f.a, 160 * MiB, &x), 0);
  CHECK(f.a);
  vs_space_backend_counters(f.sb, &c);
  assert_int_equal(c.oom, 0);
  assert_int_equal(c.phys_release, 0);
  if (card < GiB) {
    assert_int_equal(c.unmap - c0.unmap, 1);           /* a's handle, moved */
    assert_true(c.held - c0.held <= 96 * MiB);         /* only the rest is new */
  } else {
    assert_int_equal(c.unmap, 0);
    assert_true(c.held - c0.held >= 160 * MiB - (c0.held - 128 * MiB));   /* a's handle not used */
  }
  if (room_left) {
    assert_true(card - c.held >= 160 * MiB);
    assert_int_equal(vs_arena_alloc(f.a, 160 * MiB, &y), 0);
    vs_space_backend_counters(f.sb, &c);
    assert_int_equal(c.oom, 0);
    assert_int_equal(vs_arena_free(f.a, y), 0);
  }
  assert_int_equal(vs_arena_free(f.a, x), 0);
  assert_int_equal(vs_arena_free(f.a, b), 0);
  fx_close(&f);
}
static void arena_pressure_before_refusal(void **s) {
  (void)s;
  pressure_case(GiB, 1);
  pressure_case(256 * MiB, 0);
}

/* VMM counts the largest block made with the free memory held: pressure
 * once, after a growth, the card could not take both again (heap.c,
 * pressure_from_room). 128 MiB held, 64 of them a wholly free handle, the
 * largest block so far 64 MiB; a 160 MiB request fits in no mapped free
 * range. On a 384 MiB card the growth would leave 96 MiB of room at most:
 * more than the 64 MiB held free (the eleventh round's rule alone grew
 * 160 MiB and kept the free handle where it was, leaving 96 MiB for the
 * next large block), less than that and another 64 MiB block. The free
 * handle is moved under the request and only the rest is new: the card
 * keeps room for the next 160 MiB block without a move. On a 1 GiB card
 * nothing changes. */
static void arena_pressure_counts_largest(void **s) {
  (void)s;
  pressure_case(384 * MiB, 1);
}

/* The largest block once and a half: on a 448 MiB card the growth would
 * leave 128 to 160 MiB of room, enough for the 64 MiB held free and one
 * more 64 MiB block, not for half of one again. Pressure: the free handle
 * moves under the request, and the card keeps room for the next 160 MiB
 * block (with the block counted once, it grew 160 MiB and kept the
 * handle in place). */
static void arena_pressure_counts_largest_and_half(void **s) {
  (void)s;
  pressure_case(448 * MiB, 1);
}

typedef struct { uint64_t regions, blocks, live, bytes_in_regions; int ordered; uint64_t last_end; } walk_acc;
/* Growth takes the slabs' empty memory first: a server whose small
 * requests passed through many size classes leaves each class's emptied
 * current slab (and a spare) held by its bin. Before the heap calls the
 * driver to grow, those slabs go back to it: a request that fits in the
 * memory they held is served with no growth. Without that rule each bin
 * kept its empty slab for good and the request below grew the heap. */
static void empty_slabs_before_growth(vs_arena_mode mode) {
  fixture f;
  fx_open(&f, mode, 8 * GiB, GiB);
  vs_arena_set_stream_ordered(f.a, 1);   /* frees reusable at once: empty slabs are empty now */
  fx_hot_classes(f.a);
  enum { N = 20 };
  uint64_t p[N];
  vs_arena_stats st;
  /* One request in each of N size classes (512 B steps to 2 KiB, then four
   * per doubling: docs/arena.md), all below 64 KiB. */
  uint32_t n = 0;
  for (uint64_t size = 512; n < N; n++, size = fx_next_class(size))
    assert_int_equal(vs_arena_alloc(f.a, size, &p[n]), 0);
  CHECK(f.a);
  for (uint32_t i = 0; i < n; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  const uint64_t held = st.reserved_bytes, calls = st.backend_calls;
  assert_int_equal(st.live_bytes, 0);
  assert_true(held >= N * 2 * MiB);   /* the slabs are still held */
  /* 30 MiB: more than the heap holds outside the slabs (the heap grew by
   * 32 MiB steps or chunks for the 40 MiB of slabs), less than a chunk: it
   * fits only if the empty slabs come back to the heap. */
  uint64_t big;
  assert_true(held - N * 2 * MiB < 30 * MiB);
  assert_int_equal(vs_arena_alloc(f.a, 30 * MiB, &big), 0);
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.reserved_bytes, held);
  assert_int_equal(st.backend_calls, calls);
  /* Small requests still work afterwards (their bins take new slabs). */
  uint64_t q;
  assert_int_equal(vs_arena_free(f.a, big), 0);
  assert_int_equal(vs_arena_alloc(f.a, 512, &q), 0);
  assert_int_equal(vs_arena_free(f.a, q), 0);
  fx_close(&f);
}
static void arena_empty_slabs_before_growth_vmm(void **s) { (void)s; empty_slabs_before_growth(VS_ARENA_VMM); }
static void arena_empty_slabs_before_growth_chunks(void **s) { (void)s; empty_slabs_before_growth(VS_ARENA_CHUNKS); }

/* VMM: a climb (allocations with no free between the heap's growths) grows
 * twice as far ahead as growth after frees, so it makes fewer growths. The
 * same 1 GiB climb in 16 MiB blocks over a 4 GiB heap, once as it is and
 * once with a short-lived 1 MiB block freed after each block: without the
 * climb rule both grow by the same held / 64 steps. */
static uint64_t climb_calls(int churn) {
  fixture f;
  fx_open(&f, VS_ARENA_VMM, 16 * GiB, GiB);
  vs_arena_set_stream_ordered(f.a, 1);
  uint64_t base, p[64], t;
  assert_int_equal(vs_arena_alloc(f.a, 4 * GiB, &base), 0);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  const uint64_t calls0 = st.backend_calls;
  for (int i = 0; i < 64; i++) {
    assert_int_equal(vs_arena_alloc(f.a, 16 * MiB, &p[i]), 0);
    if (churn) {
      assert_int_equal(vs_arena_alloc(f.a, MiB, &t), 0);
      assert_int_equal(vs_arena_free(f.a, t), 0);
    }
  }
  CHECK(f.a);
  vs_arena_get_stats(f.a, &st);
  assert_true(st.reserved_bytes <= st.live_bytes + st.live_bytes / 32 + 2 * MiB);   /* ahead: at most held / 32 */
  uint64_t calls = st.backend_calls - calls0;
  for (int i = 0; i < 64; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  assert_int_equal(vs_arena_free(f.a, base), 0);
  fx_close(&f);
  return calls;
}
/* A climb grows ahead, and frees between its steps do not shrink that to
 * the plain held/64 step: below 1.03 x the live high a growth reaches that
 * level either way (floor_step, heap.c). */
static void arena_climb_grows_further(void **s) {
  (void)s;
  uint64_t climb = climb_calls(0), churn = climb_calls(1);
  print_message("climb: %llu backend calls, with frees between: %llu\n", (unsigned long long)climb, (unsigned long long)churn);
  assert_true(climb > 0);
  assert_true(climb <= churn);
  assert_true(churn * 100 <= climb * 125);
}

/* A server loading its weights, tensors of 128 and 384 MiB in turn (8
 * GiB): the floor (replay_floor.h) grows to 1.03 x the live high whenever
 * live exceeds what it holds. The heap grows no more often than that plus
 * two, and holds no more than 1.03 x live and a granule per growth. The
 * proportional step alone grew once per tensor up to 4 GiB held and left
 * no room above a tensor larger than the step (checked: built with
 * VS_GROW_TO=0, 32 growths here, one per tensor, against the floor's 25;
 * and the climb test above 16 calls against 28 with frees between). */
static void arena_growth_to_floor_level(void **s) {
  (void)s;
  fixture f;
  fx_open(&f, VS_ARENA_VMM, 64 * GiB, GiB);
  vs_arena_set_stream_ordered(f.a, 1);
  enum { N = 32 };
  uint64_t p[N], live = 0, hwm = 0, held = 0, floor_growths = 0;
  for (int i = 0; i < N; i++) {
    uint64_t size = (i % 2 ? 384 : 128) * MiB;
    assert_int_equal(vs_arena_alloc(f.a, size, &p[i]), 0);
    live += size;
    if (live > hwm) hwm = live;
    if (live > held) { held = hwm / 100 * 103; floor_growths++; }
  }
  CHECK(f.a);
  vs_space_counters c;
  vs_space_backend_counters(f.sb, &c);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  print_message("weights: %llu growths (the floor: %llu), %llu MiB held for %llu MiB live\n",
                (unsigned long long)c.phys_create, (unsigned long long)floor_growths,
                (unsigned long long)(st.reserved_bytes >> 20), (unsigned long long)(live >> 20));
  assert_true(c.phys_create <= floor_growths + 2);
  assert_true(st.reserved_bytes <= live / 100 * 103 + c.phys_create * 2 * MiB);
  for (int i = 0; i < N; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  fx_close(&f);
}

static void on_region(void *u, const vs_region_info *r) { walk_acc *w = u; w->regions++; w->last_end = 0; (void)r; }
static void on_block(void *u, const vs_region_info *r, const vs_block_info *b) {
  walk_acc *w = u;
  w->blocks++;
  if (b->state == VS_BLOCK_LIVE && r->kind != VS_REGION_VMM_RANGE && r->kind != VS_REGION_CHUNK) w->live++;
  if (b->offset < w->last_end || b->offset + b->size > r->size) w->ordered = 0;
  w->last_end = b->offset + b->size;
}

/* VMM mode: a size class takes slabs once it has made a slab's worth of
 * requests; until then its blocks lie in the heap's small region, mapped
 * granule by granule (a small model's few biases held a 2 MiB slab per
 * class: issue 27, seventeenth round). Chunks mode: a slab at once. */
static uint64_t slab_slots(vs_arena *a) {
  vs_arena_stats st;
  vs_arena_get_stats(a, &st);
  uint64_t n = 0;
  for (uint32_t c = 0; c < st.class_count; c++) n += st.class_slots[c];
  return n;
}
static void arena_small_classes_take_slabs_after_traffic(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, VS_ARENA_VMM, UINT64_MAX, GiB);
  enum { N = 2 * MiB / 4096 + 1 };
  uint64_t p[N];
  for (int i = 0; i < 10; i++) assert_int_equal(vs_arena_alloc(f.a, 4096, &p[i]), 0);
  CHECK(f.a);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(slab_slots(f.a), 0);
  assert_int_equal(st.live_count, 10);
  assert_int_equal(st.reserved_bytes, 2 * MiB);   /* one granule: no growth step for small blocks */
  for (int i = 10; i < N; i++) assert_int_equal(vs_arena_alloc(f.a, 4096, &p[i]), 0);
  assert_true(slab_slots(f.a) >= 2 * MiB / 4096);   /* the last one took a slab */
  CHECK(f.a);
  for (int i = 0; i < N; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  fx_close(&f);
  fx_open(&f, VS_ARENA_CHUNKS, UINT64_MAX, GiB);
  assert_int_equal(vs_arena_alloc(f.a, 4096, &p[0]), 0);
  assert_true(slab_slots(f.a) >= 2 * MiB / 4096);
  assert_int_equal(vs_arena_free(f.a, p[0]), 0);
  fx_close(&f);
}

static void arena_walk_stats(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, VS_ARENA_VMM, UINT64_MAX, GiB);
  fx_hot_class(f.a, 4096);
  uint64_t p[10];
  for (int i = 0; i < 10; i++) assert_int_equal(vs_arena_alloc(f.a, 4096, &p[i]), 0);
  uint64_t big;
  assert_int_equal(vs_arena_alloc(f.a, 64 * MiB, &big), 0);
  assert_int_equal(vs_arena_free(f.a, big), 0);
  walk_acc w = {.ordered = 1};
  vs_arena_walker wk = {.user = &w, .region = on_region, .block = on_block};
  vs_arena_walk(f.a, &wk);
  assert_true(w.regions >= 2);   /* the VMM range and one slab */
  assert_int_equal(w.live, 10);  /* slab slots, one block each */
  assert_true(w.ordered);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  uint64_t hb = 0;
  for (int k = 0; k < VS_ARENA_HIST_BUCKETS; k++) hb += st.hist_bytes[k];
  assert_true(hb > 0);
  assert_true(st.largest_free > 0 && st.largest_free <= hb);
  assert_int_equal(st.requests, 11 + 2 * MiB / 4096 + 1);   /* the hot class's requests too */
  CHECK(f.a);
  fx_close(&f);
}

/* The used table keeps its bucket array while the heap holds one block at
 * a time (the anchor, tlsf.h): a loop that allocates and frees one large
 * buffer paid uthash's calloc, memset and free of that array per pair
 * (stream order, 64 MiB vmm pairs: about 1.5 x the time). */
static void arena_tlsf_table_kept_when_empty(void **state) {
  (void)state;
  vs_tlsf t;
  vs_tlsf_init(&t);
  vs_tregion r = {.base = 1ull << 40, .size = 64 * MiB};
  assert_int_equal(vs_tlsf_add_region(&t, &r), 0);
  char err[200];
  assert_int_equal(vs_tlsf_check(&t, err, sizeof err), 0);
  assert_non_null(t.used);   /* the anchor, before any block */
  const void *buckets = t.used->hh.tbl->buckets;
  for (int i = 0; i < 3; i++) {
    vs_tblock *b = vs_tlsf_find(&t, 32 * MiB);
    assert_non_null(b);
    b = vs_tlsf_take_at(&t, b, b->addr, 32 * MiB);
    assert_non_null(b);
    assert_ptr_equal(vs_tlsf_used(&t, r.base), b);
    vs_tlsf_release(&t, b);
    assert_null(vs_tlsf_used(&t, r.base));
    assert_non_null(t.used);
    assert_ptr_equal(t.used->hh.tbl->buckets, buckets);
    if (vs_tlsf_check(&t, err, sizeof err)) fail_msg("%s", err);
  }
  vs_tlsf_remove_region(&t, &r);
  vs_tlsf_fini(&t);
}

/* In stream order a freed heap block is parked (heap.c): the next request
 * of its size gets it back without the TLSF's merge and split, and any
 * other use of the heap frees it first. While parked it is no live block
 * (a second free and a lookup refuse it), the invariants hold, and the
 * stats count its bytes as free; a free of another block or a request of
 * another size coalesces it, as its own free did before. */
static void parked_block(vs_arena_mode mode) {
  fixture f;
  fx_open(&f, mode, UINT64_MAX, GiB);
  vs_arena_set_stream_ordered(f.a, 1);
  uint64_t x, y, again, big, start, len;
  vs_space_counters c0, c1;
  vs_arena_stats st;
  assert_int_equal(vs_arena_alloc(f.a, 3 * MiB, &x), 0);
  assert_int_equal(vs_arena_alloc(f.a, 3 * MiB, &y), 0);
  assert_int_equal(y, x + 3 * MiB);
  for (int i = 0; i < 3; i++) {
    vs_space_backend_counters(f.sb, &c0);
    assert_int_equal(vs_arena_free(f.a, x), 0);
    assert_non_null(f.a->heap.parked);
    CHECK(f.a);
    assert_int_equal(vs_arena_free(f.a, x), -1);
    assert_int_equal(vs_arena_lookup(f.a, x, &start, &len), -1);
    assert_int_equal(vs_arena_lookup(f.a, x + 100, &start, &len), -1);
    assert_int_equal(vs_arena_alloc(f.a, 3 * MiB - 1000, &again), 0);   /* the same 512-byte rounding */
    assert_int_equal(again, x);
    assert_null(f.a->heap.parked);
    assert_int_equal(vs_arena_lookup(f.a, x + 100, &start, &len), 0);
    assert_int_equal(len, 3 * MiB - 1000);
    assert_int_equal(vs_arena_free(f.a, x), 0);
    assert_int_equal(vs_arena_alloc(f.a, 3 * MiB, &again), 0);
    assert_int_equal(again, x);
    vs_space_backend_counters(f.sb, &c1);
    assert_int_equal(c1.chunk_alloc + c1.map + c1.phys_create, c0.chunk_alloc + c0.map + c0.phys_create);
    CHECK(f.a);
  }
  assert_int_equal(vs_arena_free(f.a, x), 0);
  vs_arena_get_stats(f.a, &st);   /* frees the parked block first */
  assert_null(f.a->heap.parked);
  assert_int_equal(st.live_bytes, 3 * MiB);
  assert_int_equal(st.free_bytes, st.reserved_bytes - 3 * MiB);
  assert_true(st.largest_free >= 3 * MiB);
  CHECK(f.a);
  assert_int_equal(vs_arena_alloc(f.a, 3 * MiB, &again), 0);   /* freed, not parked: the TLSF's choice, x still */
  assert_int_equal(again, x);
  assert_int_equal(vs_arena_free(f.a, x), 0);
  assert_int_equal(vs_arena_free(f.a, y), 0);   /* x coalesced, y parked */
  CHECK(f.a);
  assert_int_equal(vs_arena_alloc(f.a, 6 * MiB, &big), 0);   /* y coalesced: one hole from x */
  assert_int_equal(big, x);
  CHECK(f.a);
  assert_int_equal(vs_arena_free(f.a, big), 0);
  fx_close(&f);
}
static void arena_parked_block_vmm(void **s) { (void)s; parked_block(VS_ARENA_VMM); }
static void arena_parked_block_chunks(void **s) { (void)s; parked_block(VS_ARENA_CHUNKS); }

/* vs_tlsf_find_would_take against the TLSF itself: on random states (three
 * regions, sizes from 512 B to 24 MiB, so lists both short and longer than
 * the 32-entry scan), for a live block X whose previous neighbour is not
 * FREE, whenever it answers 1 the block's release followed by a find of its
 * size must return the hole starting at X's address. And at every step
 * vs_tlsf_largest_free is the largest FREE block of a walk. */
static void arena_tlsf_find_would_take_exact(void **state) {
  (void)state;
  vs_tlsf t;
  vs_tlsf_init(&t);
  vs_tregion r[3] = {{.base = 1ull << 40, .size = 256 * MiB}, {.base = 2ull << 40, .size = 64 * MiB},
                     {.base = 3ull << 40, .size = 512 * MiB}};
  for (int i = 0; i < 3; i++) assert_int_equal(vs_tlsf_add_region(&t, &r[i]), 0);
  enum { MAXLIVE = 600 };
  vs_tblock *live[MAXLIVE];
  int n = 0, yes = 0, asked = 0;
  uint64_t seed = 99;
  char err[200];
  for (int step = 0; step < 40000; step++) {
    uint64_t x = rng_next(&seed);
    if (n && (n == MAXLIVE || x % 100 < 47)) {
      int k = (int)((x >> 16) % (uint64_t)n);
      vs_tblock *b = live[k];
      live[k] = live[--n];
      uint64_t addr = b->addr, size = b->size;
      vs_tblock *nx = b->next && b->next->state == VS_TB_FREE ? b->next : NULL;
      int ask = !(b->prev && b->prev->state == VS_TB_FREE);
      int w = ask ? vs_tlsf_find_would_take(&t, size, size + (nx ? nx->size : 0), nx) : 0;
      asked += ask;
      vs_tlsf_release(&t, b);
      if (w) {
        yes++;
        vs_tblock *f = vs_tlsf_find(&t, size);
        if (!f || f->addr != addr)
          fail_msg("step %d: said the find would take 0x%llx, it took 0x%llx", step, (unsigned long long)addr,
                   (unsigned long long)(f ? f->addr : 0));
      }
    } else {
      uint64_t size = 512 * (1 + (x >> 8) % ((x >> 40) % 4 == 0 ? 48 * 1024 : (x >> 40) % 4 == 1 ? 2048 : 16));
      vs_tblock *b = vs_tlsf_find(&t, size);
      if (!b) continue;
      b = vs_tlsf_take_at(&t, b, b->addr, size);
      assert_non_null(b);
      b->req = size;
      live[n++] = b;
    }
    if (step % 1000 == 0 && vs_tlsf_check(&t, err, sizeof err)) fail_msg("%s", err);
    /* vs_tlsf_largest_free against a walk of every block. */
    uint64_t most = 0;
    for (int i = 0; i < 3; i++)
      for (vs_tblock *b = r[i].first; b; b = b->next)
        if (b->state == VS_TB_FREE && b->size > most) most = b->size;
    if (vs_tlsf_largest_free(&t) != most)
      fail_msg("step %d: largest free %llu, the blocks say %llu", step, (unsigned long long)vs_tlsf_largest_free(&t),
               (unsigned long long)most);
  }
  print_message("  %d of %d releases asked: the find would take the block's hole\n", yes, asked);
  assert_true(yes > asked / 10);
  while (n) vs_tlsf_release(&t, live[--n]);
  for (int i = 0; i < 3; i++) vs_tlsf_remove_region(&t, &r[i]);
  vs_tlsf_fini(&t);
}

/* vs_arena_one_piece: the largest single request the arena serves with the
 * backend's room. Whatever it says is granted in one allocation (at once,
 * with a block pinning its chunk or handle, and after random traffic); a
 * chunk a live block pins counts only as far as one request fits in it. */
static void take_one_piece(fixture *f, const char *when) {
  uint64_t n = vs_arena_one_piece(f->a, room_of(f)), p;
  if (!n) return;
  if (vs_arena_alloc(f->a, n, &p) != 0) fail_msg("%s: one piece of %llu bytes refused", when, (unsigned long long)n);
  assert_int_equal(vs_arena_free(f->a, p), 0);
  CHECK(f->a);
}

static void one_piece(vs_arena_mode mode) {
  fixture f;
  fx_open(&f, mode, 512 * MiB, 64 * MiB);
  uint64_t unit = mode == VS_ARENA_VMM ? 2 * MiB : 512;
  /* Empty: the room, in whole growth units. */
  assert_int_equal(vs_arena_one_piece(f.a, 512 * MiB - 1000), (512 * MiB - 1000) / unit * unit);
  take_one_piece(&f, "empty");
  uint64_t odd, big;
  assert_int_equal(vs_arena_alloc(f.a, 3000001, &odd), 0);
  assert_int_equal(vs_arena_alloc(f.a, 40 * MiB, &big), 0);
  assert_int_equal(vs_arena_free(f.a, big), 0);   /* its own chunk or handles: given back whole */
  vs_arena_synced_to(f.a, vs_arena_sync_ticket(f.a));
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  uint64_t n = vs_arena_one_piece(f.a, room_of(&f));
  /* Chunks: the odd block's chunk serves no request beyond its own free
   * part: one piece is the room plus the wholly free chunks, below all the
   * cache. VMM: the handle's free granules go on over new ones. */
  if (mode == VS_ARENA_CHUNKS) assert_true(n < room_of(&f) + st.free_bytes);
  assert_true(n >= room_of(&f) / unit * unit);
  take_one_piece(&f, "one block live");
  assert_int_equal(vs_arena_free(f.a, odd), 0);
  uint64_t live[64] = {0}, seed = 27;
  for (int round = 0; round < 40; round++) {
    random_steps(&f, live, &seed);
    char when[32];
    snprintf(when, sizeof when, "round %d", round);
    take_one_piece(&f, when);
  }
  free_slots(&f, live);
  fx_close(&f);
}

/* Both kept answers forgotten (the locked key's and the lock-free look's):
 * the next view walks. */
static void forget_kept(vs_arena *a) {
  for (int w = 0; w < 2; w++) {
    a->kept[w].valid = 0;
    atomic_store(&a->kept[w].ver, 0);
  }
}

/* The view's kept answers (vs_view_kept): after every single step of
 * random traffic (allocations of every layer, frees that pend, park or
 * release, syncs, trims), vs_arena_one_piece and vs_arena_reclaimable
 * answer as a fresh walk does; and with nothing changed they answer from
 * what they kept without a walk: first the look without a lock (a sentinel
 * put in its answer comes back), then, its key moved by a change that
 * leaves the locked key as it was, the locked look (its sentinel back). */
static void view_kept(vs_arena_mode mode, int ordered) {
  fixture f;
  fx_open(&f, mode, 512 * MiB, 64 * MiB);
  vs_arena_set_stream_ordered(f.a, ordered);
  uint64_t live[64] = {0}, seed = 61 + (uint64_t)ordered, rooms[3] = {0, 64 * MiB, 0};
  int kept = 0, fast = 0;
  for (int step = 0; step < 4000; step++) {
    uint64_t k = rng_next(&seed) % 100;
    int j = (int)(rng_next(&seed) % 64);
    if (k < 3) {
      vs_arena_synced_to(f.a, vs_arena_sync_ticket(f.a));
    } else if (k < 4) {
      vs_arena_trim(f.a, rng_next(&seed) % 2 ? 0 : 32 * MiB);
    } else if (live[j]) {
      assert_int_equal(vs_arena_free(f.a, live[j]), 0);
      live[j] = 0;
    } else {
      uint64_t c = rng_next(&seed) % 10, size = c < 6 ? 1 + rng_next(&seed) % (64 << 10)
                                              : c < 9 ? (64 << 10) + rng_next(&seed) % (8 * MiB)
                                                      : 8 * MiB + rng_next(&seed) % (48 * MiB);
      if (vs_arena_alloc(f.a, size, &live[j]) != 0) live[j] = 0;
    }
    rooms[2] = room_of(&f);
    uint64_t room = rooms[rng_next(&seed) % 3];
    if (f.a->kept[0].valid && f.a->kept[0].room == room) kept++;
    uint64_t piece = vs_arena_one_piece(f.a, room), back = vs_arena_reclaimable(f.a);
    /* Asked again with nothing changed: without a lock, the same. */
    uint32_t ver = atomic_load(&f.a->kept[0].ver);
    if (vs_arena_one_piece(f.a, room) != piece) fail_msg("step %d: asked again, another piece", step);
    if (atomic_load(&f.a->kept[0].ver) == ver) fast++;
    if (step % 97 == 0) CHECK(f.a);   /* the checker walks for the kept answers too */
    forget_kept(f.a);
    uint64_t walked_piece = vs_arena_one_piece(f.a, room), walked_back = vs_arena_reclaimable(f.a);
    if (piece != walked_piece || back != walked_back)
      fail_msg("step %d: kept piece %llu back %llu, walked %llu and %llu", step, (unsigned long long)piece,
               (unsigned long long)back, (unsigned long long)walked_piece, (unsigned long long)walked_back);
  }
  assert_true(kept > 100);
  assert_true(fast > 3900);
  free_slots(&f, live);
  memset(live, 0, sizeof live);
  vs_arena_synced_to(f.a, vs_arena_sync_ticket(f.a));
  vs_arena_trim(f.a, 0);
  /* A slab emptied changes no heap counter: the kept answer compares the
   * empty slabs themselves (the slab's memory is reclaimable once empty). */
  if (mode == VS_ARENA_VMM) fx_hot_class(f.a, 4096);
  uint64_t x;
  assert_int_equal(vs_arena_alloc(f.a, 4096, &x), 0);
  uint64_t before = vs_arena_reclaimable(f.a);
  assert_int_equal(vs_arena_free(f.a, x), 0);
  uint64_t after = vs_arena_reclaimable(f.a);
  forget_kept(f.a);
  assert_int_equal(after, vs_arena_reclaimable(f.a));
  assert_true(after > before);
  /* Nothing changed: the kept answers, not a walk; first without a lock. */
  uint64_t room = room_of(&f);
  (void)vs_arena_one_piece(f.a, room);
  (void)vs_arena_reclaimable(f.a);
  assert_true(f.a->kept[0].valid && f.a->kept[1].valid);
  atomic_store(&f.a->kept[0].f_answer, 12345);
  atomic_store(&f.a->kept[1].f_answer, 678);
  assert_int_equal(vs_arena_one_piece(f.a, room), 12345);
  assert_int_equal(vs_arena_reclaimable(f.a), 678);
  char why[160];
  assert_int_equal(vs_arena_check(f.a, why, sizeof why), -1);   /* the checker finds it */
  assert_non_null(strstr(why, "kept one piece 12345 for room"));
  assert_non_null(strstr(why, "(read without a lock)"));
  /* A change that moves no key of the locked look (a free slot of a live
   * slab taken and given back: no slab empties or fills, no heap change)
   * moves the lock-free key: the locked look answers, from its own kept. */
  uint64_t y, z;
  assert_int_equal(vs_arena_alloc(f.a, 4096, &y), 0);
  assert_int_equal(vs_arena_alloc(f.a, 4096, &z), 0);
  assert_int_equal(vs_arena_free(f.a, z), 0);
  if (!ordered) vs_arena_synced_to(f.a, vs_arena_sync_ticket(f.a));
  (void)vs_arena_one_piece(f.a, room);
  (void)vs_arena_reclaimable(f.a);
  f.a->kept[0].answer = 12345;
  f.a->kept[1].answer = 678;
  assert_int_equal(vs_arena_alloc(f.a, 4096, &z), 0);
  assert_int_equal(vs_arena_free(f.a, z), 0);
  uint32_t ver = atomic_load(&f.a->kept[0].ver);
  assert_int_equal(vs_arena_one_piece(f.a, room), 12345);
  assert_int_equal(vs_arena_reclaimable(f.a), 678);
  assert_int_not_equal(atomic_load(&f.a->kept[0].ver), ver);   /* the locked look ran */
  assert_int_not_equal(vs_arena_one_piece(f.a, room + 2 * MiB), 12345);   /* another room: walked */
  /* A kept answer a walk contradicts: the checker finds it. */
  assert_int_equal(vs_arena_check(f.a, why, sizeof why), -1);
  assert_non_null(strstr(why, "kept reclaimable 678"));
  f.a->kept[0].answer = 12345;
  assert_int_equal(vs_arena_check(f.a, why, sizeof why), -1);
  assert_non_null(strstr(why, "kept one piece 12345"));
  forget_kept(f.a);
  CHECK(f.a);
  assert_int_equal(vs_arena_free(f.a, y), 0);
  fx_close(&f);
}

/* As many empty slabs as when the answer was kept, other ones: one class's
 * slab live again and another's emptied (neither moves a heap counter)
 * moves VMM's piece, and the kept answer with it. */
static void view_kept_other_empty_slab(void) {
  fixture f;
  fx_open(&f, VS_ARENA_VMM, 512 * MiB, 64 * MiB);
  fx_hot_class(f.a, 4096);
  fx_hot_class(f.a, 8192);
  uint64_t x, y;
  assert_int_equal(vs_arena_alloc(f.a, 4096, &x), 0);
  assert_int_equal(vs_arena_alloc(f.a, 8192, &y), 0);
  assert_int_equal(vs_arena_free(f.a, x), 0);
  uint64_t one = vs_arena_one_piece(f.a, 0);
  assert_int_equal(vs_arena_alloc(f.a, 4096, &x), 0);
  assert_int_equal(vs_arena_free(f.a, y), 0);
  uint64_t other = vs_arena_one_piece(f.a, 0);
  forget_kept(f.a);
  assert_int_equal(other, vs_arena_one_piece(f.a, 0));
  assert_int_not_equal(one, other);
  /* No kept answers (host memory short at creation): every view walks. */
  free(f.a->kept);
  f.a->kept = NULL;
  assert_int_equal(vs_arena_one_piece(f.a, 0), other);
  uint64_t back = vs_arena_reclaimable(f.a);
  assert_int_equal(vs_arena_reclaimable(f.a), back);
  CHECK(f.a);
  assert_int_equal(vs_arena_free(f.a, x), 0);
  fx_close(&f);
}

/* Many empty slabs (each class's bin left with an empty current and an
 * empty spare slab): the answer is kept all the same. */
static void view_kept_many_empty_slabs(void) {
  fixture f;
  fx_open(&f, VS_ARENA_CHUNKS, 512 * MiB, 64 * MiB);
  uint64_t *p = calloc(VS_SLAB_SIZE / 512 + 1, sizeof *p);
  assert_non_null(p);
  for (uint64_t size = 512; size <= VS_SMALL_MAX; size += size / 8 > 512 ? size / 8 : 512) {
    uint64_t n = VS_SLAB_SIZE / size + 1;   /* one slab full and one more block: two slabs */
    for (uint64_t i = 0; i < n; i++) assert_int_equal(vs_arena_alloc(f.a, size, &p[i]), 0);
    for (uint64_t i = 0; i < n; i++) assert_int_equal(vs_arena_free(f.a, p[i]), 0);
  }
  free(p);
  int empties = 0;
  for (uint32_t c = 0; c < f.a->nclasses; c++)
    for (int k = 0; k < VS_NBINS_ALL; k++)
      for (vs_slab *sl = f.a->classes[c].bins[k].slabs; sl; sl = sl->next) empties += !sl->nlive;
  assert_true(empties > 32);
  uint64_t room = room_of(&f), piece = vs_arena_one_piece(f.a, room);
  f.a->kept[0].answer = 12345;
  atomic_store(&f.a->kept[0].f_answer, 12345);
  assert_int_equal(vs_arena_one_piece(f.a, room), 12345);
  atomic_store(&f.a->kept[0].ver, 0);   /* the locked look's kept answer */
  assert_int_equal(vs_arena_one_piece(f.a, room), 12345);
  forget_kept(f.a);
  assert_int_equal(vs_arena_one_piece(f.a, room), piece);
  fx_close(&f);
}

static void arena_view_kept_vmm(void **s) {
  (void)s;
  view_kept(VS_ARENA_VMM, 0);
  view_kept(VS_ARENA_VMM, 1);
  view_kept_other_empty_slab();
}
static void arena_view_kept_chunks(void **s) {
  (void)s;
  view_kept(VS_ARENA_CHUNKS, 0);
  view_kept(VS_ARENA_CHUNKS, 1);
  view_kept_many_empty_slabs();
}

static void arena_one_piece_vmm(void **s) { (void)s; one_piece(VS_ARENA_VMM); }
static void arena_one_piece_chunks(void **s) { (void)s; one_piece(VS_ARENA_CHUNKS); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(arena_space_backend), cmocka_unit_test(arena_small_vmm),
      cmocka_unit_test(arena_small_chunks),  cmocka_unit_test(arena_heap_vmm),
      cmocka_unit_test(arena_heap_chunks),   cmocka_unit_test(arena_walk_stats),
      cmocka_unit_test(arena_small_classes_take_slabs_after_traffic),
      cmocka_unit_test(arena_chunks_share_mid_blocks), cmocka_unit_test(arena_small_blocks_keep_out_of_own_chunks),
      cmocka_unit_test(arena_fullest_chunk_first), cmocka_unit_test(arena_fullest_handle_first),
      cmocka_unit_test(arena_moves_handles_only_at_limit),
      cmocka_unit_test(arena_pressure_before_refusal),
      cmocka_unit_test(arena_pressure_counts_largest),
      cmocka_unit_test(arena_pressure_counts_largest_and_half),
      cmocka_unit_test(arena_pressure_handles_eighth), cmocka_unit_test(arena_refused_growth_makes_no_handle),
      cmocka_unit_test(arena_futile_ladder_keeps_cache), cmocka_unit_test(arena_ladder_piece_bounds_retry),
      cmocka_unit_test(arena_empty_slabs_before_growth_vmm), cmocka_unit_test(arena_empty_slabs_before_growth_chunks),
      cmocka_unit_test(arena_climb_grows_further), cmocka_unit_test(arena_growth_to_floor_level),
      cmocka_unit_test(arena_tlsf_table_kept_when_empty),
      cmocka_unit_test(arena_one_piece_vmm), cmocka_unit_test(arena_one_piece_chunks),
      cmocka_unit_test(arena_view_kept_vmm), cmocka_unit_test(arena_view_kept_chunks),
      cmocka_unit_test(arena_parked_block_vmm), cmocka_unit_test(arena_parked_block_chunks),
      cmocka_unit_test(arena_tlsf_find_would_take_exact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Helpers shared by the arena tests: an arena over the simulated address
 * space, and the invariant check after every step. */
#ifndef VS_ARENA_TEST_UTIL_H
#define VS_ARENA_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "arena.h"
#include "space_backend.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

typedef struct {
  vs_space_backend *sb;
  vs_arena_backend be;
  vs_arena *a;
} fixture;

/* With the backend's order_after_lane (arena.h) set to `order` (NULL: none, as the space backend has). */
static inline void fx_open_order(fixture *f, vs_arena_mode mode, uint64_t capacity, uint64_t threshold,
                                 int (*order)(void *ctx, uint64_t stream)) {
  f->sb = vs_space_backend_create(capacity, 0);
  assert_non_null(f->sb);
  f->be = vs_space_backend_get_mode(f->sb, mode == VS_ARENA_VMM);
  if (order) f->be.order_after_lane = order;
  vs_arena_config cfg = {.mode = mode, .release_threshold = threshold};
  f->a = vs_arena_create(&cfg, &f->be);
  assert_non_null(f->a);
}

static inline void fx_open(fixture *f, vs_arena_mode mode, uint64_t capacity, uint64_t threshold) {
  fx_open_order(f, mode, capacity, threshold, NULL);
}

/* VMM mode: a size class takes slabs once it has made a slab's worth of
 * requests (arena.c, slabs_for); before that its blocks lie in the heap's
 * small region. A test of the slab layer makes its classes hot first: that
 * many allocations of `size`, each freed, then (the frees made reusable)
 * the memory they held back to the backend. Chunks mode: slabs at once. */
static inline void fx_hot_class(vs_arena *a, uint64_t size) {
  for (uint64_t i = 0; i <= 2 * MiB / size; i++) {
    uint64_t p;
    assert_int_equal(vs_arena_alloc(a, size, &p), 0);
    assert_int_equal(vs_arena_free(a, p), 0);
  }
  vs_arena_synced_to(a, vs_arena_sync_ticket(a));
  vs_arena_trim(a, 0);
}

/* The size class after `size` (512 B steps to 2 KiB, then four per
 * doubling up to 64 KiB: docs/arena.md). */
static inline uint64_t fx_next_class(uint64_t size) {
  uint64_t top = 1;
  while (top * 2 <= size) top *= 2;
  return size + (size < 2048 ? 512 : top / 4);
}

/* Every size class hot. */
static inline void fx_hot_classes(vs_arena *a) {
  for (uint64_t size = 512; size <= 64 << 10; size = fx_next_class(size)) fx_hot_class(a, size);
}

#define CHECK(a)                                            \
  do {                                                      \
    char err_[256];                                         \
    int rc_ = vs_arena_check((a), err_, sizeof err_);       \
    if (rc_) fail_msg("invariant broken: %s", err_);        \
  } while (0)

/* Destroys the arena and asserts it gave everything back, with no misuse. */
static inline void fx_close(fixture *f) {
  CHECK(f->a);
  vs_arena_destroy(f->a);
  vs_space_counters c;
  vs_space_backend_counters(f->sb, &c);
  assert_int_equal(c.errors, 0);
  assert_int_equal(c.held, 0);
  assert_int_equal(c.mapped, 0);
  assert_int_equal(c.va_held, 0);
  vs_space_backend_destroy(f->sb);
}

static inline uint64_t rng_next(uint64_t *s) {   /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

#endif

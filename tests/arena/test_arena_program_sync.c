/* The program's own synchronisations (arena.h: vs_arena_sync_ticket,
 * vs_arena_synced_to).
 *
 * The device model of test_arena_stream.c, with the program's syncs in it:
 * a free leaves work in flight on its block, tagged with nothing but the
 * moment it was registered; the program's sync takes a ticket, completes
 * every piece of work registered before it (what a cuCtxSynchronize begun
 * then would wait for) and marks the ticket. The backend's own sync
 * completes everything. Handing out any byte of a block whose work is
 * still in flight is the bug: the tests fail if a mark made blocks freed
 * after its ticket reusable, or if a ticket were taken after the fact. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "arena_test_util.h"

enum { MAXF = 1 << 16 };
typedef struct {
  pthread_mutex_t mu;
  uint64_t addr[MAXF], size[MAXF];
  int n;            /* pieces of work in flight */
  int syncs;        /* the backend's own */
} device;

static void dev_init(device *d) {
  memset(d, 0, sizeof *d);
  pthread_mutex_init(&d->mu, NULL);
}

static void on_sync(void *u) {   /* the arena's own sync: everything finishes */
  device *d = u;
  pthread_mutex_lock(&d->mu);
  d->n = 0;
  d->syncs++;
  pthread_mutex_unlock(&d->mu);
}

/* Registered before the free: the block's last use was enqueued by then. */
static void in_flight_free(vs_arena *a, device *d, uint64_t addr, uint64_t size) {
  pthread_mutex_lock(&d->mu);
  assert_true(d->n < MAXF);
  d->addr[d->n] = addr;
  d->size[d->n] = size;
  d->n++;
  pthread_mutex_unlock(&d->mu);
  assert_int_equal(vs_arena_free(a, addr), 0);
}

/* The program's sync: the ticket first, then the device finishes what was
 * enqueued before it (everything registered so far), then the mark. */
static void program_sync(vs_arena *a, device *d) {
  pthread_mutex_lock(&d->mu);
  uint64_t t = vs_arena_sync_ticket(a);
  d->n = 0;
  pthread_mutex_unlock(&d->mu);
  vs_arena_synced_to(a, t);
}

/* 0 when no byte of [addr, addr+size) has work in flight. */
static int in_flight(device *d, uint64_t addr, uint64_t size) {
  pthread_mutex_lock(&d->mu);
  int hit = 0;
  for (int i = 0; i < d->n && !hit; i++) hit = addr < d->addr[i] + d->size[i] && d->addr[i] < addr + size;
  pthread_mutex_unlock(&d->mu);
  return hit;
}

static uint64_t calls(vs_arena *a) {
  vs_arena_stats st;
  vs_arena_get_stats(a, &st);
  return st.backend_calls;
}

/* A serving loop: each step allocates a batch, frees it (work in flight),
 * and syncs itself. After the first steps the arena needs no backend call
 * at all, its own sync included, and reuses the freed blocks; nothing in
 * flight is handed out. Sizes: slab, heap, large. Fails without the mark
 * (then the arena syncs or grows every few steps). */
static void loop_case(vs_arena_mode mode, uint64_t size, int per_step) {
  fixture f;
  device *d = malloc(sizeof *d);
  dev_init(d);
  fx_open(&f, mode, UINT64_MAX, GiB);
  if (mode == VS_ARENA_VMM && size <= 64 << 10) fx_hot_class(f.a, size);   /* the slab layer's loop */
  vs_space_backend_set_sync_hook(f.sb, on_sync, d);
  uint64_t p[64], seen[64];
  int nseen = 0, reused = 0;
  uint64_t calls_after_warmup = 0;
  for (int step = 0; step < 200; step++) {
    if (step == 4) calls_after_warmup = calls(f.a);
    for (int i = 0; i < per_step; i++) {
      assert_int_equal(vs_arena_alloc(f.a, size, &p[i]), 0);
      if (in_flight(d, p[i], size)) fail_msg("step %d: 0x%llx handed out while work on it may still run", step,
                                             (unsigned long long)p[i]);
      for (int k = 0; k < nseen && !reused; k++) reused = seen[k] == p[i];
    }
    if (step == 0)
      for (int i = 0; i < per_step; i++) seen[nseen++] = p[i];
    for (int i = 0; i < per_step; i++) in_flight_free(f.a, d, p[i], size);
    program_sync(f.a, d);
    if (step < 3) CHECK(f.a);
  }
  uint64_t later = calls(f.a) - calls_after_warmup;
  print_message("  %llu-byte blocks: %d backend syncs, %llu backend calls after warm-up\n", (unsigned long long)size,
                d->syncs, (unsigned long long)later);
  assert_true(reused);
  assert_int_equal(d->syncs, 0);
  assert_int_equal(later, 0);
  fx_close(&f);
  pthread_mutex_destroy(&d->mu);
  free(d);
}
static void arena_program_sync_loop_small_vmm(void **s) { (void)s; loop_case(VS_ARENA_VMM, 4096, 64); }
static void arena_program_sync_loop_small_chunks(void **s) { (void)s; loop_case(VS_ARENA_CHUNKS, 4096, 64); }
static void arena_program_sync_loop_medium_vmm(void **s) { (void)s; loop_case(VS_ARENA_VMM, 3 * MiB + 5, 8); }
static void arena_program_sync_loop_medium_chunks(void **s) { (void)s; loop_case(VS_ARENA_CHUNKS, 3 * MiB + 5, 8); }
static void arena_program_sync_loop_large_vmm(void **s) { (void)s; loop_case(VS_ARENA_VMM, 300 * MiB, 2); }

/* A ticket covers only what was freed before it was taken: a block freed
 * after the ticket stays pending when the ticket is marked, and a mark
 * beyond any ticket handed out is capped; marks in any order, 0, repeats.
 * Then a backend sync that could make nothing reusable is not made, and one
 * that can is. */
static void ticket_case(vs_arena_mode mode) {
  fixture f;
  device *d = malloc(sizeof *d);
  dev_init(d);
  fx_open(&f, mode, UINT64_MAX, GiB);
  vs_space_backend_set_sync_hook(f.sb, on_sync, d);
  const uint64_t size = 300 << 10;
  uint64_t a1, a2, q;
  assert_int_equal(vs_arena_alloc(f.a, size, &a1), 0);
  assert_int_equal(vs_arena_alloc(f.a, size, &a2), 0);
  in_flight_free(f.a, d, a1, size);
  pthread_mutex_lock(&d->mu);
  uint64_t t1 = vs_arena_sync_ticket(f.a);
  d->n = 0;   /* a1's work done: it was enqueued before t1 */
  pthread_mutex_unlock(&d->mu);
  in_flight_free(f.a, d, a2, size);   /* after t1: still in flight */
  uint64_t t2 = vs_arena_sync_ticket(f.a);   /* taken, never completed */
  assert_true(t2 > t1);
  vs_arena_synced_to(f.a, 0);
  vs_arena_synced_to(f.a, t1);
  vs_arena_synced_to(f.a, t1);
  /* Allocations now may take a1 back, never a2: a1 is reclaimed, a2 stays pending. */
  uint64_t held[64];
  int nh = 0;
  for (int i = 0; i < 32; i++) {
    assert_int_equal(vs_arena_alloc(f.a, size, &held[nh]), 0);
    if (in_flight(d, held[nh], size)) fail_msg("a block freed after the ticket came back at its mark");
    nh++;
  }
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.pending_bytes, size);
  assert_int_equal(d->syncs, 0);
  /* A mark far beyond the newest ticket counts as that ticket only: a
   * block freed after it stays pending. */
  uint64_t a3;
  assert_int_equal(vs_arena_alloc(f.a, size, &a3), 0);
  pthread_mutex_lock(&d->mu);
  uint64_t t3 = vs_arena_sync_ticket(f.a);
  d->n = 0;   /* t3 is marked below: a2's work, enqueued before it, is done */
  pthread_mutex_unlock(&d->mu);
  in_flight_free(f.a, d, a3, size);
  vs_arena_synced_to(f.a, t3 + 1000);
  vs_arena_synced_to(f.a, t2);   /* older: no effect */
  for (int i = 0; i < 8; i++) {
    assert_int_equal(vs_arena_alloc(f.a, size, &q), 0);
    if (in_flight(d, q, size)) fail_msg("a mark beyond every ticket made a later free reusable");
    held[nh++] = q;
  }
  CHECK(f.a);
  /* a3 is pending and unmarked: trim must sync (once). */
  int before = d->syncs;
  vs_arena_trim(f.a, 0);
  assert_int_equal(d->syncs, before + 1);
  /* Freed, then marked by the program: a trim has nothing to sync for. */
  while (nh > 32) in_flight_free(f.a, d, held[--nh], size);
  program_sync(f.a, d);
  before = d->syncs;
  vs_arena_trim(f.a, 0);
  assert_int_equal(d->syncs, before);
  vs_arena_get_stats(f.a, &st);
  assert_int_equal(st.pending_bytes, 0);
  while (nh) assert_int_equal(vs_arena_free(f.a, held[--nh]), 0);
  fx_close(&f);
  pthread_mutex_destroy(&d->mu);
  free(d);
}
static void arena_program_sync_tickets_vmm(void **s) { (void)s; ticket_case(VS_ARENA_VMM); }
static void arena_program_sync_tickets_chunks(void **s) { (void)s; ticket_case(VS_ARENA_CHUNKS); }

/* Leaving stream order still syncs once even after the program's marks
 * (frees in order take no stamp, so the skip must not apply there). */
static void arena_program_sync_leave_order(void **s) {
  (void)s;
  fixture f;
  device *d = malloc(sizeof *d);
  dev_init(d);
  fx_open(&f, VS_ARENA_VMM, UINT64_MAX, GiB);
  vs_space_backend_set_sync_hook(f.sb, on_sync, d);
  vs_arena_set_stream_ordered(f.a, 1);
  uint64_t p;
  assert_int_equal(vs_arena_alloc(f.a, 4096, &p), 0);
  program_sync(f.a, d);
  assert_int_equal(vs_arena_free(f.a, p), 0);   /* in order: reusable at once, no stamp */
  program_sync(f.a, d);
  vs_arena_set_stream_ordered(f.a, 0);
  assert_int_equal(d->syncs, 1);
  fx_close(&f);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

/* Threads: four allocate and free (work in flight) while a fifth syncs as
 * the program and takes tickets; nothing in flight is ever handed out.
 * Under ThreadSanitizer this is the race check of the ticket API. */
typedef struct {
  vs_arena *a;
  device *d;
  int id;
  _Atomic int *stop;
  int bad;
} worker_arg;

static void *worker(void *u) {
  worker_arg *w = u;
  uint64_t rng = 0x1234 + (uint64_t)w->id, p[16];
  for (int it = 0; it < 3000; it++) {
    int n = 1 + (int)(rng_next(&rng) % 16);
    uint64_t size = (rng_next(&rng) % 4) ? 512 + rng_next(&rng) % (64 << 10) : (1 + rng_next(&rng) % 4) * MiB;
    for (int i = 0; i < n; i++) {
      if (vs_arena_alloc(w->a, size, &p[i]) != 0) { n = i; break; }
      if (in_flight(w->d, p[i], size)) w->bad++;
    }
    for (int i = 0; i < n; i++) in_flight_free(w->a, w->d, p[i], size);
  }
  return NULL;
}

static void *syncer(void *u) {
  worker_arg *w = u;
  while (!atomic_load(w->stop)) program_sync(w->a, w->d);
  return NULL;
}

static void arena_program_sync_threads(void **s) {
  (void)s;
  fixture f;
  device *d = malloc(sizeof *d);
  dev_init(d);
  fx_open(&f, VS_ARENA_VMM, UINT64_MAX, GiB);
  vs_space_backend_set_sync_hook(f.sb, on_sync, d);
  _Atomic int stop = 0;
  pthread_t t[5];
  worker_arg w[5];
  for (int i = 0; i < 5; i++) {
    w[i] = (worker_arg){f.a, d, i, &stop, 0};
    assert_int_equal(pthread_create(&t[i], NULL, i < 4 ? worker : syncer, &w[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  atomic_store(&stop, 1);
  pthread_join(t[4], NULL);
  for (int i = 0; i < 4; i++) assert_int_equal(w[i].bad, 0);
  CHECK(f.a);
  print_message("  %d backend syncs\n", d->syncs);
  fx_close(&f);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

/* One step of a copy-stream server: a batch allocated and freed while its
 * work is in flight (pending), a second batch allocated and freed the same
 * way, then the program's own sync. p holds 2 * n addresses. Nothing in
 * flight may be handed out. */
static void copy_stream_step(vs_arena *a, device *d, uint64_t *p, int n, uint64_t size, int step) {
  for (int half = 0; half < 2; half++) {
    uint64_t *b = p + half * n;
    for (int i = 0; i < n; i++) {
      assert_int_equal(vs_arena_alloc(a, size, &b[i]), 0);
      if (in_flight(d, b[i], size)) fail_msg("step %d: 0x%llx handed out in flight", step, (unsigned long long)b[i]);
    }
    for (int i = 0; i < n; i++) in_flight_free(a, d, b[i], size);
  }
  program_sync(a, d);
  if (step < 3 || step % 20 == 0) CHECK(a);
}

/* Ski rental (core.c, vs_arena_sync_or_grow): a serving step that frees
 * its first batch (work in flight) and allocates a second one before the
 * program's own sync at the end of the step. Pending bytes cover the second
 * batch, so the arena syncs for it -- once per step under the old rule.
 * With rent, once those syncs have cost what a growth would (VS_SYNC_RENT
 * and one per VS_RENT_BYTES of the growth: 16 syncs in chunks mode, 32 in
 * VMM), the next need grows
 * instead and later steps need no call at all. `limit`: a backend that
 * cannot grant the growth; the refused growth is followed by the sync it
 * replaced, every allocation is served, and nothing held goes back (no OOM
 * ladder). `no_decay`: rent buys nothing, every step syncs (the contrast:
 * also what the rule did before). Nothing in flight is ever handed out. */
static void rent_case(vs_arena_mode mode, int limit, int no_decay) {
  enum { STEPS = 120, BATCH = 8 };
  /* VMM syncs before a growth only for a batch of pending bytes
   * (VS_SYNC_MIN_VMM, 64 MiB): its blocks are larger. The limited card
   * holds one batch and a half. */
  const uint64_t size = mode == VS_ARENA_VMM ? 12 * MiB + 5 : 3 * MiB + 5;
  fixture f;
  device *d = malloc(sizeof *d);
  dev_init(d);
  fx_open(&f, mode, limit ? (mode == VS_ARENA_VMM ? 160 : 48) * MiB : UINT64_MAX, GiB);
  if (no_decay) vs_arena_set_decay(f.a, VS_ARENA_DECAY_NONE);
  vs_space_backend_set_sync_hook(f.sb, on_sync, d);
  uint64_t p[2 * BATCH], late0 = 0;
  int syncs0 = 0;
  for (int step = 0; step < STEPS; step++) {
    if (step == STEPS / 2) late0 = calls(f.a), syncs0 = d->syncs;
    copy_stream_step(f.a, d, p, BATCH, size, step);
  }
  vs_space_counters c;
  vs_space_backend_counters(f.sb, &c);
  uint64_t late = calls(f.a) - late0;
  print_message("  %s%s: %d backend syncs, %llu growths, %llu refused; %llu calls in the second half\n",
                mode == VS_ARENA_VMM ? "vmm" : "chunks", limit ? ", a card of 1.5 batches" : no_decay ? ", no decay" : "",
                d->syncs, (unsigned long long)(c.chunk_alloc + c.phys_create), (unsigned long long)c.oom,
                (unsigned long long)late);
  if (limit) {
    assert_true(c.oom >= 1);                           /* the rent's growth was asked for, and refused */
    assert_int_equal(c.chunk_free + c.phys_release, 0);   /* no ladder: nothing held went back */
    assert_true(d->syncs - syncs0 >= STEPS / 2 - 1);   /* the sync after all, every step */
  } else if (no_decay) {
    assert_true(d->syncs >= STEPS - 2);
  } else {
    assert_true(d->syncs >= 8 && d->syncs <= 64);   /* rented for a while (at most two prices), then bought */
    assert_int_equal(late, 0);
  }
  fx_close(&f);
  pthread_mutex_destroy(&d->mu);
  free(d);
}
/* A growth the rent bought stands in for a sync that would have made a
 * whole batch reusable (heap.c, VS_RENT_MAP_DIV): a copy-stream step whose
 * pending batch (16 x 12 MiB) is far larger than the growth step (the
 * 32 MiB minimum on a small heap). Mapping only the step restarts the rent,
 * which buys the next step a price of syncs later, again and again while
 * the heap climbs to live + one batch; with at least half the batch per
 * bought growth the climb takes fewer growths and a third of the syncs, for
 * the same peak. Measured: 9 growths, 24 syncs, 420 MiB held at the peak
 * (rule off, -DVS_RENT_MAP_DIV=0: 13 growths, 72 syncs, 416 MiB). */
static void arena_sync_rent_maps_the_batch(void **s) {
  (void)s;
  enum { STEPS = 120, BATCH = 16 };
  const uint64_t size = 12 * MiB + 5;
  fixture f;
  device *d = malloc(sizeof *d);
  dev_init(d);
  fx_open(&f, VS_ARENA_VMM, UINT64_MAX, GiB);
  vs_space_backend_set_sync_hook(f.sb, on_sync, d);
  uint64_t p[2 * BATCH];
  for (int step = 0; step < STEPS; step++) {
    copy_stream_step(f.a, d, p, BATCH, size, step);
  }
  vs_space_counters c;
  vs_space_backend_counters(f.sb, &c);
  vs_arena_stats st;
  vs_arena_get_stats(f.a, &st);
  print_message("  %d backend syncs, %llu growths, peak held %llu MiB for a batch of %llu MiB\n", d->syncs,
                (unsigned long long)c.phys_create, (unsigned long long)(st.peak_reserved_bytes / MiB),
                (unsigned long long)(BATCH * size / MiB));
  assert_true(c.phys_create <= 10);
  assert_true(d->syncs <= 40);
  assert_true(st.peak_reserved_bytes <= 3 * BATCH * size);   /* two batches and what a growth rounds up */
  fx_close(&f);
  pthread_mutex_destroy(&d->mu);
  free(d);
}
static void arena_sync_rent_vmm(void **s) { (void)s; rent_case(VS_ARENA_VMM, 0, 0); }
static void arena_sync_rent_chunks(void **s) { (void)s; rent_case(VS_ARENA_CHUNKS, 0, 0); }
static void arena_sync_rent_refused_vmm(void **s) { (void)s; rent_case(VS_ARENA_VMM, 1, 0); }
static void arena_sync_rent_refused_chunks(void **s) { (void)s; rent_case(VS_ARENA_CHUNKS, 1, 0); }
static void arena_sync_rent_no_decay(void **s) { (void)s; rent_case(VS_ARENA_CHUNKS, 0, 1); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(arena_program_sync_loop_small_vmm),  cmocka_unit_test(arena_program_sync_loop_small_chunks),
      cmocka_unit_test(arena_program_sync_loop_medium_vmm), cmocka_unit_test(arena_program_sync_loop_medium_chunks),
      cmocka_unit_test(arena_program_sync_loop_large_vmm),  cmocka_unit_test(arena_program_sync_tickets_vmm),
      cmocka_unit_test(arena_program_sync_tickets_chunks),  cmocka_unit_test(arena_program_sync_leave_order),
      cmocka_unit_test(arena_program_sync_threads),
      cmocka_unit_test(arena_sync_rent_vmm),                cmocka_unit_test(arena_sync_rent_chunks),
      cmocka_unit_test(arena_sync_rent_refused_vmm),        cmocka_unit_test(arena_sync_rent_refused_chunks),
      cmocka_unit_test(arena_sync_rent_no_decay),           cmocka_unit_test(arena_sync_rent_maps_the_batch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

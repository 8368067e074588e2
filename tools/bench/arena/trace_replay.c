/* Replays an RMM-layout trace (Thread,Time,Action,Pointer,Size,Stream),
 * read by the project's trace reader (tools/vramshim/trace_csv.h), through
 * the arena over the simulated address space with its own loop: a
 * self-check for the arena's targets, independent of `vramshim replay`. */
#include "bench_arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_csv.h"

typedef struct { uint64_t peak_live, peak_reserved, requests, served, calls, allocs, fails; double ns; vs_space_counters c; } result;

/* addr, got: per allocation id, where the arena put it and whether it did. */
static int run(const vs_trace *t, uint64_t *addr, unsigned char *got, vs_arena_mode mode, uint64_t cap, uint64_t thr,
               result *r) {
  vs_space_backend *sb = vs_space_backend_create(cap, 0);
  vs_arena_backend be = vs_space_backend_get_mode(sb, mode == VS_ARENA_VMM);
  vs_arena_config cfg = {.mode = mode, .release_threshold = thr};
  vs_arena *a = vs_arena_create(&cfg, &be);
  memset(r, 0, sizeof *r);
  memset(got, 0, t->nallocs);
  double t0 = bench_now_ns();
  for (size_t i = 0; i < t->nev; i++) {
    uint32_t id = t->ev[i].id;
    if (!t->ev[i].free) {
      if (vs_arena_alloc(a, t->sizes[id], &addr[id])) { r->fails++; continue; }
      got[id] = 1;
    } else if (got[id]) {   /* refused allocations are not freed */
      vs_arena_free(a, addr[id]);
      got[id] = 0;
    }
  }
  r->ns = (bench_now_ns() - t0) / (double)t->nev;
  vs_arena_stats st;
  vs_arena_get_stats(a, &st);
  r->peak_live = st.peak_live_bytes;
  r->peak_reserved = st.peak_reserved_bytes;
  r->requests = st.requests;
  r->served = st.served_from_cache;
  vs_space_counters c;
  vs_space_backend_counters(sb, &c);
  r->calls = vs_space_backend_calls(&c);
  r->c = c;
  r->allocs = c.chunk_alloc + c.phys_create + c.map + c.va_reserve;
  vs_arena_destroy(a);
  vs_space_backend_destroy(sb);
  return r->fails == 0;
}

/* The trace at path, or -1 with the reader's message on stderr. */
static int load(const char *path, vs_trace *t) {
  char err[512];
  if (vs_trace_load(path, t, err, sizeof err) == 0) return 0;
  fprintf(stderr, "vramshim: cannot read trace %s\n", err);
  return -1;
}

int bench_trace(const char *path, uint64_t thr) {
  vs_trace tr;
  if (load(path, &tr)) return 1;
  uint64_t *addr = calloc((size_t)tr.nallocs + 1, sizeof *addr);
  unsigned char *got = calloc((size_t)tr.nallocs + 1, 1);
  if (!addr || !got) {
    fprintf(stderr, "vramshim: out of memory replaying %s\n", path);
    free(addr); free(got); vs_trace_free(&tr);
    return 1;
  }
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  for (int mode = VS_ARENA_CHUNKS; mode <= VS_ARENA_VMM; mode++) {
    result r, t;
    run(&tr, addr, got, (vs_arena_mode)mode, UINT64_MAX, thr, &r);
    /* Smallest card: binary search, 2 MiB resolution. */
    if (getenv("VS_BENCH_VERBOSE"))
      printf("  calls: chunk_alloc %llu chunk_free %llu va_reserve %llu phys_create %llu phys_release %llu map %llu unmap %llu sync %llu\n",
             (unsigned long long)r.c.chunk_alloc, (unsigned long long)r.c.chunk_free, (unsigned long long)r.c.va_reserve,
             (unsigned long long)r.c.phys_create, (unsigned long long)r.c.phys_release, (unsigned long long)r.c.map,
             (unsigned long long)r.c.unmap, (unsigned long long)r.c.sync);
    uint64_t lo = r.peak_live / (2 << 20), hi = r.peak_reserved / (2 << 20) + 1;
    while (!run(&tr, addr, got, (vs_arena_mode)mode, hi * (2 << 20), thr, &t)) hi *= 2;
    while (lo + 1 < hi) {
      uint64_t mid = (lo + hi) / 2;
      if (run(&tr, addr, got, (vs_arena_mode)mode, mid * (2 << 20), thr, &t)) hi = mid;
      else lo = mid;
    }
    printf("vramshim: trace %s arena=%s: %zu events, peak live %.2f GiB, peak reserved %.2f GiB "
           "(x%.4f), smallest card %.2f GiB (x%.4f), served from cache %.2f%%, backend calls %llu "
           "(grow/map %llu), %.0f ns/event\n",
           name, mode == VS_ARENA_VMM ? "vmm" : "chunks", tr.nev, r.peak_live / 1073741824.0,
           r.peak_reserved / 1073741824.0, (double)r.peak_reserved / (double)r.peak_live,
           hi * 2.0 / 1024, (double)(hi * (2 << 20)) / (double)r.peak_live,
           100.0 * (double)r.served / (double)r.requests, (unsigned long long)r.calls,
           (unsigned long long)r.allocs, r.ns);
  }
  free(addr);
  free(got);
  vs_trace_free(&tr);
  return 0;
}

/* The best any online allocator can do for "served without a driver call"
 * while keeping peak reserved <= `factor` x peak live: not knowing the
 * future, it may hold at most factor x the live high-water mark so far (the
 * trace could stop growing there). Replays only that rule -- perfect
 * packing, no syncs, every growth straight to the cap -- and counts the
 * allocations that must call the driver. */
/* Allocations that must call the driver under the rule above. */
static uint64_t bound_calls(const vs_trace *t, double factor, uint64_t *allocs, uint64_t *raise) {
  double live = 0, hwm = 0, held = 0;
  uint64_t calls = 0;
  *allocs = *raise = 0;
  for (size_t i = 0; i < t->nev; i++) {
    double size = (double)t->sizes[t->ev[i].id];
    if (t->ev[i].free) { live -= size; continue; }
    (*allocs)++;
    live += size;
    if (live > hwm) { hwm = live; (*raise)++; }
    if (live > held) { calls++; held = factor * hwm; }
  }
  return calls;
}

int bench_bound(const char *path, double factor) {
  vs_trace tr;
  if (load(path, &tr)) return 1;
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  uint64_t allocs, raise, calls = bound_calls(&tr, factor, &allocs, &raise);
  /* The other way round: how much more than the high-water mark so far an
   * online allocator would have to hold to serve 99% from cache (bisection
   * on the factor, to 0.01). */
  double lo = 1.0, hi = 100.0;
  uint64_t a, r;
  char need[64] = "99% is out of reach at any factor up to x100";
  if ((double)bound_calls(&tr, hi, &a, &r) <= 0.01 * (double)a) {
    while (hi - lo > 0.005) {
      double mid = (lo + hi) / 2;
      if ((double)bound_calls(&tr, mid, &a, &r) <= 0.01 * (double)a) hi = mid;
      else lo = mid;
    }
    snprintf(need, sizeof need, "99%% would need holding up to x%.2f", hi);
  }
  /* Each of those calls is a growth. A VMM arena grows with a cuMemCreate,
   * a cuMemMap and a cuMemSetAccess (after one cuMemAddressReserve); a
   * cuMemAlloc allocator, PyTorch's included, with one call. */
  printf("vramshim: bound %s: %llu allocations, %llu raise the live high-water mark; holding at most x%.2f "
         "the high-water mark so far, at least %llu need a driver call: at best %.2f%% served from cache; %s; "
         "driver calls at least %llu growing by cuMemAlloc, %llu by VMM (every kind)\n",
         name, (unsigned long long)allocs, (unsigned long long)raise, factor, (unsigned long long)calls,
         100.0 * (1.0 - (double)calls / (double)allocs), need, (unsigned long long)calls,
         (unsigned long long)(3 * calls + 1));
  vs_trace_free(&tr);
  return 0;
}

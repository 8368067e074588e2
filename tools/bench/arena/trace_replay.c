/* Replays an RMM-layout trace (Thread,Time,Action,Pointer,Size,Stream)
 * through the arena over the simulated address space: a self-check for the
 * arena's targets, independent of `vramshim replay`. */
#include "bench_arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

typedef struct { uint64_t ptr, size; int alloc; } ev;
typedef struct { uint64_t key, addr; UT_hash_handle hh; } pmap;

static ev *load(const char *path, size_t *n) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char line[512];
  size_t cap = 1024, k = 0;
  ev *v = malloc(cap * sizeof *v);
  while (fgets(line, sizeof line, f)) {
    char *fld[6] = {0};
    int i = 0;
    for (char *s = line; i < 6 && s; i++) { fld[i] = s; s = strchr(s, ','); if (s) *s++ = 0; }
    if (i < 5 || !strcmp(fld[2], "Action")) continue;
    int alloc = !strcmp(fld[2], "allocate"), fr = !strcmp(fld[2], "free");
    if (!alloc && !fr) continue;
    if (k == cap) v = realloc(v, (cap *= 2) * sizeof *v);
    v[k++] = (ev){strtoull(fld[3], NULL, 16), strtoull(fld[4], NULL, 10), alloc};
  }
  fclose(f);
  *n = k;
  return v;
}

typedef struct { uint64_t peak_live, peak_reserved, requests, served, calls, allocs, fails; double ns; vs_space_counters c; } result;

static int run(const ev *v, size_t n, vs_arena_mode mode, uint64_t cap, uint64_t thr, result *r) {
  vs_space_backend *sb = vs_space_backend_create(cap, 0);
  vs_arena_backend be = vs_space_backend_get_mode(sb, mode == VS_ARENA_VMM);
  vs_arena_config cfg = {.mode = mode, .release_threshold = thr};
  vs_arena *a = vs_arena_create(&cfg, &be);
  pmap *m = NULL;
  memset(r, 0, sizeof *r);
  double t0 = bench_now_ns();
  for (size_t i = 0; i < n; i++) {
    pmap *e;
    if (v[i].alloc) {
      uint64_t addr;
      if (vs_arena_alloc(a, v[i].size, &addr)) { r->fails++; continue; }
      e = malloc(sizeof *e);
      e->key = v[i].ptr;
      e->addr = addr;
      HASH_ADD(hh, m, key, sizeof(uint64_t), e);
    } else {
      HASH_FIND(hh, m, &v[i].ptr, sizeof(uint64_t), e);
      if (!e) continue;   /* freed block allocated before the window */
      vs_arena_free(a, e->addr);
      HASH_DEL(m, e);
      free(e);
    }
  }
  r->ns = (bench_now_ns() - t0) / (double)n;
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
  pmap *e, *tmp;
  HASH_ITER(hh, m, e, tmp) { HASH_DEL(m, e); free(e); }
  vs_arena_destroy(a);
  vs_space_backend_destroy(sb);
  return r->fails == 0;
}

int bench_trace(const char *path, uint64_t thr) {
  size_t n;
  ev *v = load(path, &n);
  if (!v) { fprintf(stderr, "vramshim: cannot read trace %s\n", path); return 1; }
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  for (int mode = VS_ARENA_CHUNKS; mode <= VS_ARENA_VMM; mode++) {
    result r, t;
    run(v, n, (vs_arena_mode)mode, UINT64_MAX, thr, &r);
    /* Smallest card: binary search, 2 MiB resolution. */
    if (getenv("VS_BENCH_VERBOSE"))
      printf("  calls: chunk_alloc %llu chunk_free %llu va_reserve %llu phys_create %llu phys_release %llu map %llu unmap %llu sync %llu\n",
             (unsigned long long)r.c.chunk_alloc, (unsigned long long)r.c.chunk_free, (unsigned long long)r.c.va_reserve,
             (unsigned long long)r.c.phys_create, (unsigned long long)r.c.phys_release, (unsigned long long)r.c.map,
             (unsigned long long)r.c.unmap, (unsigned long long)r.c.sync);
    uint64_t lo = r.peak_live / (2 << 20), hi = r.peak_reserved / (2 << 20) + 1;
    while (!run(v, n, (vs_arena_mode)mode, hi * (2 << 20), thr, &t)) hi *= 2;
    while (lo + 1 < hi) {
      uint64_t mid = (lo + hi) / 2;
      if (run(v, n, (vs_arena_mode)mode, mid * (2 << 20), thr, &t)) hi = mid;
      else lo = mid;
    }
    printf("vramshim: trace %s arena=%s: %zu events, peak live %.2f GiB, peak reserved %.2f GiB "
           "(x%.4f), smallest card %.2f GiB (x%.4f), served from cache %.2f%%, backend calls %llu "
           "(grow/map %llu), %.0f ns/event\n",
           name, mode == VS_ARENA_VMM ? "vmm" : "chunks", n, r.peak_live / 1073741824.0,
           r.peak_reserved / 1073741824.0, (double)r.peak_reserved / (double)r.peak_live,
           hi * 2.0 / 1024, (double)(hi * (2 << 20)) / (double)r.peak_live,
           100.0 * (double)r.served / (double)r.requests, (unsigned long long)r.calls,
           (unsigned long long)r.allocs, r.ns);
  }
  free(v);
  return 0;
}

/* The best any online allocator can do for "served without a driver call"
 * while keeping peak reserved <= `factor` x peak live: not knowing the
 * future, it may hold at most factor x the live high-water mark so far (the
 * trace could stop growing there). Replays only that rule -- perfect
 * packing, no syncs, every growth straight to the cap -- and counts the
 * allocations that must call the driver. */
/* Allocations that must call the driver under the rule above. */
static uint64_t bound_calls(const ev *v, size_t n, double factor, uint64_t *allocs, uint64_t *raise) {
  double live = 0, hwm = 0, held = 0;
  uint64_t calls = 0;
  *allocs = *raise = 0;
  for (size_t i = 0; i < n; i++) {
    if (!v[i].alloc) { live -= (double)v[i].size; continue; }
    (*allocs)++;
    live += (double)v[i].size;
    if (live > hwm) { hwm = live; (*raise)++; }
    if (live > held) { calls++; held = factor * hwm; }
  }
  return calls;
}

int bench_bound(const char *path, double factor) {
  size_t n;
  ev *v = load(path, &n);
  if (!v) { fprintf(stderr, "vramshim: cannot read trace %s\n", path); return 1; }
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  uint64_t allocs, raise, calls = bound_calls(v, n, factor, &allocs, &raise);
  /* The other way round: how much more than the high-water mark so far an
   * online allocator would have to hold to serve 99% from cache (bisection
   * on the factor, to 0.01). */
  double lo = 1.0, hi = 100.0;
  uint64_t a, r;
  char need[64] = "99% is out of reach at any factor up to x100";
  if ((double)bound_calls(v, n, hi, &a, &r) <= 0.01 * (double)a) {
    while (hi - lo > 0.005) {
      double mid = (lo + hi) / 2;
      if ((double)bound_calls(v, n, mid, &a, &r) <= 0.01 * (double)a) hi = mid;
      else lo = mid;
    }
    snprintf(need, sizeof need, "99%% would need holding up to x%.2f", hi);
  }
  printf("vramshim: bound %s: %llu allocations, %llu raise the live high-water mark; holding at most x%.2f "
         "the high-water mark so far, at least %llu need a driver call: at best %.2f%% served from cache; %s\n",
         name, (unsigned long long)allocs, (unsigned long long)raise, factor, (unsigned long long)calls,
         100.0 * (1.0 - (double)calls / (double)allocs), need);
  free(v);
  return 0;
}

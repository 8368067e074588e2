/* vramshim-bench-arena: hot path, thread scaling, drift soak, trace replay.
 * Prints numbers; docs/benchmarks-arena.md records them. Never a test.
 *
 *   vramshim-bench-arena [hot] [threads] [soak [OPS]] [trace FILE...] [bound FILE...]
 * With no argument: hot, threads, soak 10^7. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_arena.h"

static vs_arena *mk(vs_space_backend **sb, vs_arena_backend *be, vs_arena_mode mode) {
  *sb = vs_space_backend_create(UINT64_MAX, 0);
  *be = vs_space_backend_get_mode(*sb, mode == VS_ARENA_VMM);
  vs_arena_config cfg = {.mode = mode, .release_threshold = 1ull << 30};
  return vs_arena_create(&cfg, be);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median ns of an alloc+free pair, over batches of 1000 pairs. */
static double hot_median(vs_arena *a, uint64_t size) {
  enum { BATCHES = 300, PAIRS = 1000 };
  static double ns[BATCHES];
  uint64_t p;
  for (int i = 0; i < 10 * PAIRS; i++) { vs_arena_alloc(a, size, &p); vs_arena_free(a, p); }  /* warm */
  for (int b = 0; b < BATCHES; b++) {
    double t0 = bench_now_ns();
    for (int i = 0; i < PAIRS; i++) { vs_arena_alloc(a, size, &p); vs_arena_free(a, p); }
    ns[b] = (bench_now_ns() - t0) / PAIRS;
  }
  qsort(ns, BATCHES, sizeof ns[0], cmp_d);
  return ns[BATCHES / 2];
}

/* Both ways a free can go: pending until a sync (a program with streams of
 * its own), and reusable at once in stream order (the legacy stream only:
 * docs/arena.md, "Stream order"). */
int bench_hot(void) {
  uint64_t sizes[] = {512, 4096, 48 << 10, 1 << 20, 64 << 20};
  for (int ordered = 0; ordered <= 1; ordered++)
    for (int mode = VS_ARENA_CHUNKS; mode <= VS_ARENA_VMM; mode++) {
      vs_space_backend *sb;
      vs_arena_backend be;
      vs_arena *a = mk(&sb, &be, (vs_arena_mode)mode);
      vs_arena_set_stream_ordered(a, ordered);
      for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        printf("vramshim: hot path arena=%s%s size %llu B: median %.1f ns per alloc+free pair\n",
               mode == VS_ARENA_VMM ? "vmm" : "chunks", ordered ? " (stream order)" : "",
               (unsigned long long)sizes[i], hot_median(a, sizes[i]));
      vs_arena_destroy(a);
      vs_space_backend_destroy(sb);
    }
  return 0;
}

typedef struct { vs_arena *a; uint64_t pairs, seed; double ns, cpu_ns; } thr_arg;

static void *thr_main(void *p) {
  thr_arg *t = p;
  uint64_t live[16] = {0}, s = t->seed;
  double t0 = bench_now_ns();
  for (uint64_t i = 0; i < t->pairs; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int k = (int)((s >> 33) % 16);
    if (live[k]) vs_arena_free(t->a, live[k]);
    uint64_t size = 512ull << ((s >> 40) % 7);   /* 512 B .. 32 KiB */
    vs_arena_alloc(t->a, size, &live[k]);
  }
  for (int k = 0; k < 16; k++) if (live[k]) vs_arena_free(t->a, live[k]);
  t->ns = bench_now_ns() - t0;
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  t->cpu_ns = ts.tv_sec * 1e9 + ts.tv_nsec;
  return NULL;
}

/* Pairs per second of wall time, all threads; *per_cpu: pairs per second of
 * CPU time actually used (on a loaded machine the threads may not run at
 * once; the CPU-time rate still shows lock and cache-line contention). */
static double throughput(int nthreads, uint64_t pairs, int ordered, double *per_cpu) {
  vs_space_backend *sb;
  vs_arena_backend be;
  vs_arena *a = mk(&sb, &be, VS_ARENA_VMM);
  vs_arena_set_stream_ordered(a, ordered);
  pthread_t th[8];
  thr_arg args[8];
  for (int i = 0; i < nthreads; i++) {
    args[i] = (thr_arg){a, pairs, 1234 + (uint64_t)i, 0, 0};
    pthread_create(&th[i], NULL, thr_main, &args[i]);
  }
  double worst = 0, cpu = 0;
  for (int i = 0; i < nthreads; i++) {
    pthread_join(th[i], NULL);
    if (args[i].ns > worst) worst = args[i].ns;
    cpu += args[i].cpu_ns;
  }
  *per_cpu = (double)pairs * nthreads / cpu * 1e9;
  vs_arena_destroy(a);
  vs_space_backend_destroy(sb);
  return (double)pairs * nthreads / worst * 1e9;   /* pairs per second, all threads */
}

int bench_threads(int reps) {
  uint64_t pairs = 2000000;
  for (int ordered = 0; ordered <= 1; ordered++) {
    double best1 = 0, best2 = 0, cpu1 = 0, cpu2 = 0;
    for (int r = 0; r < reps; r++) {   /* best of reps: the machine is shared */
      double c1, c2, t1 = throughput(1, pairs, ordered, &c1), t2 = throughput(2, pairs, ordered, &c2);
      if (t1 > best1) best1 = t1;
      if (t2 > best2) best2 = t2;
      if (c1 > cpu1) cpu1 = c1;
      if (c2 > cpu2) cpu2 = c2;
    }
    printf("vramshim: threads%s: 1 thread %.2f M pairs/s, 2 threads %.2f M pairs/s aggregate (wall): x%.2f; "
           "per CPU-second: 1 thread %.2f M, 2 threads %.2f M (projected 2-core scaling x%.2f)\n",
           ordered ? " (stream order)" : "", best1 / 1e6, best2 / 1e6, best2 / best1, cpu1 / 1e6, cpu2 / 1e6,
           2 * cpu2 / cpu1);
  }
  return 0;
}

/* Stationary random workload: live bytes held near a 64 GiB target (one
 * allocation below it: allocate; above: free), sizes log-uniform over
 * 512 B .. 1 GiB, lifetimes mixed: a free takes one of the newest eighth of
 * the live blocks 70% of the time (short-lived), any live block otherwise
 * (long-lived). Reserved is sampled at 10% and at the end, and its maximum
 * over the first and the last tenth is printed too. */
int bench_soak(uint64_t ops) {
  const uint64_t target = 64ull << 30;
  for (int mode = VS_ARENA_VMM; mode >= VS_ARENA_CHUNKS; mode--) {
    vs_space_backend *sb;
    vs_arena_backend be;
    vs_arena *a = mk(&sb, &be, (vs_arena_mode)mode);
    size_t cap = 1 << 16, n = 0;
    uint64_t *addr = malloc(cap * sizeof *addr), *size = malloc(cap * sizeof *size);
    uint64_t s = 42, live = 0, at10 = 0, max_first = 0, max_last = 0, fails = 0;
    double t0 = bench_now_ns();
    for (uint64_t i = 0; i < ops; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      uint64_t r = s >> 11;
      if (live < target || !n) {
        double u = (double)((r >> 9) & 0xfffff) / 1048576.0;
        uint64_t sz = (uint64_t)(512.0 * __builtin_exp2(u * 21.0)), p;
        if (vs_arena_alloc(a, sz, &p)) { fails++; continue; }
        if (n == cap) { cap *= 2; addr = realloc(addr, cap * sizeof *addr); size = realloc(size, cap * sizeof *size); }
        addr[n] = p; size[n] = sz; n++;
        live += sz;
      } else {
        size_t k = (r % 10) < 7 ? n - 1 - (size_t)((r >> 8) % (n / 8 + 1)) : (size_t)((r >> 8) % n);
        vs_arena_free(a, addr[k]);
        live -= size[k];
        addr[k] = addr[n - 1]; size[k] = size[n - 1]; n--;
      }
      if ((i + 1) % (ops / 1000) == 0) {
        vs_arena_stats st;
        vs_arena_get_stats(a, &st);
        if (i + 1 <= ops / 10 && st.reserved_bytes > max_first) max_first = st.reserved_bytes;
        if (i + 1 > ops - ops / 10 && st.reserved_bytes > max_last) max_last = st.reserved_bytes;
        if (i + 1 == ops / 10) at10 = st.reserved_bytes;
      }
    }
    vs_arena_stats st;
    vs_arena_get_stats(a, &st);
    printf("vramshim: soak arena=%s %llu ops: reserved at 10%% %.2f GiB, at end %.2f GiB (x%.4f); max over first "
           "tenth %.2f GiB, over last tenth %.2f GiB (x%.4f); live at end %.2f GiB, peak live %.2f GiB, "
           "backend calls %llu, failures %llu, %.0f ns/op\n",
           mode == VS_ARENA_VMM ? "vmm" : "chunks", (unsigned long long)ops, at10 / 1073741824.0,
           st.reserved_bytes / 1073741824.0, (double)st.reserved_bytes / (double)at10, max_first / 1073741824.0,
           max_last / 1073741824.0, (double)max_last / (double)max_first, st.live_bytes / 1073741824.0,
           st.peak_live_bytes / 1073741824.0, (unsigned long long)st.backend_calls, (unsigned long long)fails,
           (bench_now_ns() - t0) / (double)ops);
    fflush(stdout);
    while (n) vs_arena_free(a, addr[--n]);
    free(addr);
    free(size);
    vs_arena_destroy(a);
    vs_space_backend_destroy(sb);
  }
  return 0;
}

static int is_command(const char *s) {
  return !strcmp(s, "hot") || !strcmp(s, "threads") || !strcmp(s, "soak") || !strcmp(s, "trace") || !strcmp(s, "bound");
}

int main(int argc, char **argv) {
  if (argc == 1) {
    bench_hot();
    bench_threads(3);
    return bench_soak(10000000);
  }
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "hot")) bench_hot();
    else if (!strcmp(argv[i], "threads")) bench_threads(3);
    else if (!strcmp(argv[i], "soak")) {
      uint64_t ops = 10000000;
      if (i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9') ops = strtoull(argv[++i], NULL, 10);
      bench_soak(ops);
    } else if (!strcmp(argv[i], "trace")) {
      while (i + 1 < argc && !is_command(argv[i + 1])) bench_trace(argv[++i], 1ull << 30);
    } else if (!strcmp(argv[i], "bound")) {
      while (i + 1 < argc && !is_command(argv[i + 1])) bench_bound(argv[++i], 1.03);
    } else {
      fprintf(stderr, "vramshim: usage: vramshim-bench-arena [hot] [threads] [soak [OPS]] [trace FILE...] [bound FILE...]\n");
      return 2;
    }
  }
  return 0;
}

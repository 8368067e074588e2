/* vramshim-bench-explain: what the explain concern adds to the hot path.
 * Prints numbers (docs/benchmarks-explain.md records them); never a test.
 *
 * Stand-in hot path: the real arena (src/arena) over the simulated address
 * space backend, one alloc+free pair, warm (served from cache). Measured
 * as the median over batches, variants interleaved so machine noise hits
 * them alike:
 *   base     the pair alone (the arena keeps live/reserved/peaks itself)
 *   stats    + the shim's own per-card counters (vs_stats_on_alloc/free),
 *            which the shim needs only with arena = off
 *   sampler  + a thread taking a timeline sample (arena stats +
 *            vs_timeline_sample) every 1 ms: 10^4 times the default
 *            rate, an upper bound on interference (stats on, arena mode)
 *   trace    + recording both events (vs_trace_alloc/free) to a file,
 *            back to back: the hot path outruns the writer thread and
 *            waits for it (saturation: bounded by formatting + write)
 *   base/p, trace/p   the same with a 0.3 ms pause after each burst of
 *            1000 pairs: the writer keeps up, the hot path only records
 *
 *   vramshim-bench-explain [SIZE_BYTES...]   (default 4096 and 1 MiB) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "space_backend.h"
#include "stats.h"
#include "trace.h"

enum { BATCHES = 200, PAIRS = 1000, ROUNDS = 4 };
enum { V_BASE, V_STATS, V_SAMPLER, V_TRACE, V_BASE_PACED, V_TRACE_PACED, NV };
static const char *const vname[NV] = {"base", "stats", "sampler", "trace", "base/p", "trace/p"};

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct ctx {
  vs_arena *a;
  vs_card_stats st;
  vs_trace *tr;
  _Atomic int stop;
  uint64_t samples;
  double sample_ns;
} ctx;

static void *sampler(void *p) {
  ctx *c = p;
  while (!atomic_load(&c->stop)) {
    double t0 = now_ns();
    vs_arena_stats s;
    vs_arena_get_stats(c->a, &s);
    vs_timeline_sample(&c->st, vs_now_unix_ms(), s.live_bytes, s.reserved_bytes, s.largest_free);
    c->sample_ns += now_ns() - t0;
    c->samples++;
    usleep(1000);
  }
  return NULL;
}

static double batch(ctx *c, int v, uint64_t size) {
  uint64_t p;
  double t0 = now_ns();
  switch (v) {
    case V_BASE:
    case V_BASE_PACED:
      for (int i = 0; i < PAIRS; i++) {
        vs_arena_alloc(c->a, size, &p);
        vs_arena_free(c->a, p);
      }
      break;
    case V_SAMPLER:
      for (int i = 0; i < PAIRS; i++) {
        vs_arena_alloc(c->a, size, &p);
        vs_arena_free(c->a, p);
      }
      break;
    case V_STATS:
      for (int i = 0; i < PAIRS; i++) {
        vs_arena_alloc(c->a, size, &p);
        vs_stats_on_alloc(&c->st, size);
        vs_arena_free(c->a, p);
        vs_stats_on_free(&c->st, size);
      }
      break;
    case V_TRACE:
    case V_TRACE_PACED:
      for (int i = 0; i < PAIRS; i++) {
        vs_arena_alloc(c->a, size, &p);
        vs_trace_alloc(c->tr, p, size, 0);
        vs_arena_free(c->a, p);
        vs_trace_free(c->tr, p, size, 0);
      }
      break;
  }
  return (now_ns() - t0) / PAIRS;
}

static void run(uint64_t size, const char *trace_path) {
  ctx c;
  memset(&c, 0, sizeof c);
  vs_space_backend *sb = vs_space_backend_create(UINT64_MAX, 0);
  vs_arena_backend be = vs_space_backend_get_mode(sb, 1);
  vs_arena_config cfg = {.mode = VS_ARENA_VMM, .release_threshold = 1ull << 30};
  c.a = vs_arena_create(&cfg, &be);
  vs_card_stats_init(&c.st, 0);
  char err[256];
  c.tr = vs_trace_create(trace_path, 0, err, sizeof err);
  if (!c.a || !c.tr) {
    fprintf(stderr, "vramshim: bench setup failed: %s\n", c.tr ? "arena" : err);
    exit(1);
  }
  for (int v = 0; v < NV; v++) batch(&c, v, size);   /* warm every path */
  static double ns[NV][BATCHES * ROUNDS];
  int n[NV] = {0};
  pthread_t th;
  for (int r = 0; r < ROUNDS; r++)
    for (int v = 0; v < NV; v++) {
      if (v == V_SAMPLER) {
        atomic_store(&c.stop, 0);
        pthread_create(&th, NULL, sampler, &c);
      }
      for (int b = 0; b < BATCHES; b++) {
        ns[v][n[v]++] = batch(&c, v, size);
        /* Paced: a pause (not timed) after each burst of 2000 events,
         * a rate the writer thread keeps up with. */
        if (v >= V_BASE_PACED) usleep(300);
      }
      if (v == V_SAMPLER) {
        atomic_store(&c.stop, 1);
        pthread_join(th, NULL);
      }
    }
  double med[NV], mean[NV];
  for (int v = 0; v < NV; v++) {
    mean[v] = 0;
    for (int i = 0; i < n[v]; i++) mean[v] += ns[v][i] / n[v];
    qsort(ns[v], (size_t)n[v], sizeof ns[v][0], cmp_d);
    med[v] = ns[v][n[v] / 2];
  }
  uint64_t rec = 0, drop = 0;
  vs_trace_counts(c.tr, &rec, &drop);
  printf("vramshim: size %llu B, arena vmm over the space backend, median of %d batches of %d pairs\n",
         (unsigned long long)size, BATCHES * ROUNDS, PAIRS);
  for (int v = 0; v < NV; v++)
    printf("  %-8s median %7.1f ns per alloc+free pair (%+6.1f%%), mean %7.1f ns (%+6.1f%%)\n", vname[v], med[v],
           100.0 * (med[v] - med[V_BASE]) / med[V_BASE], mean[v], 100.0 * (mean[v] - mean[V_BASE]) / mean[V_BASE]);
  printf("  counters (arena = off only): %.1f ns per pair; sampler: %llu samples, %.1f us each (arena stats + ring)\n",
         med[V_STATS] - med[V_BASE], (unsigned long long)c.samples, c.samples ? c.sample_ns / c.samples / 1e3 : 0.0);
  printf("  trace, writer keeping up: %.1f ns per event (mean), pair with trace = %.2fx the pair\n",
         (mean[V_TRACE_PACED] - mean[V_BASE_PACED]) / 2, mean[V_TRACE_PACED] / mean[V_BASE_PACED]);
  printf("  trace, saturated:         %.1f ns per event (mean, waits for the writer included), %.2fx the pair\n",
         (mean[V_TRACE] - mean[V_BASE]) / 2, mean[V_TRACE] / mean[V_BASE]);
  printf("  %llu events, %llu dropped; no syscall on the hot path (write() by the writer thread,\n"
         "  64 KiB each, every ~1200 events)\n", (unsigned long long)rec, (unsigned long long)drop);
  vs_trace_destroy(c.tr);
  vs_card_stats_destroy(&c.st);
  vs_arena_destroy(c.a);
  vs_space_backend_destroy(sb);
}

int main(int argc, char **argv) {
  uint64_t def[] = {4096, 1 << 20};
  char path[256];
  snprintf(path, sizeof path, "/tmp/vramshim-bench-explain-%ld.csv", (long)getpid());
  if (argc > 1) {
    for (int i = 1; i < argc; i++) run(strtoull(argv[i], NULL, 0), path);
  } else {
    for (size_t i = 0; i < sizeof def / sizeof def[0]; i++) run(def[i], path);
  }
  /* Bytes per event, measured from the file the trace wrote. */
  FILE *f = fopen(path, "r");
  if (f) {
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fclose(f);
    printf("vramshim: trace file %s: %ld bytes (removed)\n", path, bytes);
    unlink(path);
  }
  return 0;
}

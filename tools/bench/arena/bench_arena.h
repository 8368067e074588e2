/* vramshim-bench-arena: programs that print numbers (never tests). */
#ifndef VS_BENCH_ARENA_H
#define VS_BENCH_ARENA_H
#include <stdint.h>
#include <time.h>
#include "arena.h"
#include "space_backend.h"

static inline double bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}
int bench_trace(const char *path, uint64_t release_threshold);
int bench_bound(const char *path, double factor);
int bench_hot(void);
int bench_threads(int seconds_tenths);
int bench_soak(uint64_t ops);
#endif

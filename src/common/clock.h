/* Clock readings in nanoseconds, for timeouts, deadlines and timestamps. */
#ifndef VS_CLOCK_H
#define VS_CLOCK_H
#include <stdint.h>
#include <time.h>

#include "plat_types.h" /* CLOCK_MONOTONIC_COARSE where the system lacks it */

/* The clock clk (CLOCK_MONOTONIC, CLOCK_REALTIME, ...) in nanoseconds. */
static inline uint64_t vs_clock_ns(clockid_t clk) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t vs_mono_ns(void) { return vs_clock_ns(CLOCK_MONOTONIC); }
#endif

/* Time helpers beside clock.h's clocks: calendar time for file names and
 * dump headers, and whether the CPU's time-stamp counter may stand in for
 * the monotonic clock (trace.c's cheap timestamps). */
#ifndef VS_PLAT_TIMEUTIL_H
#define VS_PLAT_TIMEUTIL_H
#include <time.h>

/* gmtime_r (Windows: gmtime_s); out, or NULL. */
struct tm *vs_plat_gmtime(time_t t, struct tm *out);
/* localtime_r (Windows: localtime_s); out, or NULL. */
struct tm *vs_plat_localtime(time_t t, struct tm *out);
/* 1 when the TSC is invariant (POSIX: x86-64 with constant_tsc and
 * nonstop_tsc in /proc/cpuinfo). Windows: 0, the monotonic clock
 * (QueryPerformanceCounter, itself TSC-based where it can be) is used. */
int vs_plat_tsc_invariant(void);
#endif

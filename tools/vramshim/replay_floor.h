/* The floor beside each trace in `vramshim replay`: the `bound` rule of
 * vramshim-bench-arena (tools/bench/arena/trace_replay.c; docs/arena.md,
 * "Targets that no VMM growth rule can meet together") with its growths
 * priced by the replay's cost model. The rule is the best a VMM allocator
 * that does not see the future can do while holding at most `factor` × the
 * live high-water mark so far: perfect packing, no syncs, no release, every
 * growth straight to the cap, and each growth at least a cuMemCreate, a
 * cuMemMap and a cuMemSetAccess. */
#ifndef VS_REPLAY_FLOOR_H
#define VS_REPLAY_FLOOR_H
#include "replay_cost.h"
#include "trace_csv.h"

#define VS_REPLAY_FLOOR_FACTOR 1.03

/* The floor's modeled driver time in ns (0 without a table), its growths
 * in *growths. */
double vs_replay_floor_ns(const vs_trace *t, const vs_cost_table *c, double factor, uint64_t *growths);

#endif

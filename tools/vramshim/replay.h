/* Policies of `vramshim replay`: each replays a trace's requests over a
 * simulated card of a given capacity (no device bytes) and counts what a
 * real allocator of that kind would do with the driver. */
#ifndef VS_REPLAY_H
#define VS_REPLAY_H
#include <stddef.h>
#include <stdint.h>

#include "plat_types.h" /* VS_PRINTF */
#include "replay_cost.h"
#include "trace_csv.h"

#define VS_REPLAY_NO_LIMIT UINT64_MAX
#define VS_REPLAY_DECAY_DEFAULT UINT64_MAX
enum { VS_POLICY_CACHED = 0, VS_POLICY_REFUSED = 1, VS_POLICY_DRIVER = 2 };

typedef struct vs_replay_opts {
  uint64_t release_threshold; /* arena policies */
  uint64_t decay_ms;          /* arena policies: VS_REPLAY_DECAY_DEFAULT = the arena's default */
  /* Policies run through the real shim (replay_shim.c): NULL / 0 means the
   * default (found beside this binary in the build tree; 2 x the trace's
   * peak live rounded up to a GiB). */
  const char *shim_path, *sim_dir, *child_path;
  uint64_t shim_card;
  /* Per-call driver costs for the modeled driver time (NULL: not modeled). */
  const vs_cost_table *costs;
  /* Set per trace by the replay (replay_run.c), not by the caller: the
   * trace used only the legacy stream, so the arena policies run in stream
   * order, as the shim would (vs_arena_set_stream_ordered). */
  int stream_ordered;
  /* Set per trace by the replay as well: the trace, for policies that read
   * its streams and the program's synchronisations (trace_syncs.h). */
  const vs_trace *trace;
} vs_replay_opts;

struct vs_replay_result;
struct vs_progress;

typedef struct vs_policy_stats {
  uint64_t peak_reserved;     /* bytes held from the driver, at most */
  uint64_t driver_calls;      /* every driver call, refused ones included */
  vs_call_tally tally;        /* the same calls by kind, with their modeled time */
  char problem[200];          /* non-empty: the policy broke an invariant; the run is void */
} vs_policy_stats;

typedef struct vs_policy {
  const char *name;
  const char *summary;
  /* A fresh instance over a card of `capacity` bytes, for a trace with
   * `nallocs` allocation ids. NULL with a message in err when unavailable. */
  void *(*create)(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err, size_t errlen);
  /* VS_POLICY_CACHED or VS_POLICY_DRIVER (served, without or with driver
   * calls), VS_POLICY_REFUSED (out of memory on this card), or -1 (internal
   * error). */
  int (*alloc)(void *p, uint32_t id, uint64_t size, uint64_t stream);
  void (*free)(void *p, uint32_t id, uint64_t size); /* only ids whose alloc returned 0 */
  void (*stats)(void *p, vs_policy_stats *s);
  void (*destroy)(void *p);
  /* Optional. The trace's clock: called before an event whose Time differs
   * from the previous one (microseconds since the trace's start). */
  void (*clock)(void *p, uint64_t now_us);
  /* Optional. Bytes held from the driver now, and driver calls so far (for
   * the steady-state columns). */
  void (*probe)(void *p, uint64_t *reserved, uint64_t *calls);
  /* Optional. The program synchronised (the trace's sidecar, trace_syncs.h):
   * context-wide, or the stream `stream` (legacy: 0). Not a driver call of
   * the policy's: the program makes it with or without an allocator. */
  void (*program_sync)(void *p, int context, uint64_t stream);
  /* Set only by policies that replay the whole trace elsewhere (through the
   * real shim, in a child process): they fill `out` themselves, without the
   * callbacks above, searching the smallest card when resolution is not 0.
   * 0, or -1 with a message in err. */
  int (*run)(const struct vs_policy *self, const char *path, const vs_trace *t, const vs_replay_opts *o,
             uint64_t resolution, struct vs_progress *pr, const char *label, struct vs_replay_result *out,
             char *err, size_t errlen);
} vs_policy;

extern const vs_policy vs_policy_off;     /* replay_off.c */
extern const vs_policy vs_policy_pytorch; /* replay_pytorch.c */
extern const vs_policy vs_policy_pytorch_down; /* replay_pytorch.c */
extern const vs_policy vs_policy_chunks;  /* replay_arena.c */
extern const vs_policy vs_policy_vmm;     /* replay_arena.c */
extern const vs_policy vs_policy_chunks_async;  /* replay_arena.c: only when named */
extern const vs_policy vs_policy_vmm_async;     /* replay_arena.c: only when named */
extern const vs_policy vs_policy_shim_off;    /* replay_shim.c */
extern const vs_policy vs_policy_shim_vmm;    /* replay_shim.c */
extern const vs_policy vs_policy_shim_chunks; /* replay_shim.c */
extern const vs_policy vs_policy_shim_vmm_async;     /* replay_shim.c */
extern const vs_policy vs_policy_shim_chunks_async;  /* replay_shim.c */

/* ---- Running a policy over a trace (replay_run.c) ------------------------ */
typedef struct vs_replay_result {
  uint64_t requests;       /* allocations replayed */
  uint64_t frees;
  uint64_t failed;         /* allocations refused */
  uint64_t peak_live;      /* requested bytes live at once, at most */
  uint64_t served_from_cache;  /* allocations served with no driver call */
  /* Steady state: allocations that do not raise the high-water mark of live
   * bytes (memory of that size was live before), and those of them served
   * with no driver call. A policy that starts empty must call the driver for
   * some high-water allocations, whatever it does; these show reuse. */
  uint64_t steady_requests, steady_served;
  /* Steady state (policies with probe): reserved at the end of warm-up (the
   * first 10 % of the events) and at the end of the trace; the driver calls
   * after warm-up, split into those made during allocations that raise the
   * high-water mark of live bytes and all the others. */
  int have_probe;
  uint64_t reserved_warm, reserved_end, calls_warm, calls_hwm_after, calls_other_after;
  /* The high-water mark of live bytes at the end of warm-up (every policy):
   * peak_live / peak_live_warm is how far the workload itself still climbs
   * after warm-up, the growth no policy can avoid. */
  uint64_t peak_live_warm;
  vs_policy_stats stats;
  double ns_per_request;   /* wall time of the loop (allocations and frees) / requests */
  uint64_t smallest_card;  /* 0 when not searched */
  /* In-process policies, when searched: the driver calls, and their modeled
   * time, of the replay on the smallest card (what the policy does near a
   * full card; the unlimited run's are in stats). */
  int have_card_calls;
  uint64_t card_driver_calls;
  double card_modeled_ns;
  uint64_t card;           /* shim policies: the simulated card's capacity */
  uint64_t child_max_rss;  /* shim policies: the child's peak resident memory, bytes */
} vs_replay_result;

/* Progress of a long run on stderr: one updating line on a terminal, a line
 * every few seconds otherwise, nothing when quiet. */
typedef struct vs_progress {
  int quiet, tty;
  double last;        /* time of the last line (non-tty) */
  int shown;          /* an updating line is on screen */
} vs_progress;
void vs_progress_init(vs_progress *pr, int quiet);
void vs_progress_update(vs_progress *pr, const char *fmt, ...) VS_PRINTF(2, 3);
void vs_progress_done(vs_progress *pr);

/* Replays the whole trace on a card without limit, then (if resolution is
 * not 0) binary-searches the smallest capacity, a multiple of resolution,
 * on which no allocation is refused. 0, or -1 with a message in err. */
int vs_replay_policy(const vs_policy *pol, const vs_trace *t, const vs_replay_opts *o, uint64_t resolution,
                     vs_progress *pr, const char *label, vs_replay_result *out, char *err, size_t errlen);

/* The smallest card: binary search, to `resolution`, for the least capacity
 * on which probe() reports no refused allocation, between the peak of live
 * bytes and the unlimited run's peak reserved (doubled while that still
 * refuses, up to max_capacity when not 0), such that the cards up to 10 %
 * above it, in steps of 0.5 %, refuse none either (policies are not
 * monotone in the card; a refusal there searches again above it). probe
 * returns -1 with err set on an error. Shows its steps on pr. */
typedef int (*vs_capacity_probe)(void *ctx, uint64_t capacity, int *failed, char *err, size_t errlen);
int vs_smallest_card(uint64_t peak_live, uint64_t peak_reserved, uint64_t resolution, uint64_t max_capacity,
                     vs_capacity_probe probe, void *ctx, vs_progress *pr, const char *label, const char *policy,
                     uint64_t *smallest, char *err, size_t errlen);

#endif

/* The arena replay policies, `chunks` and `vmm` (and their `-async`
 * forms, below): the real arena
 * (src/arena/arena.h) over the simulated address space
 * (src/arena/space_backend.h), with VMM on (2 MiB granules) or off. Peak
 * reserved and driver calls are read from the backend, the same counters
 * the `off` policy reports. "Served from cache" is measured here, not taken
 * from the arena's own stats: the backend table handed to the arena counts
 * every call, and an allocation is served from cache (VS_POLICY_CACHED)
 * when no call happened during it. After each run the arena's invariant checker walks the whole
 * arena and the backend must have seen no misuse. */
#include <stdio.h>
#include <stdlib.h>

#include "arena.h"
#include "replay.h"
#include "space_backend.h"
#include "trace_syncs.h"

#define AR_MAX_STREAMS 64

typedef struct ar_state {
  vs_space_backend *sb;
  vs_arena_backend inner; /* the space backend's table */
  uint64_t calls;         /* every call through the table below */
  uint64_t order_calls;   /* of those, the lane orders' (the space backend does not see them) */
  vs_arena *a;
  uint64_t *addr; /* per allocation id */
  uint64_t bad_frees; /* frees the arena refused: an arena bug */
  const vs_cost_table *costs;
  vs_call_tally tally;  /* the calls by kind; map counts cuMemMap and cuMemSetAccess */
  uint64_t now_ns;      /* the trace's clock, read by the arena (cfg.clock) */
  /* The program's synchronisations (program_sync), as the shim counts them
   * (src/interpose/stream_syncs.c): every stream the trace names (its Stream
   * column and its sidecar) and the legacy one, each with the ticket it has
   * synced to; a block is idle once all of them synced after its free.
   * nstreams 0: too many streams to follow, only context syncs count. */
  uint64_t stream[AR_MAX_STREAMS], synced[AR_MAX_STREAMS];
  int nstreams;
  /* The -async policies: the program allocates with cuMemAllocAsync and
   * frees with cuMemFreeAsync on each allocation's Stream, so blocks on the
   * legacy stream take the arena's lane (arena.h), as the shim serves them
   * (memory_service.c); 0: cuMemAlloc / cuMemFree, which carry no stream. */
  int async;
  const uint64_t *streams;   /* per allocation id (the trace's) */
} ar_state;

/* -async: an allocation, or its free, on the legacy stream (0x0, CU_STREAM_LEGACY) takes the lane. */
static int on_lane(const ar_state *s, uint64_t stream) { return s->async && stream <= 1; }

/* The table the arena sees: each entry counts, then forwards. */
static int c_chunk_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  ar_state *s = ctx;
  s->calls++;
  vs_tally(&s->tally, s->costs, VS_CALL_MEM_ALLOC, size);
  return s->inner.chunk_alloc(s->inner.ctx, size, addr);
}
static int c_chunk_free(void *ctx, uint64_t addr, uint64_t size) {
  ar_state *s = ctx;
  s->calls++;
  vs_tally(&s->tally, s->costs, VS_CALL_MEM_FREE, size);
  return s->inner.chunk_free(s->inner.ctx, addr, size);
}
static int c_va_reserve(void *ctx, uint64_t size, uint64_t *va) {
  ar_state *s = ctx;
  s->calls++;
  vs_tally(&s->tally, s->costs, VS_CALL_ADDR_RESERVE, size);
  return s->inner.va_reserve(s->inner.ctx, size, va);
}
static int c_va_free(void *ctx, uint64_t va, uint64_t size) {
  ar_state *s = ctx;
  s->calls++;
  vs_tally(&s->tally, s->costs, VS_CALL_ADDR_FREE, size);
  return s->inner.va_free(s->inner.ctx, va, size);
}
static int c_phys_create(void *ctx, uint64_t size, uint64_t *handle) {
  ar_state *s = ctx;
  s->calls++;
  vs_tally(&s->tally, s->costs, VS_CALL_CREATE, size);
  return s->inner.phys_create(s->inner.ctx, size, handle);
}
static int c_phys_release(void *ctx, uint64_t handle, uint64_t size) {
  ar_state *s = ctx;
  s->calls++;
  vs_tally(&s->tally, s->costs, VS_CALL_RELEASE, size);
  return s->inner.phys_release(s->inner.ctx, handle, size);
}
static int c_map(void *ctx, uint64_t va, uint64_t size, uint64_t handle) {
  ar_state *s = ctx;
  s->calls++;
  vs_tally(&s->tally, s->costs, VS_CALL_MAP, size);
  vs_tally(&s->tally, s->costs, VS_CALL_SET_ACCESS, size);
  return s->inner.map(s->inner.ctx, va, size, handle);
}
static int c_unmap(void *ctx, uint64_t va, uint64_t size) {
  ar_state *s = ctx;
  s->calls++;
  vs_tally(&s->tally, s->costs, VS_CALL_UNMAP, size);
  return s->inner.unmap(s->inner.ctx, va, size);
}
static int c_sync(void *ctx) {
  ar_state *s = ctx;
  s->calls++;
  vs_tally(&s->tally, s->costs, VS_CALL_SYNC, 0);
  return s->inner.sync(s->inner.ctx);
}

/* Ordering a stream after the lane: an event recorded on the lane and the
 * stream's cuStreamWaitEvent, as the shim's backend makes them. The
 * replay's device runs nothing, so there is nothing else to do. */
static int c_order_after_lane(void *ctx, uint64_t stream) {
  ar_state *s = ctx;
  (void)stream;
  s->calls += 2;
  s->order_calls += 2;
  vs_tally(&s->tally, s->costs, VS_CALL_EVENT_RECORD, 0);
  vs_tally(&s->tally, s->costs, VS_CALL_STREAM_WAIT, 0);
  return VS_BACKEND_OK;
}

static uint64_t c_room(void *ctx) {
  ar_state *s = ctx;
  return s->inner.room(s->inner.ctx);
}

static vs_arena_backend counting_table(ar_state *s) {
  const vs_arena_backend *in = &s->inner;
  vs_arena_backend b = {.ctx = s, .granule = in->granule};
  b.chunk_alloc = in->chunk_alloc ? c_chunk_alloc : NULL;
  b.chunk_free = in->chunk_free ? c_chunk_free : NULL;
  b.va_reserve = in->va_reserve ? c_va_reserve : NULL;
  b.va_free = in->va_free ? c_va_free : NULL;
  b.phys_create = in->phys_create ? c_phys_create : NULL;
  b.phys_release = in->phys_release ? c_phys_release : NULL;
  b.map = in->map ? c_map : NULL;
  b.unmap = in->unmap ? c_unmap : NULL;
  b.sync = in->sync ? c_sync : NULL;
  b.room = in->room ? c_room : NULL;   /* the shim answers from its books: no driver call to count */
  b.order_after_lane = c_order_after_lane;   /* used only by the -async policies (vs_arena_alloc_on) */
  return b;
}

static void ar_add_stream(ar_state *s, uint64_t stream) {
  if (stream == 1) stream = 0;   /* CU_STREAM_LEGACY */
  for (int i = 0; i < s->nstreams; i++)
    if (s->stream[i] == stream) return;
  if (s->nstreams == AR_MAX_STREAMS) {
    s->nstreams = 0;   /* too many to follow: per-stream syncs count for nothing */
    return;
  }
  s->stream[s->nstreams] = stream;
  s->synced[s->nstreams++] = 0;
}

static void ar_destroy(void *p) {
  ar_state *s = p;
  if (!s) return;
  if (s->a) vs_arena_destroy(s->a);
  if (s->sb) vs_space_backend_destroy(s->sb);
  free(s->addr);
  free(s);
}

/* The arena's decay clock: the trace's Time column, not the wall clock. */
static uint64_t ar_now(void *ctx) { return ((ar_state *)ctx)->now_ns; }
static void ar_clock(void *p, uint64_t now_us) { ((ar_state *)p)->now_ns = now_us * 1000; }

static void *ar_create(vs_arena_mode mode, uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err,
                       size_t errlen) {
  ar_state *s = calloc(1, sizeof *s);
  if (s) {
    s->addr = calloc(nallocs ? nallocs : 1, sizeof *s->addr);
    s->sb = vs_space_backend_create(capacity, 0);
  }
  if (!s || !s->addr || !s->sb) {
    ar_destroy(s);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  s->costs = o->costs;
  s->inner = vs_space_backend_get_mode(s->sb, mode == VS_ARENA_VMM);
  vs_arena_backend be = counting_table(s);
  vs_arena_config cfg = {.mode = mode, .release_threshold = o->release_threshold};
  if (!(s->a = vs_arena_create(&cfg, &be))) {
    ar_destroy(s);
    snprintf(err, errlen, "the arena is unavailable: vs_arena_create (mode %s) failed",
             mode == VS_ARENA_VMM ? "vmm" : "chunks");
    return NULL;
  }
  vs_arena_set_clock(s->a, ar_now, s);
  /* What the shim does (arena_glue.c): a program that never left the
   * legacy stream gets a stream-ordered arena. The trace has no stream
   * creation events, so a trace with any other stream is taken as a
   * program that made its streams before its first allocation. */
  vs_arena_set_stream_ordered(s->a, o->stream_ordered);
  /* The streams the program may have work on (the trace has no creation
   * events: all of them from the start, the cautious reading). */
  s->nstreams = 1;   /* stream[0] = 0: the legacy stream */
  const vs_trace *t = o->trace;
  if (t && t->nsyncs) {
    for (uint32_t id = 0; id < t->nallocs && s->nstreams; id++) ar_add_stream(s, t->streams[id]);
    for (size_t i = 0; i < t->nsyncs && s->nstreams; i++)
      if (!t->syncs[i].context) ar_add_stream(s, t->syncs[i].stream);
  }
  if (o->decay_ms != VS_REPLAY_DECAY_DEFAULT) vs_arena_set_decay(s->a, o->decay_ms);
  return s;
}

static void ar_program_sync(void *p, int context, uint64_t stream) {
  ar_state *s = p;
  /* The device of the replay has no work in flight: the sync returns at
   * once, so the ticket is marked right after it is taken. */
  uint64_t t = vs_arena_sync_ticket(s->a);
  if (context) {
    vs_arena_synced_to(s->a, t);
    for (int i = 0; i < s->nstreams; i++) s->synced[i] = t;
    return;
  }
  if (stream == 1) stream = 0;
  uint64_t m = UINT64_MAX;
  int found = 0;
  for (int i = 0; i < s->nstreams; i++) {
    if (s->stream[i] == stream) s->synced[i] = t, found = 1;
    if (s->synced[i] < m) m = s->synced[i];
  }
  if (found && m != UINT64_MAX) vs_arena_synced_to(s->a, m);
}

static void *chunks_create(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err, size_t errlen) {
  return ar_create(VS_ARENA_CHUNKS, capacity, nallocs, o, err, errlen);
}
static void *vmm_create(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err, size_t errlen) {
  return ar_create(VS_ARENA_VMM, capacity, nallocs, o, err, errlen);
}
static void *as_async(ar_state *s, const vs_replay_opts *o) {
  if (s) {
    s->async = 1;
    s->streams = o->trace ? o->trace->streams : NULL;
  }
  return s;
}
static void *chunks_async_create(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err,
                                 size_t errlen) {
  return as_async(ar_create(VS_ARENA_CHUNKS, capacity, nallocs, o, err, errlen), o);
}
static void *vmm_async_create(uint64_t capacity, uint32_t nallocs, const vs_replay_opts *o, char *err,
                              size_t errlen) {
  return as_async(ar_create(VS_ARENA_VMM, capacity, nallocs, o, err, errlen), o);
}

static int ar_alloc(void *p, uint32_t id, uint64_t size, uint64_t stream) {
  ar_state *s = p;   /* stream: read only by -async (cuMemAlloc carries none; stream order is per trace) */
  uint64_t before = s->calls;
  int rc;
  if (on_lane(s, stream)) rc = vs_arena_alloc_lane(s->a, size, &s->addr[id]);
  else if (s->async) rc = vs_arena_alloc_on(s->a, size, stream, &s->addr[id]);
  else rc = vs_arena_alloc(s->a, size, &s->addr[id]);
  if (rc == VS_BACKEND_OK) return s->calls == before ? VS_POLICY_CACHED : VS_POLICY_DRIVER;
  return rc == VS_BACKEND_OOM ? VS_POLICY_REFUSED : -1;
}

static void ar_free(void *p, uint32_t id, uint64_t size) {
  (void)size;
  ar_state *s = p;
  /* -async: the free on its allocation's stream (the trace's frees are) */
  int lane = s->streams && on_lane(s, s->streams[id]);
  if ((lane ? vs_arena_free_lane(s->a, s->addr[id]) : vs_arena_free(s->a, s->addr[id])) != 0)
    s->bad_frees++;
}

static void ar_stats(void *p, vs_policy_stats *out) {
  ar_state *s = p;
  vs_space_counters c;
  vs_space_backend_counters(s->sb, &c);
  out->peak_reserved = c.peak_held;
  out->driver_calls = vs_space_backend_calls(&c) + s->order_calls;
  out->tally = s->tally;
  char why[160];
  if (s->bad_frees)
    snprintf(out->problem, sizeof out->problem, "the arena refused %llu frees of its own allocations",
             (unsigned long long)s->bad_frees);
  else if (vs_arena_check(s->a, why, sizeof why))
    snprintf(out->problem, sizeof out->problem, "arena invariant broken: %s", why);
  else if (c.errors)
    snprintf(out->problem, sizeof out->problem, "the arena misused the backend %llu times",
             (unsigned long long)c.errors);
}

static void ar_probe(void *p, uint64_t *reserved, uint64_t *calls) {
  ar_state *s = p;
  vs_space_counters c;
  vs_space_backend_counters(s->sb, &c);
  *reserved = c.held;
  *calls = vs_space_backend_calls(&c) + s->order_calls;
}

/* Every arena policy shares the engine; they differ in mode and in what
 * the program calls. */
#define ARENA_POLICY(id, nm, text, make)                                                                 \
  const vs_policy id = {.name = nm, .summary = text, .create = make, .alloc = ar_alloc, .free = ar_free, \
                        .stats = ar_stats, .destroy = ar_destroy, .probe = ar_probe, .clock = ar_clock, \
                        .program_sync = ar_program_sync}
ARENA_POLICY(vs_policy_chunks, "chunks", "the arena, large requests in dedicated chunks (arena = chunks)",
             chunks_create);
ARENA_POLICY(vs_policy_vmm, "vmm", "the arena, large requests on VMM-stitched granules (arena = vmm)", vmm_create);
/* The program on CUDA's stream-ordered allocator (cuMemAllocAsync on the
 * allocation's stream, cuMemFreeAsync on it), as PyTorch's cudaMallocAsync
 * backend calls it; the same as vmm / chunks on a trace with the legacy
 * stream alone. Only when named. */
ARENA_POLICY(vs_policy_chunks_async, "chunks-async",
             "chunks, the program on cuMemAllocAsync/cuMemFreeAsync (legacy-stream blocks on the arena's lane)",
             chunks_async_create);
ARENA_POLICY(vs_policy_vmm_async, "vmm-async",
             "vmm, the program on cuMemAllocAsync/cuMemFreeAsync (legacy-stream blocks on the arena's lane)",
             vmm_async_create);

/* Reader for allocation traces in the RMM logging CSV layout:
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *
 * (Time is kept per event, in microseconds: policies whose behaviour
 * depends on time, such as the arena's decay, run on the trace's clock.)
 *
 * Action is `allocate`, `allocate failure` or `free`; Time is
 * HH:MM:SS.ffffff; Pointer and Stream are hex (0x...) or decimal; Size is
 * decimal bytes (for `free`, the size of the matching allocate).
 *
 * The reader turns a trace into dense events: every successful allocate gets
 * an id 0..nallocs-1 (its size and stream in sizes[id], streams[id]); a free
 * names the id of the live allocation it ends. So replaying needs no
 * pointer hashing. `allocate failure` lines are counted and skipped: the
 * original run could not serve them, so they hold no memory.
 *
 * Every malformed input (missing header, wrong column count, bad or
 * out-of-range number, unknown action, free of a pointer that is not live,
 * allocate of a pointer that is already live, size mismatch) is refused with
 * a message naming file:line and the reason. Nothing is partially loaded. */
#ifndef VS_TRACE_CSV_H
#define VS_TRACE_CSV_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Sizes above this are refused: no card holds them, and sums of sizes stay
 * far from uint64 overflow even over billions of events. */
#define VS_TRACE_MAX_SIZE (1ULL << 50)

typedef struct vs_trace_event {
  uint32_t id;    /* allocation id */
  uint32_t free;  /* 0 allocate, 1 free */
} vs_trace_event;

typedef struct vs_trace {
  vs_trace_event *ev;
  size_t nev;
  uint64_t *time_us;  /* per event: its Time column in microseconds (never decreasing) */
  uint64_t *sizes;    /* per allocation id: requested bytes */
  uint64_t *streams;  /* per allocation id: the Stream column */
  uint32_t nallocs;
  uint64_t nfrees;
  uint64_t failures_skipped;  /* `allocate failure` lines */
  uint64_t zero_skipped;      /* allocates of 0 bytes, and frees of 0 bytes of a pointer not live */
  uint64_t live_at_end;       /* allocations never freed in the trace */
  /* Allocations on a stream other than the legacy default stream (Stream
   * 0x0, or 0x1: CU_STREAM_LEGACY). 0: the program used only the legacy
   * stream, so the shim keeps the arena in stream order (docs/arena.md). */
  uint64_t off_legacy;
  /* The program's own synchronisations, from the sidecar file beside the
   * trace (trace_syncs.h); none when it has none. */
  struct vs_trace_sync *syncs;
  size_t nsyncs;
} vs_trace;

/* Unsigned number, decimal or (if allow_hex) 0x-prefixed hex, the whole of
 * s[0..len). 0 ok, -1 not a number, -2 too large for 64 bits. */
int vs_trace_parse_u64(const char *s, size_t len, int allow_hex, uint64_t *out);

/* Reads `path`. 0 on success; -1 with a message ("file:line: reason") in err. */
int vs_trace_load(const char *path, vs_trace *t, char *err, size_t errlen);
/* Same, from an open stream; `name` is used in messages. */
int vs_trace_read(FILE *f, const char *name, vs_trace *t, char *err, size_t errlen);
void vs_trace_free(vs_trace *t);

#endif

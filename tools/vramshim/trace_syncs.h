/* The program's own synchronisations beside a trace: a sidecar file
 * `TRACE.syncs` (the trace's path with `.syncs` appended, so a `*.csv`
 * glob never takes it for a trace) that keeps the RMM CSV layout of the
 * trace itself unchanged (docs/replay.md, "Program synchronisations"):
 *
 *   After,Sync,Stream
 *   412,stream,0x7f5a00001000
 *   412,stream,0x0
 *   900,context,
 *
 * After: the number of the trace's allocate and free lines (`allocate
 * failure` lines are not counted) before the synchronisation, never
 * decreasing, at most their total. Sync: `context` (cuCtxSynchronize, the
 * Stream field empty) or `stream` (cuStreamSynchronize of Stream, hex or
 * decimal; 0x0 and 0x1 are the legacy stream). The arena policies replay
 * them as the shim counts the program's syncs (stream_syncs.h). */
#ifndef VS_TRACE_SYNCS_H
#define VS_TRACE_SYNCS_H
#include <stddef.h>
#include <stdint.h>

#include "trace_csv.h"

typedef struct vs_trace_sync {
  uint64_t after;   /* events of t->ev before it */
  uint64_t stream;  /* stream syncs: the handle (legacy: 0) */
  int context;      /* 1: context-wide */
} vs_trace_sync;

/* Reads `path` into t->syncs / t->nsyncs if the file exists (0 and
 * nothing when it does not); -1 with "file:line: reason" in err. */
int vs_trace_syncs_load(const char *path, vs_trace *t, char *err, size_t errlen);

#endif

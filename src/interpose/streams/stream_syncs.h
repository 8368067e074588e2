/* The program's own synchronisations, counted as the arena's
 * (docs/arena.md, "The program's own synchronisations").
 *
 * Out of stream order a freed arena block waits for a sync begun after its
 * free. A program with streams of its own synchronises anyway (a serving
 * loop reads its tokens back every step); the hooks of stream_syncs.c tell
 * the arena of a context when such a sync has made freed blocks idle, by
 * the tickets of src/arena/arena.h (vs_arena_sync_ticket before the call is
 * forwarded, vs_arena_synced_to after it returned CUDA_SUCCESS):
 *   - cuCtxSynchronize, cuCtxSynchronize_v2 (NULL or the current context):
 *     the context's whole work, so every block freed before the ticket;
 *   - per stream (cuStreamSynchronize, cuStreamQuery == CUDA_SUCCESS, and
 *     cuEventSynchronize / cuEventQuery == CUDA_SUCCESS of an event whose
 *     cuEventRecord the shim saw, on a stream it knows, not capturing):
 *     the stream's "synced up to" ticket; a block is idle once every
 *     stream of its context that could hold work on it has synced after
 *     its free: the minimum over the context's legacy stream, every stream
 *     created in it, and every destroyed one until a context-wide sync.
 * Per-stream syncs stop counting for good once the per-thread default
 * stream is in use (stream_order.h knows: per-thread streams cannot be
 * enumerated), a green context exists, or a stream could not be recorded
 * (out of host memory); context-wide syncs count always.
 * VRAMSHIM_PROGRAM_SYNCS=off counts none (the arena then syncs itself, as
 * before).
 *
 * Like the arena's own cuCtxSynchronize, this covers the work of the
 * memory's own context; work another context or process does on it is
 * covered by neither (docs/arena.md, "Stream order", "IPC").
 * Thread safety: every function may be called from any thread at once. */
#ifndef VS_STREAM_SYNCS_H
#define VS_STREAM_SYNCS_H

#include "cuda_api.h"

#include <stdint.h>

/* Around a stream creation in the current context (stream_order.c):
 * before it is forwarded, then with the driver's answer. */
typedef struct vs_stream_note {
  uint64_t ctx_id;
  void *arena;
  uint64_t ticket;
} vs_stream_note;
void vs_stream_syncs_before_create(vs_stream_note *n);
void vs_stream_syncs_created(CUresult r, CUstream s, const vs_stream_note *n);
/* The id of the context (contexts.h) a live stream the program created
 * belongs to; 0 when the shim did not record it (made in a green context,
 * before the shim, or with VRAMSHIM_PROGRAM_SYNCS=off). */
uint64_t vs_stream_syncs_ctx_of(CUstream h);
/* Per-stream syncs count no more (why is logged at debug level). */
void vs_stream_syncs_off(const char *why);
/* fork: the child's lock is fresh, its table empty of the parent's state
 * that cannot be vouched for (its streams are the parent's handles). */
void vs_stream_syncs_atfork_child(void);

#endif

/* Stream order: whether every piece of device work the program can enqueue
 * is ordered after every earlier free, so that the arena may hand a freed
 * block out again at once, with no synchronisation (docs/arena.md,
 * "Stream order").
 *
 * The CUDA Driver API serialises the legacy default stream: all work on it
 * runs in the order it was enqueued, and a block's last use was enqueued
 * before its cuMemFree. So while a program has made no stream of its own
 * (cuStreamCreate*, cuGreenCtxStreamCreate, cuGreenCtxCreate), has not
 * used the per-thread default stream (a call of any _ptsz/_ptds entry
 * point, all hooked for this: hook_list_ptds.h; CU_STREAM_PER_THREAD given
 * to a hooked stream-ordered allocation) and has at most one context (each
 * has its own legacy stream), the next use of a reused block runs after the
 * last use of its previous owner. A lookup is no sign: the CUDA runtime
 * looks up the per-thread variants at start in every program. The first sign to the
 * contrary leaves stream order for good: every arena syncs once (what was
 * freed in order is idle before the new stream exists) and from then on
 * waits for a sync before reusing a freed block, as before.
 *
 * What the shim cannot see: a program that passes the CU_STREAM_PER_THREAD
 * handle to a legacy entry point the shim does not hook (a kernel launch, a
 * copy) from two threads at once, or work another process does on this
 * memory through IPC. VRAMSHIM_STREAM_ORDER=off turns stream order off from
 * the start for such a program.
 * Thread safety: every function may be called from any thread at once. */
#ifndef VS_STREAM_ORDER_H
#define VS_STREAM_ORDER_H

#include <stdint.h>

/* 1 while the process is in stream order. */
int vs_stream_order_on(void);
/* The program did something that may put work off the legacy stream:
 * leave stream order (once; returns after every arena has synced). `why`
 * is logged. */
void vs_stream_order_leave(const char *why);
/* What a leave does to the arenas (every arena syncs once): registered by
 * arena_glue.c before its first arena is published, as the arenas lie
 * above this file (src/LAYERS). */
void vs_stream_order_set_on_leave(void (*fn)(void));
/* A context began: leave stream order when the process now has two. */
void vs_stream_order_ctx_begun(void);
/* fork: the child's lock is fresh (arena_glue.c's fork handler calls it;
 * stream_syncs.c's own is called by the start-up's, entry/init.c). */
void vs_stream_order_atfork_child(void);

/* The per-thread default stream is in use (a _ptsz/_ptds call, or the
 * CU_STREAM_PER_THREAD handle given to a hooked function): leaves stream
 * order, and from then on vs_stream_order_ptds_used is 1 (stream_syncs.h:
 * per-thread streams cannot be enumerated, so only context-wide syncs
 * count for the arena). */
void vs_stream_order_ptds(const char *why);
int vs_stream_order_ptds_used(void);

/* In a hook that takes a stream: a _ptsz variant (ptsz 1) or the
 * CU_STREAM_PER_THREAD handle (0x2) ends stream order before the call. */
#define VS_STREAM_SEEN(stream, ptsz)                                          \
  do {                                                                        \
    if ((ptsz) || (uintptr_t)(stream) == 0x2)                                 \
      vs_stream_order_ptds("the per-thread default stream is in use");        \
  } while (0)

#endif

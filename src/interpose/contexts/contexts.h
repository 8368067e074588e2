/* The CUDA contexts the shim follows: who owns a piece of device memory.
 *
 * Memory belongs to the context that was current when it was allocated;
 * the driver frees it when that context ends (cuCtxDestroy, the last
 * cuCtxDetach, the last cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxReset).
 * Each live context has one record here, keyed by its handle, with an id
 * that is never reused: a driver may hand out the same handle again (the
 * primary context of a device keeps its handle across a reset), and what
 * was allocated in the old context must never be taken for the new one's.
 *
 * A record is created when the shim sees the context begin (the hooks of
 * hooks_ctx.c) or, for a context it never saw begin, on the first request
 * made in it. Tracker records carry the id (vs_alloc_info.ctx_id); the
 * arena of a context hangs off its record (arena_glue.c).
 *
 * Lifetime: a hook that works in a context holds a reference
 * (vs_ctx_acquire_current / vs_ctx_acquire_id, then vs_ctx_put) for the
 * whole request, including recording its result. vs_ctx_unlink takes the
 * record out of the registry (no new reference can be had) and waits until
 * every reference is put; only then does the memory service sweep what the
 * context owned and retire the record (vs_ctx_free: kept, never reused). Walks over every live record
 * (vs_ctx_next) run under the registry's read lock, which unlink's write
 * lock excludes.
 * Thread safety: every function may be called from any thread at once. */
#ifndef VS_CONTEXTS_H
#define VS_CONTEXTS_H

#include "arena.h"
#include "cuda_api.h"
#include "driver_table.h"

#include <stdatomic.h>
#include <stdint.h>

#define VS_CTX_REF_STRIPES 8
#define VS_CTX_REF_STRIDE 128   /* apart by this much, two lines at any alignment calloc gives */

typedef struct vs_ctx {
  uint64_t handle;   /* the CUcontext */
  uint64_t id;       /* unique in this process, never 0, never reused */
  int card;
  int primary;       /* the device's primary context */
  int retains;       /* primary: retains seen minus releases (when the driver cannot say) */
  int usage;         /* regular: cuCtxCreate 1, cuCtxAttach +1, cuCtxDetach -1 */
  /* Owned by arena_glue.c (under its create lock, read with acquire loads). */
  _Atomic(vs_arena *) arena;
  _Atomic int arena_vmm;   /* 1 when `arena` is a VMM one */
  _Atomic int arena_off;   /* the arena is off for this context's card */
  vs_arena *retired;       /* a VMM arena replaced by a chunks one (holds nothing) */
  void *backend, *retired_backend;
  uint32_t peer_cards;     /* cards this context's memory was opened to (cuCtxEnablePeerAccess) */
  /* Owned by memory_service.c: what the context's swept records had charged
   * to the tenant on `card`, given back once the driver has freed it. */
  uint64_t swept_charge;
  struct vs_ctx *next, *prev;   /* the registry: a short list (a process has few contexts) */
  /* Walks by other threads in this context's arena (vs_ctx_walk_enter) and
   * the calls that keep them out (vs_ctx_quiet, a count: two threads
   * detaching at once): see there. */
  _Atomic int walkers;
  _Atomic int quiet;
  /* Hooks working in this context right now: the sum of the stripes, and
   * the threads' own hold records that name it (contexts.c: the fast path
   * holds there without a locked instruction). A
   * thread counts on its own stripe (contexts.c), each stripe a cache line
   * or more from the others and from the fields above, which every hook
   * reads: threads working in one context do not pass a line between them. */
  struct {
    char apart[VS_CTX_REF_STRIDE - sizeof(_Atomic int)];
    _Atomic int n;
  } refs[VS_CTX_REF_STRIPES];
} vs_ctx;

/* The calling thread's current context, with a reference, creating its
 * record if the shim never saw it begin. NULL without a current context (or
 * out of host memory). */
vs_ctx *vs_ctx_acquire_current(const vs_real_table *real);
/* 1 when c (referenced, so live) is the calling thread's current context:
 * one cuCtxGetCurrent, no lookup, no reference taken. */
int vs_ctx_is_current(const vs_real_table *real, const vs_ctx *c);
/* The live context of that id, with a reference; NULL if it has ended. */
vs_ctx *vs_ctx_acquire_id(uint64_t id);
/* The live record of that CUcontext, with a reference; NULL if the shim
 * has none (it never saw the context, or it ended). */
vs_ctx *vs_ctx_acquire_handle(uint64_t handle);
void vs_ctx_put(vs_ctx *c);

/* The shim saw a context begin: cuCtxCreate (usage 1), or a retain of
 * dev's primary context. A live record of the same handle that is not that
 * context any more (its end went by unseen) is returned in *stale, unlinked,
 * for the caller to end; else *stale is NULL. */
void vs_ctx_created(uint64_t handle, int card, vs_ctx **stale);
void vs_ctx_primary_retained(uint64_t handle, int dev, vs_ctx **stale);
/* 1 when handle is a live context the shim follows that is not a
 * primary context. */
int vs_ctx_is_regular(uint64_t handle);
/* cuCtxAttach on the current context: usage + 1. */
void vs_ctx_attached(uint64_t handle);
/* cuCtxDetach: usage - 1; 1 when it reached 0 (the context ends). */
int vs_ctx_detached(uint64_t handle);
/* The primary-context hooks serialise under this lock, so the driver's
 * reference count and what the shim concludes from it agree. */
void vs_ctx_primary_lock(void);
void vs_ctx_primary_unlock(void);
/* Release seen: retains - 1; returns what is left. */
int vs_ctx_primary_released(int dev);

/* A walk over every context's arena (arena_glue.c: trims, decay ticks,
 * settles; the work of threads that did not make the request at hand)
 * enters a referenced context with vs_ctx_walk_enter, which is 0 while the
 * context is quiet (then it stays out), and leaves with vs_ctx_walk_leave.
 * vs_ctx_quiet keeps such walks out of the live record of handle (or of
 * dev's primary one, handle 0 and dev >= 0) and returns once none is
 * inside, so none calls the driver for that context's memory while the
 * caller makes a call after which the driver may have ended it (a
 * primary context's release: whether it was the last is known only after
 * the call, when the driver has freed the memory and may hand its
 * addresses out again). NULL when there is no such record. The record
 * stays valid (records are never freed: vs_ctx_free); vs_ctx_unquiet ends
 * that call's quiet when the context lives on (walks come back once no
 * such call is left). */
int vs_ctx_walk_enter(vs_ctx *c);
void vs_ctx_walk_leave(vs_ctx *c);
vs_ctx *vs_ctx_quiet(uint64_t handle, int primary_dev);
void vs_ctx_unquiet(vs_ctx *c);

/* Takes the live record of handle (or dev's primary record, handle 0 and
 * dev >= 0) out of the registry and waits until no hook works in it. NULL
 * when there is none. The caller ends it and then calls vs_ctx_free. */
vs_ctx *vs_ctx_unlink(uint64_t handle, int primary_dev);
void vs_ctx_free(vs_ctx *c);

/* Walks: under vs_ctx_read_lock, vs_ctx_next(NULL) is the first live
 * record, vs_ctx_next(c) the one after c, NULL at the end. */
void vs_ctx_read_lock(void);
void vs_ctx_read_unlock(void);
vs_ctx *vs_ctx_next(vs_ctx *c);
/* Moves with every record unlinked (under the write lock, before its
 * walkers can miss it): an answer built by a walk stands only while this
 * has not moved. */
uint64_t vs_ctx_unlinks(void);

/* fork: the child has no contexts (CUDA does not survive fork); the
 * parent's records are kept reachable, never used, and never walked (no fork
 * handler takes the registry's lock: contexts.c says why). */
void vs_ctx_atfork_child(void);

#endif

/* Stream order (stream_order.h): the process-wide decision and the hooks
 * of stream creation. The arenas themselves are walked by arena_glue.c. */
#include "hook_common.h"

#include "arena_glue.h"
#include "contexts.h"
#include "log.h"
#include "settings.h"
#include "stream_order.h"
#include "stream_syncs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* -1: not decided yet (the environment is read on first use). */
static _Atomic int g_on = -1;
static _Atomic int g_settled;   /* left, and every arena has synced */
static pthread_mutex_t g_leave_lock = PTHREAD_MUTEX_INITIALIZER;

int vs_stream_order_on(void) {
  int on = atomic_load_explicit(&g_on, memory_order_acquire);
  if (__builtin_expect(on >= 0, 1)) return on;
  int want = !vs_settings_env_off("VRAMSHIM_STREAM_ORDER");
  int expect = -1;
  atomic_compare_exchange_strong(&g_on, &expect, want);
  return atomic_load(&g_on);
}

void vs_stream_order_leave(const char *why) {
  if (atomic_load_explicit(&g_settled, memory_order_acquire)) return;
  pthread_mutex_lock(&g_leave_lock);
  if (!atomic_load(&g_settled)) {
    int was = vs_stream_order_on();
    /* Down first: an arena created from now on starts out of order (and
     * one created just before sees the flag down after it is published:
     * arena_glue.c). Then every arena syncs once. Later callers wait on
     * the lock until that is done, so no stream handle is returned to the
     * program before the memory freed in order is idle. */
    atomic_store(&g_on, 0);
    vs_arena_glue_leave_order();
    atomic_store_explicit(&g_settled, 1, memory_order_release);
    if (was) VS_INFO("%s: freed device memory is reused only after a synchronisation from now on", why);
  }
  pthread_mutex_unlock(&g_leave_lock);
}

static _Atomic int g_ptds;

void vs_stream_order_ptds(const char *why) {
  atomic_store(&g_ptds, 1);
  vs_stream_order_leave(why);
}

int vs_stream_order_ptds_used(void) { return atomic_load_explicit(&g_ptds, memory_order_acquire); }

void vs_stream_order_ctx_begun(void) {
  if (atomic_load_explicit(&g_settled, memory_order_acquire)) return;
  int n = 0;
  vs_ctx_read_lock();
  for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c)) n++;
  vs_ctx_read_unlock();
  if (n > 1) vs_stream_order_leave("a second CUDA context");
}

void vs_stream_order_atfork_child(void) {
  /* A parent thread may have held the lock across fork; the decision
   * itself is kept (the child's arenas are new, made by its own rules). */
  pthread_mutex_init(&g_leave_lock, NULL);
  vs_stream_syncs_atfork_child();
}

/* ---- Hooks: stream creation ---------------------------------------------
 * The driver's answer, unchanged; on success the process leaves stream
 * order before the new stream is returned. A stream of the current context
 * is recorded for stream_syncs.c; a green context, or a stream of one,
 * makes per-stream syncs count no more (its streams are not the current
 * context's). */
#define STREAM_BODY(name, args, why, out, green)                              \
  VS_HOOK_ENTER(name, args);                                                  \
  vs_stream_note note;                                                        \
  vs_guard_enter();                                                           \
  if (!(green)) vs_stream_syncs_before_create(&note);                         \
  CUresult r = real->name args;                                               \
  if (!(green)) vs_stream_syncs_created(r, r == CUDA_SUCCESS ? (out) : NULL, &note); \
  else if (r == CUDA_SUCCESS) vs_stream_syncs_off(why);                       \
  vs_guard_leave();                                                           \
  if (r == CUDA_SUCCESS) vs_stream_order_leave(why);                          \
  return r

CUresult vs_hook_cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  STREAM_BODY(cuStreamCreate, (phStream, Flags), "the program created a CUDA stream", *phStream, 0);
}
CUresult vs_hook_cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority) {
  STREAM_BODY(cuStreamCreateWithPriority, (phStream, flags, priority), "the program created a CUDA stream",
              *phStream, 0);
}
CUresult vs_hook_cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  STREAM_BODY(cuGreenCtxCreate, (phCtx, desc, dev, flags), "the program created a green context", NULL, 1);
}
CUresult vs_hook_cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags, int priority) {
  STREAM_BODY(cuGreenCtxStreamCreate, (phStream, greenCtx, flags, priority), "the program created a CUDA stream",
              NULL, 1);
}

/* ---- Hooks: every other per-thread default stream variant ----------------
 * (hook_list_ptds.h) A call, not a lookup, is the sign: the runtime looks
 * them all up at start. The driver's answer, unchanged. */
#define PTDS_BODY(name, params, args)                                               \
  CUresult vs_hook_##name params {                                                  \
    VS_HOOK_ENTER(name, args);                                                      \
    vs_stream_order_ptds("the program used the per-thread default stream (" #name ")"); \
    VS_FORWARD(name, args);                                                         \
  }
VS_PTDS_HOOKS(PTDS_BODY)
#undef PTDS_BODY

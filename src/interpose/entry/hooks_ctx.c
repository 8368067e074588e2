/* Hooks of context creation and teardown: every ABI variant cuda.h
 * declares. Each calls the driver variant the program called; on success
 * the memory service learns that a context began or ended (contexts.h).
 * Where the end is certain (a destroy of a context the shim follows, a
 * reset) the shim lets go of the context's records before the driver frees
 * its memory, and of its arena after; a release is acted on once the
 * driver says the context is gone. Either way nothing of it is left in the
 * shim when the hook returns, and nothing of it is ever handed out again. */
#include "hook_common.h"

#include "arena_glue.h"
#include "contexts.h"
#include "nvml_cards.h"
#include "stream_order.h"

/* ---- cuCtxCreate (v1 .. v4): the new context is current on this thread -- */
#define CREATE_BODY(name, args)                                                    \
  VS_HOOK_ENTER(name, args);                                                       \
  vs_footprint_ctx_begins((int)dev);                                               \
  vs_guard_enter();                                                                \
  CUresult r = real->name args;                                                    \
  if (r == CUDA_SUCCESS && pctx && *pctx) vs_mem_ctx_begin((uint64_t)(uintptr_t)*pctx, (int)dev, 0); \
  vs_guard_leave();                                                                \
  if (r == CUDA_SUCCESS) vs_stream_order_ctx_begun();                              \
  if (r == CUDA_SUCCESS && pctx && *pctx) vs_footprint_ctx_begun((int)dev, (uint64_t)(uintptr_t)*pctx, 0); \
  return r

CUresult vs_hook_cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                                CUdevice dev) {
  CREATE_BODY(cuCtxCreate_v4, (pctx, ctxCreateParams, flags, dev));
}
CUresult vs_hook_cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                unsigned int flags, CUdevice dev) {
  CREATE_BODY(cuCtxCreate_v3, (pctx, paramsArray, numParams, flags, dev));
}
CUresult vs_hook_cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  CREATE_BODY(cuCtxCreate_v2, (pctx, flags, dev));
}
CUresult vs_hook_cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  CREATE_BODY(cuCtxCreate, (pctx, flags, dev));
}

/* ---- cuCtxDestroy ------------------------------------------------------- */
/* A regular context the shim follows is let go of before the driver frees
 * its memory (a primary one the driver refuses to destroy). */
#define DESTROY_BODY(name)                                                         \
  VS_HOOK_ENTER(name, (ctx));                                                      \
  vs_guard_enter();                                                                \
  vs_ctx *ending = ctx && vs_ctx_is_regular((uint64_t)(uintptr_t)ctx) ? vs_mem_ctx_ending((uint64_t)(uintptr_t)ctx, -1) : NULL; \
  CUresult r = real->name(ctx);                                                    \
  vs_mem_ctx_ended(ending, r);                                                     \
  vs_guard_leave();                                                                \
  if (r == CUDA_SUCCESS) vs_footprint_ctx_ended((uint64_t)(uintptr_t)ctx, -1);      \
  return r

CUresult vs_hook_cuCtxDestroy_v2(CUcontext ctx) { DESTROY_BODY(cuCtxDestroy_v2); }
CUresult vs_hook_cuCtxDestroy(CUcontext ctx) { DESTROY_BODY(cuCtxDestroy); }

/* ---- cuCtxAttach / cuCtxDetach (deprecated): a usage count -------------- */
CUresult vs_hook_cuCtxAttach(CUcontext *pctx, unsigned int flags) {
  VS_HOOK_ENTER(cuCtxAttach, (pctx, flags));
  vs_guard_enter();
  CUresult r = real->cuCtxAttach(pctx, flags);
  if (r == CUDA_SUCCESS && pctx && *pctx) vs_ctx_attached((uint64_t)(uintptr_t)*pctx);
  vs_guard_leave();
  return r;
}

CUresult vs_hook_cuCtxDetach(CUcontext ctx) {
  VS_HOOK_ENTER(cuCtxDetach, (ctx));
  vs_guard_enter();
  vs_ctx *quiet = ctx ? vs_ctx_quiet((uint64_t)(uintptr_t)ctx, -1) : NULL;
  CUresult r = real->cuCtxDetach(ctx);
  /* The driver destroys the context when its usage count reaches 0. */
  int ended = r == CUDA_SUCCESS && ctx && vs_ctx_detached((uint64_t)(uintptr_t)ctx);
  if (ended) vs_mem_ctx_end((uint64_t)(uintptr_t)ctx, -1);
  else vs_ctx_unquiet(quiet);
  vs_guard_leave();
  if (ended) vs_footprint_ctx_ended((uint64_t)(uintptr_t)ctx, -1);
  return r;
}

/* ---- peer access: the current context reaches peerContext's memory. The
 * arena's VMM memory is not cuMemAlloc memory, which the driver opens to
 * the peer by itself: the arena opens its mappings (arena_glue.h). */
static void peer_access(const vs_real_table *real, CUcontext peer, int on) {
  int card = vs_driver_current_card(real);
  if (card >= 0 && peer) vs_arena_glue_peer_access((uint64_t)(uintptr_t)peer, card, on);
}

CUresult vs_hook_cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  VS_HOOK_ENTER(cuCtxEnablePeerAccess, (peerContext, Flags));
  vs_guard_enter();
  CUresult r = real->cuCtxEnablePeerAccess(peerContext, Flags);
  vs_guard_leave();
  /* already on: the driver's answer, and the arena's mappings are open */
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) peer_access(real, peerContext, 1);
  return r;
}

CUresult vs_hook_cuCtxDisablePeerAccess(CUcontext peerContext) {
  VS_HOOK_ENTER(cuCtxDisablePeerAccess, (peerContext));
  vs_guard_enter();
  CUresult r = real->cuCtxDisablePeerAccess(peerContext);
  vs_guard_leave();
  if (r == CUDA_SUCCESS) peer_access(real, peerContext, 0);
  return r;
}

/* ---- primary contexts: one per device, reference counted ---------------
 * Retain, release and reset run one at a time (vs_ctx_primary_lock), so the
 * driver's count and the shim's reading of it agree. A release ends the
 * context when the driver says it is no longer active (the count reached
 * 0), or, with a driver that cannot say, when the retains the shim saw are
 * all released; a reset always ends it. */
CUresult vs_hook_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  VS_HOOK_ENTER(cuDevicePrimaryCtxRetain, (pctx, dev));
  vs_footprint_ctx_begins((int)dev);
  vs_guard_enter();
  vs_ctx_primary_lock();
  CUresult r = real->cuDevicePrimaryCtxRetain(pctx, dev);
  if (r == CUDA_SUCCESS && pctx && *pctx) vs_mem_ctx_begin((uint64_t)(uintptr_t)*pctx, (int)dev, 1);
  vs_ctx_primary_unlock();
  vs_guard_leave();
  if (r == CUDA_SUCCESS) vs_stream_order_ctx_begun();
  if (r == CUDA_SUCCESS && pctx && *pctx) vs_footprint_ctx_begun((int)dev, (uint64_t)(uintptr_t)*pctx, 1);
  return r;
}

static int primary_active(const vs_real_table *real, CUdevice dev, int retains_left) {
  unsigned flags = 0;
  int active = 0;
  if (real->cuDevicePrimaryCtxGetState && real->cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS)
    return active;
  return retains_left > 0;
}

/* A reset ends the context for certain: let go of it first, as for a
 * destroy. Whether a release ends it is known only after the call: until
 * then the context is quiet (contexts.h), so no other thread's trim frees
 * its memory in the driver after the driver has freed it with the context. */
#define RELEASE_BODY(name, reset)                                                  \
  VS_HOOK_ENTER(name, (dev));                                                      \
  vs_guard_enter();                                                                \
  vs_ctx_primary_lock();                                                           \
  vs_ctx *ending = (reset) ? vs_mem_ctx_ending(0, (int)dev) : NULL;                \
  vs_ctx *quiet = (reset) ? NULL : vs_ctx_quiet(0, (int)dev);                      \
  CUresult r = real->name(dev);                                                    \
  int ended = 0;                                                                   \
  if (reset) {                                                                     \
    vs_mem_ctx_ended(ending, r);                                                   \
    ended = r == CUDA_SUCCESS;                                                     \
  } else if (r == CUDA_SUCCESS) {                                                  \
    int left = vs_ctx_primary_released((int)dev);                                  \
    ended = !primary_active(real, dev, left);                                      \
    if (ended) vs_mem_ctx_end(0, (int)dev);                                        \
  }                                                                                \
  if (!ended) vs_ctx_unquiet(quiet);                                               \
  vs_ctx_primary_unlock();                                                         \
  vs_guard_leave();                                                                \
  if (ended) vs_footprint_ctx_ended(0, (int)dev);                                  \
  return r

CUresult vs_hook_cuDevicePrimaryCtxRelease_v2(CUdevice dev) { RELEASE_BODY(cuDevicePrimaryCtxRelease_v2, 0); }
CUresult vs_hook_cuDevicePrimaryCtxRelease(CUdevice dev) { RELEASE_BODY(cuDevicePrimaryCtxRelease, 0); }
CUresult vs_hook_cuDevicePrimaryCtxReset_v2(CUdevice dev) { RELEASE_BODY(cuDevicePrimaryCtxReset_v2, 1); }
CUresult vs_hook_cuDevicePrimaryCtxReset(CUdevice dev) { RELEASE_BODY(cuDevicePrimaryCtxReset, 1); }

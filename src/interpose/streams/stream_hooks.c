/* The hooks that are signs against stream order (arenas/stream_order.h):
 * stream and green-context creation, and every per-thread default stream
 * variant (driver/hook_list_ptds.h). */
#include "hook_enter.h"

#include "stream_order.h"
#include "stream_syncs.h"

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

/* Graph capture and the arenas (capture.h): the hooks that begin and end
 * a capture. */
#include "hook_enter.h"

#include "arena_backend.h"
#include "arena_glue.h"
#include "capture.h"
#include "graph_charge.h"
#include "stream_order.h"

#include <stdatomic.h>

static _Atomic int g_capture_seen;  /* a cuStreamBeginCapture* was called */

int vs_capture_seen(void) { return atomic_load_explicit(&g_capture_seen, memory_order_acquire); }

/* A capture that begins is counted before the driver begins it, and
 * uncounted if the driver says no; when none was in progress, the arenas
 * settle first (capture.h). Counted first, then fenced: a trim or sync of
 * another thread (the background decay, a cuMemPoolTrimTo, a tenant's
 * reclaim) that read no hold just before would otherwise reach the driver
 * inside the capture and invalidate it (a race the card storm found under
 * AddressSanitizer: shim_arena_capture_* checks it). */
#define CAPTURE_BEGIN_BODY(name, args, per_thread)                                                      \
  VS_HOOK_ENTER(name, args);                                                                          \
  if (per_thread) vs_stream_order_ptds("the program used the per-thread default stream (" #name ")"); \
  atomic_store(&g_capture_seen, 1);                                                                   \
  if (!vs_backend_capturing()) vs_arena_glue_settle_all();                                            \
  vs_backend_capture_begin();                                                                         \
  vs_arena_glue_fence_all();                                                                          \
  vs_guard_enter();                                                                                   \
  CUresult r = real->name args;                                                                       \
  vs_guard_leave();                                                                                   \
  if (r != CUDA_SUCCESS) vs_backend_capture_end();                                                    \
  return r

CUresult vs_hook_cuStreamBeginCapture(CUstream hStream) { CAPTURE_BEGIN_BODY(cuStreamBeginCapture, (hStream), 0); }
CUresult vs_hook_cuStreamBeginCapture_ptsz(CUstream hStream) {
  CAPTURE_BEGIN_BODY(cuStreamBeginCapture_ptsz, (hStream), 1);
}
CUresult vs_hook_cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  CAPTURE_BEGIN_BODY(cuStreamBeginCapture_v2, (hStream, mode), 0);
}
CUresult vs_hook_cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  CAPTURE_BEGIN_BODY(cuStreamBeginCapture_v2_ptsz, (hStream, mode), 1);
}
CUresult vs_hook_cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                             const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                             CUstreamCaptureMode mode) {
  CAPTURE_BEGIN_BODY(cuStreamBeginCaptureToGraph,
                     (hStream, hGraph, dependencies, dependencyData, numDependencies, mode), 0);
}
CUresult vs_hook_cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                                  const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                                  CUstreamCaptureMode mode) {
  CAPTURE_BEGIN_BODY(cuStreamBeginCaptureToGraph_ptsz,
                     (hStream, hGraph, dependencies, dependencyData, numDependencies, mode), 1);
}
#undef CAPTURE_BEGIN_BODY

int vs_capture_on(const vs_real_table *real, CUstream h, int per_thread) {
  if (!vs_backend_capturing()) return 0;
  CUresult (*query)(CUstream, CUstreamCaptureStatus *) =
      per_thread ? real->cuStreamIsCapturing_ptsz : real->cuStreamIsCapturing;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!query) return 0;
  vs_guard_enter();
  CUresult r = query(h, &st);
  vs_guard_leave();
  return r == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

void vs_capture_stream_destroyed(int was_capturing) {
  if (was_capturing) vs_backend_capture_end();
}

/* A capture ends when the stream capturing before the call no longer is
 * after it, whatever cuStreamEndCapture answers: an invalidated capture
 * ends with an error too, while one ended from the wrong thread
 * (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) goes on. */
#define CAPTURE_END_BODY(name, per_thread)                                                              \
  VS_HOOK_ENTER(name, (hStream, phGraph));                                                            \
  if (per_thread) vs_stream_order_ptds("the program used the per-thread default stream (" #name ")"); \
  int was = vs_capture_on(real, hStream, per_thread);                                                 \
  vs_guard_enter();                                                                                   \
  CUresult r = real->name(hStream, phGraph);                                                          \
  vs_guard_leave();                                                                                   \
  if (was && !vs_capture_on(real, hStream, per_thread)) vs_backend_capture_end();                     \
  if (r == CUDA_SUCCESS && phGraph && *phGraph) vs_graph_mem_captured(real, *phGraph);                \
  return r

CUresult vs_hook_cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) { CAPTURE_END_BODY(cuStreamEndCapture, 0); }
CUresult vs_hook_cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) {
  CAPTURE_END_BODY(cuStreamEndCapture_ptsz, 1);
}
#undef CAPTURE_END_BODY

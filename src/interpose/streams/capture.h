/* Graph capture and the arenas.
 *
 * While a stream captures a CUDA graph, a cuCtxSynchronize (the arena's
 * way to make freed blocks reusable) or a cuMemFree / cuMemUnmap /
 * cuMemRelease (its way to give memory back) would fail and invalidate
 * the program's capture, as a synchronous call of the program's own does.
 * So the arenas hold while any capture is in progress in the process
 * (arena_backend.h: no sync, no lane ordering, no release; a request whose
 * freed blocks still wait for a sync grows instead), and before the first
 * capture begins every arena syncs once if freed blocks wait for it, so
 * that they are reusable during the capture (a PyTorch program empties its
 * cache and then captures: without it, the capture's cudaMalloc calls
 * would grow the arena instead). A capture ends at cuStreamEndCapture,
 * whatever its result, or when its stream is destroyed (stream_syncs.c).
 * The hooks: cuStreamBeginCapture, _v2, ToGraph (each with its _ptsz),
 * cuStreamEndCapture (and _ptsz).
 * Thread safety: any thread. */
#ifndef VS_CAPTURE_H
#define VS_CAPTURE_H

#include "driver_table.h"

/* A cuStreamBeginCapture* was called (a capture may be under way). */
int vs_capture_seen(void);
/* 1 when h (per_thread: by the per-thread default stream's rules) is
 * capturing a graph (active or invalidated) while a capture is counted in
 * progress: a cuStreamEndCapture after which it no longer is, or the
 * destruction of the stream, ends the capture. */
int vs_capture_on(const vs_real_table *real, CUstream h, int per_thread);
/* A stream was destroyed; was_capturing: vs_capture_on said 1 of it just
 * before. Its capture (if any) ends. */
void vs_capture_stream_destroyed(int was_capturing);

#endif

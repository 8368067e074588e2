/* The arena's backend over the real driver (vs_arena_backend, arena.h).
 *
 * Every call goes to the real driver table under the recursion guard, on
 * the calling thread with its current context: there is one arena per
 * context (arena_glue.c, contexts.h), which grows only on threads whose
 * current context it is, so its chunks are that context's memory; its
 * sync is that context's cuCtxSynchronize (pushed if a thread in another
 * context frees one of its blocks). When the context ends, the driver has
 * freed its chunks (cuMemAlloc) but not its VMM handles and ranges, which
 * no context owns: vs_backend_ended makes chunk_free move the books only,
 * and the arena's destroy then really releases the handles and ranges.
 *
 * Each call is counted on its card (vs_acct_call); physical bytes (chunks,
 * VMM handles, not address ranges) move "reserved"; before device memory is
 * taken the tenant quota is charged (vs_quota_charge), and a refusal is
 * VS_BACKEND_OOM so the arena trims its cache and retries before failing. */
#ifndef VS_ARENA_BACKEND_H
#define VS_ARENA_BACKEND_H

#include "arena.h"
#include "cuda_api.h"

#include <stdint.h>

/* Fills *be for the arena of context ctx (a CUcontext) on card; its sync
 * synchronises that context. be->ctx is the backend's own state (free it with
 * vs_backend_free once no arena uses it; NULL when out of host memory,
 * with CUDA_ERROR_OUT_OF_MEMORY). vmm: with the VMM members (granule from
 * the driver); CUDA_SUCCESS, or the driver's error when the granularity
 * cannot be had (be is then filled for chunks only). */
CUresult vs_backend_init(int card, uint64_t ctx, int vmm, vs_arena_backend *be);
/* A chunks backend over the state vs_backend_init made (be->ctx of it):
 * the fall-back when the VMM arena cannot start, or from a VMM arena that
 * may still be in use (what vs_backend_init fills for vmm = 0). */
void vs_backend_chunks(void *backend, vs_arena_backend *be);
/* The arena's context ended (see above). */
void vs_backend_ended(void *backend);
void vs_backend_free(void *backend);

/* The driver error behind this thread's last VS_BACKEND_ERROR or
 * VS_BACKEND_OOM (CUDA_ERROR_OUT_OF_MEMORY for a quota refusal);
 * vs_backend_clear_error() resets it to CUDA_SUCCESS. */
CUresult vs_backend_last_error(void);
void vs_backend_clear_error(void);

/* 1 when addr lies in a chunk or VMM range some arena holds from the driver. */
int vs_backend_holds(uint64_t addr);

/* 1 once the driver refused an address reservation for this arena (a
 * VMM arena that cannot reserve its range cannot serve anything). */
int vs_backend_va_failed(void *backend);

/* 1 when card's VMM arena creates its physical memory exportable as a
 * POSIX file descriptor (the card supports it), so its blocks can be
 * exported over IPC (ipc_vmm.h). */
int vs_backend_shareable(int card);

void vs_backend_atfork_child(void);

/* Peer access (cuCtxEnablePeerAccess from a context of `card` to this
 * backend's): on, every mapping the arena a has made, and every one it
 * makes from now on, is opened to card too (read-write), as cuMemAlloc
 * memory is; off, new mappings no longer are (those made stay open).
 * Chunks memory is the driver's cuMemAlloc memory: nothing to do. 0, or -1
 * when the driver refused a mapping's access. */
int vs_backend_peer(void *backend, vs_arena *a, int card, int on);

/* Graph capture (streams/capture.c tells): a capture began, or ended
 * (whatever its result); while any is in progress the arenas hold
 * (vs_arena_backend.hold: no sync, no lane ordering, no release). */
void vs_backend_capture_begin(void);
void vs_backend_capture_end(void);
int vs_backend_capturing(void);

#endif

/* The arena's backend over the real driver (vs_arena_backend, arena.h).
 *
 * Every call goes to the real driver table under the recursion guard, on
 * the calling thread with its current context: the arena of card N is only
 * used by threads whose current context is on card N. One arena per card
 * therefore assumes one context per card (the primary context, as the CUDA
 * runtime and the frameworks use); memory allocated in another context of
 * the same card is still device memory of that card, but dies with that
 * context.
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

/* Fills *be for card. vmm: with the VMM members (granule from the driver);
 * CUDA_SUCCESS, or the driver's error when the granularity cannot be had
 * (be is then filled for chunks only). */
CUresult vs_backend_init(int card, int vmm, vs_arena_backend *be);
/* A chunks backend over a card already set up by vs_backend_init: the
 * fall-back when the VMM arena cannot start, or from a VMM arena that may
 * still be in use (what vs_backend_init fills for vmm = 0). */
void vs_backend_chunks(int card, vs_arena_backend *be);

/* The driver error behind this thread's last VS_BACKEND_ERROR or
 * VS_BACKEND_OOM (CUDA_ERROR_OUT_OF_MEMORY for a quota refusal);
 * vs_backend_clear_error() resets it to CUDA_SUCCESS. */
CUresult vs_backend_last_error(void);
void vs_backend_clear_error(void);

/* 1 when addr lies in a chunk or VMM range some arena holds from the driver. */
int vs_backend_holds(uint64_t addr);

/* 1 once the driver refused an address reservation for card's arena (a
 * VMM arena that cannot reserve its range cannot serve anything). */
int vs_backend_va_failed(int card);

/* 1 when card's VMM arena creates its physical memory exportable as a
 * POSIX file descriptor (the card supports it), so its blocks can be
 * exported over IPC (ipc_vmm.h). */
int vs_backend_shareable(int card);

void vs_backend_atfork_child(void);

#endif

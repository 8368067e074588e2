/* Explaining memory from inside the shim: per-card stats and timeline
 * (src/explain/stats.h), trace recording ($VRAMSHIM_TRACE), dumps on
 * request (through the ledger, answered by a background thread) and on a
 * refused allocation. The memory service reports every event here. */
#ifndef VS_OBSERVE_H
#define VS_OBSERVE_H

#include <stdint.h>

/* Called once from the shim's start-up (after the settings are loaded). */
void vs_observe_init(void);
/* The process is ending while its threads still run (vs_shim_exit, the
 * Windows ExitProcess hook): the traces are written now. */
void vs_observe_exit(void);

/* Device memory the program got (ptr, size) or gave back. */
void vs_observe_alloc(int card, uint64_t ptr, uint64_t size);
void vs_observe_free(int card, uint64_t ptr, uint64_t size);
/* An allocation of size bytes refused for want of memory (the driver's or
 * the arena's OOM, the quota): counted, traced, and dumped (rate-limited). */
void vs_observe_refused(int card, uint64_t size);
/* An allocation that failed for another reason (CUDA_ERROR_NOT_INITIALIZED
 * before cuInit, a bad argument, a lost context): only the trace's
 * "allocate failure" line; no refusal counted, logged or dumped. */
void vs_observe_failed(int card, uint64_t size);
/* A refused request served from host memory (on_limit = spill; sign +1),
 * or such a block freed (-1): the card's spilled figures and timeline. */
void vs_observe_spill(int card, uint64_t ptr, uint64_t size, int sign);

/* The tenant's usage on card crossed warn_at (now `used` bytes): a dump
 * is written by the background thread (rate-limited like refusals). */
void vs_observe_warn(int card, uint64_t used);

void vs_observe_atfork_child(void);
#endif

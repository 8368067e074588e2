/* Per-card counters behind vramshim_stats(), usable before any
 * constructor. The bytes are relaxed atomics (the peaks by compare-and-
 * swap); the counts (requests, failures, live blocks, driver calls) are
 * per-thread tallies (common/tally.h), summed when read. No lock on the
 * counting side. Cards outside 0..VRAMSHIM_MAX_CARDS-1 are counted nowhere
 * and said once. */
#ifndef VS_ACCOUNTING_H
#define VS_ACCOUNTING_H

#include "vramshim.h"

#include <stdint.h>

/* Device memory the program holds (live) and the shim holds from the driver
 * (reserved). A passed-through allocation moves both; an arena block only
 * live, the arena's backend moves reserved for its chunks and handles, so
 * reserved >= live. */
void vs_acct_live_add(int card, uint64_t bytes);
void vs_acct_live_sub(int card, uint64_t bytes);
void vs_acct_reserved_add(int card, uint64_t bytes);
void vs_acct_reserved_sub(int card, uint64_t bytes);
void vs_acct_va_add(int card, int64_t bytes);     /* signed: reserve / free */
void vs_acct_ipc_add(int card, int64_t bytes);    /* signed: open / close */
/* The card's live bytes now (one relaxed load; 0 outside the cards). */
uint64_t vs_acct_live_bytes(int card);

/* Stream-ordered blocks the arena serves in place of the device's default
 * memory pool (stream_alloc.h): their live bytes, and the high of those
 * since the start or the program's last reset of the pool's used high and,
 * apart, of its reserved high (pool_view.c adds them to what the driver's
 * pool reports). Either high may be NULL. */
void vs_acct_pool_add(int card, int64_t bytes);   /* signed: served / freed */
void vs_acct_pool_bytes(int card, uint64_t *live, uint64_t *used_high, uint64_t *reserved_high);
void vs_acct_pool_reset_high(int card, int reserved);   /* reserved: RESERVED_MEM_HIGH, else USED_MEM_HIGH */

void vs_acct_request(int card, int is_alloc);     /* alloc_requests / free_requests */
void vs_acct_failed(int card);
void vs_acct_call(int card, vramshim_driver_call call);
/* The driver calls made so far on card that can change what the process
 * holds there (allocations, frees, VMM physical memory and mappings, IPC
 * opens and closes): a stamp that moves with each one that returned. */
uint64_t vs_acct_memory_calls(int card);

void vs_acct_reset(void);   /* fork child: every counter back to zero */

#endif

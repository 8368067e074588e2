/* Tenant quotas inside the shim: the bridge from the memory service to the
 * ledger of each card (src/tenant/ledger.h).
 *
 * Bytes are charged when device memory is taken from the driver (a
 * pass-through allocation, or an arena growth) and credited when it goes
 * back, so a tenant's usage is what its processes hold, arena cache
 * included. With no enforcement (no config, or passthrough after a config
 * error) charges always succeed and the view is the driver's. */
#ifndef VS_QUOTA_H
#define VS_QUOTA_H

#include "cuda_api.h"

#include <stdint.h>

/* What the layers above offer the ledger's bridge (a lower layer never
 * calls up: each registers here once it exists; src/LAYERS):
 *  - the arenas of a card (arenas/arena_glue.c, before the first arena is
 *    published): the largest single allocation they could serve with a
 *    given room from the books (one_piece: the view's free memory; without
 *    arenas the room itself), their cache given back when another
 *    process is about to be refused, and how much that would be (published
 *    in the ledger for the other processes' views). Without arenas nothing
 *    is cached;
 *  - observation (observe/observe.c, at the shim's start): warn_at
 *    crossed, and the blocks spill.c serves and frees. */
typedef struct vs_quota_cache {
  uint64_t (*one_piece)(int card, uint64_t room);
  void (*trim)(int card, uint64_t keep_bytes);
  uint64_t (*reclaimable)(int card);   /* what trim(card, 0) would give back now */
} vs_quota_cache;
void vs_quota_set_cache(const vs_quota_cache *cache);
/* A driver pool grows by whole pieces of this size: what a pool's growth is
 * admitted for (pools/pool_charge.c), and so what the view's free memory
 * comes in where the books bind (a free of no whole number of them could
 * not be taken by one pool allocation). */
#define VS_POOL_GROWTH_UNIT ((uint64_t)2 << 20)
typedef struct vs_quota_observer {
  void (*warn)(int card, uint64_t used);
  void (*spill)(int card, uint64_t ptr, uint64_t size, int sign);
} vs_quota_observer;
void vs_quota_set_observer(const vs_quota_observer *observer);
/* spill.c: a spilled block served (sign +1) or freed (-1), for observation. */
void vs_quota_observe_spill(int card, uint64_t ptr, uint64_t size, int sign);

/* CUDA_SUCCESS: admitted, n bytes charged to this process on card.
 * CUDA_ERROR_OUT_OF_MEMORY: refused by the tenant's limit or by others'
 * reservations. Never blocks: it is called from inside the arena (under
 * its locks), whose OOM ladder trims the cache and retries on a refusal. */
CUresult vs_quota_charge(int card, uint64_t n);
/* Whether a request of n bytes could ever be served on card:
 * CUDA_ERROR_OUT_OF_MEMORY when it is larger than the card, or than what
 * the tenant could ever hold there (then recorded as a refusal, as a
 * charge would be); CUDA_SUCCESS otherwise. Takes no memory. The arena
 * asks before it grows, so such a request fails at once. */
CUresult vs_quota_could_fit(int card, uint64_t n);
/* What this process could still be granted on card by the books (the
 * tenant's limit, the card less what the tenants hold and others'
 * reservations), without a driver call; UINT64_MAX when the card is not
 * enforced (no ledger: the card's own free memory would take a driver
 * call, and processes without the shim are not in any book). */
uint64_t vs_quota_room(int card);
/* After a refusal of n bytes, and outside every lock of the shim: with
 * on_limit = wait:DURATION, blocks (no busy wait) until enough memory was
 * given back that n may be admitted (returns 1: try again) or until the
 * duration since the first refusal of this request runs out (0); *deadline_ns
 * is 0 on the first call and carries the request's deadline between calls.
 * With on_limit = fail, returns 0 at once. Logs the final refusal. */
int vs_quota_wait(int card, uint64_t n, uint64_t *deadline_ns);
/* The part of vs_quota_wait that comes before any refusal stands (under
 * `fail` and `spill`): once per request (*deadline_ns as there), the other
 * processes whose caches stand in its way are asked to give them back,
 * with a bounded wait for their answers; 1 when any was asked (try
 * again), else 0. A spilling tenant asks before it spills. */
int vs_quota_trim_round(int card, uint64_t *deadline_ns);
/* The driver itself refused a request the books admitted: every other
 * process on the card holding memory is asked for its cache (a bounded
 * wait for their answers), whatever on_limit says. How many were asked. */
int vs_quota_ask_card(int card);
/* Charges n bytes without asking (memory the driver already handed out,
 * e.g. a pitch allocation larger than its estimate). */
void vs_quota_force(int card, uint64_t n);
void vs_quota_uncharge(int card, uint64_t n);
/* Gives this process's ledger slots back (once): at exit, while the other
 * threads still run (POSIX: the destructor; Windows: vs_shim_exit). */
void vs_quota_exit(void);

/* The tenant's view of a card (cuMemGetInfo / cuDeviceTotalMem):
 * VS_MEM_DONE with the figures, or VS_MEM_PASS to ask the driver.
 * free_bytes may be NULL. */
int vs_quota_view(int card, uint64_t *free_bytes, uint64_t *total_bytes);
/* The same view of any card, with the driver's own figures for it given
 * (NVML's free and total: nvml_hooks.c), not asked of the current context. */
int vs_quota_view_driver(int card, uint64_t drv_free, uint64_t drv_total, uint64_t *free_bytes,
                         uint64_t *total_bytes);

/* issue 24, the true footprint (nvml_cards.c): what this process holds on
 * card (its overhead included) and that overhead; 0, or -1 when the card's
 * ledger is not open. vs_quota_set_overhead charges the new overhead (or
 * gives back the difference). */
int vs_quota_held(int card, uint64_t *held, uint64_t *overhead);
/* The bytes this process has charged on card since it began (admitted or
 * forced; never lowered by a give-back): a measurement's two readings of
 * it bound what was charged in between. */
uint64_t vs_quota_charged_bytes(int card);
/* Opens the card's ledger now if the card is enforced (it is otherwise
 * opened by the first charge or view): 0 when open, -1 when not enforced. */
int vs_quota_open(int card);
void vs_quota_set_overhead(int card, uint64_t overhead);
/* The card's driver reading for the footprint without NVML (ledger.h:
 * vs_ledger_drv_predict, vs_ledger_drv_note, vs_ledger_drv_counted), on a
 * card whose ledger is open (vs_quota_open); predict is -1 when it is not
 * open or has no reading (*held and *ctx_cost are set whenever it is open). */
int vs_quota_drv_predict(int card, uint64_t *drv_free, uint64_t *held, uint64_t *ctx_cost);
void vs_quota_drv_note(int card, uint64_t drv_free, uint64_t ctx_cost);
void vs_quota_drv_counted(int card, uint64_t n);

/* Copies this process's live bytes on card (accounting.h) into the
 * ledger's per-process "live" column when the card is enforced: one
 * relaxed load and one relaxed store, no lock. */
void vs_quota_refresh_live(int card);
/* 1 once after this thread's charge was admitted (a pass-through allocation
 * or an arena growth): the allocation that caused it refreshes the live
 * bytes when recorded. A thread-local read: free to call on the hot path. */
int vs_quota_live_due(void);

/* Requests of any process waiting (on_limit = wait) for memory on card; 0
 * when the card is not enforced. Lock-free. Memory cached by this process's
 * arena is charged to it: a background thread that sees waiters may trim
 * the cache (vs_arena_trim) so that they can go on. */
unsigned vs_quota_waiters(int card);

/* ---- on_limit = spill:MAX (issue 13), for spill.c ----
 * vs_quota_spill_max: MAX on the card (0: no spilling there: on_limit is
 * not spill, or the card is not enforced). vs_quota_spill: counts n host
 * bytes against MAX across the tenant's processes; 0 admitted, 1 refused,
 * with what the log lines need (spilled, max, device usage and limit).
 * vs_quota_settle: the request that was refused is settled another way
 * (served from host memory): forget the refusal this thread noted. */
uint64_t vs_quota_spill_max(int card);
typedef struct vs_quota_spill_note {
  uint64_t spilled, max, used, limit;
  int episode;      /* this process had spilled nothing on the card before: an episode starts */
} vs_quota_spill_note;
int vs_quota_spill(int card, uint64_t n, vs_quota_spill_note *note);
void vs_quota_unspill(int card, uint64_t n);
void vs_quota_settle(void);
/* Whether this thread's last request was refused by the ledger (not yet
 * settled or reported): tells a quota refusal from the driver's. */
int vs_quota_refusal_pending(void);

/* Checks every open card's ledger file: a process that sits idle also
 * notices a deleted, replaced, truncated or damaged ledger and carries its
 * usage into the new one, and reclaims dead processes when the card's last
 * sweep is due (issue 23). The background thread calls it every
 * VS_LEDGER_CHECK_MS while it returns more than 0 (the cards open). */
int vs_quota_check_ledgers(void);

/* The id of the card's ledger (its UUID; the ordinal where the driver has
 * none) when its ledger is open: 0, else -1. The same card has the same id
 * in every process, whatever ordinal CUDA_VISIBLE_DEVICES gives it. */
int vs_quota_card_id(int card, char out[64]);

void vs_quota_atfork_child(void);
#endif

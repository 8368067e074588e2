/* The tenant concern as the shim uses it: one session per process.
 *
 *   at load      vs_tenant_init()        config ($VRAMSHIM_CONFIG), tenant selection,
 *                                         exit 78 on a config error unless passthrough
 *   first use    vs_tenant_card()        per card: plan for its real capacity, ledger slot
 *   arena grows  vs_tenant_admit()       charge; on refusal trim the arena, retry, wait
 *                                         (on_limit = wait:D), else log + event -> OOM
 *   arena frees  vs_tenant_release()     every byte given back to the driver
 *   info         vs_tenant_view()        cuMemGetInfo / cuDeviceTotalMem numbers
 *
 * Thread-safe. Fork-safe: a child re-opens its cards lazily and is its own
 * process in the ledger. */
#ifndef VS_TENANT_SESSION_H
#define VS_TENANT_SESSION_H
#include <stdint.h>

#include "config.h"
#include "ledger.h"

typedef struct vs_tenant_session vs_tenant_session;

/* Releases up to `want` bytes of cached device memory of `card` back to the
 * driver (calling vs_tenant_release for what it frees); returns bytes freed. */
typedef uint64_t (*vs_trim_fn)(void *arg, int card, uint64_t want);
/* Called (outside any lock) when a charge crossed the tenant's warn_at: the
 * place to write a dump. */
typedef void (*vs_warn_fn)(void *arg, int card, uint64_t used);

/* Loads the config and selects the tenant (argv0 may be NULL). On a config
 * error: exits 78, or with VRAMSHIM_ON_ERROR=passthrough returns a session
 * that enforces nothing. Never returns NULL except out of memory. */
vs_tenant_session *vs_tenant_init(const char *argv0);
/* Same, from a config the caller already loaded and a tenant it selected
 * (copied); enforcing = 0 after a passthrough config error. */
vs_tenant_session *vs_tenant_init_with(const vs_config *cfg, const char *tenant, int enforcing);
void vs_tenant_set_hooks(vs_tenant_session *s, vs_trim_fn trim, vs_warn_fn warn, void *arg);
/* Whether quotas are enforced (0 after a passthrough config error). */
int vs_tenant_enforcing(const vs_tenant_session *s);
const char *vs_tenant_name(const vs_tenant_session *s);
const vs_config *vs_tenant_config(const vs_tenant_session *s);

/* Opens the card's ledger if not yet open (card < VS_CFG_MAX_CARD_INDEX;
 * uuid may be NULL; capacity from cuDeviceTotalMem). A plan or ledger error
 * is a config error (exit 78 or passthrough for this card). Returns the
 * ledger, or NULL when the card is not enforced. */
vs_ledger *vs_tenant_card(vs_tenant_session *s, int card, const char *uuid, uint64_t capacity);

/* 0: n bytes admitted (charged); 1: refused (the caller returns
 * CUDA_ERROR_OUT_OF_MEMORY; the line is logged, the event recorded). Cards
 * not opened or not enforced admit everything. */
int vs_tenant_admit(vs_tenant_session *s, int card, uint64_t n);
void vs_tenant_release(vs_tenant_session *s, int card, uint64_t n);
/* vs_tenant_admit in steps, for a caller that must not trim or wait where
 * it charges (the shim charges from inside its arena, under the arena's
 * locks; the arena's OOM ladder trims, and the wait happens outside):
 *   vs_tenant_try       one charge, quiet on refusal (*why filled; may be NULL);
 *                       0 admitted (warn_at handled as in admit), 1 refused
 *   vs_tenant_wait_ms   the tenant's on_limit: 0 = fail, else wait that long
 *   vs_tenant_wait_fit  vs_ledger_wait_fit on the card: 0 fits now, 1 not in time
 *   vs_tenant_report    the one line and event of a final refusal */
int vs_tenant_try(vs_tenant_session *s, int card, uint64_t n, vs_refusal *why);
uint64_t vs_tenant_wait_ms(const vs_tenant_session *s);
/* Charges without asking (vs_ledger_force). */
void vs_tenant_force(vs_tenant_session *s, int card, uint64_t n);
/* In a fork child, before anything else: the session's own lock may have
 * been held by a thread of the parent. */
void vs_tenant_atfork_child(vs_tenant_session *s);
int vs_tenant_wait_fit(vs_tenant_session *s, int card, uint64_t n, uint64_t deadline_ns, vs_refusal *why);
void vs_tenant_report(vs_tenant_session *s, int card, const vs_refusal *why);
/* Whether the card's ledger is open for this process (a fork child's
 * inherited one counts: it is re-opened on next use). */
int vs_tenant_card_open(const vs_tenant_session *s, int card);
/* Requests waiting for memory on the card, in any process (vs_ledger_waiters). */
uint32_t vs_tenant_waiters(vs_tenant_session *s, int card);
/* The same from the processes' slots (vs_ledger_waiting_slots). */
uint32_t vs_tenant_waiting_slots(vs_tenant_session *s, int card);

/* on_limit = spill:MAX (issue 13), over vs_ledger_spill on the card:
 *   vs_tenant_spill_max  MAX on the card (0: the tenant does not spill, or the card is not enforced)
 *   vs_tenant_spill      0 admitted (counted), 1 refused (over MAX); a broken ledger refuses
 *   vs_tenant_unspill    n spilled bytes given back */
uint64_t vs_tenant_spill_max(vs_tenant_session *s, int card);
int vs_tenant_spill(vs_tenant_session *s, int card, uint64_t n, vs_spill_note *note);
void vs_tenant_unspill(vs_tenant_session *s, int card, uint64_t n);

/* Live bytes of the program on the card, for status. */
void vs_tenant_set_live(vs_tenant_session *s, int card, uint64_t live);
/* issue 24: this process's footprint on the card beyond what the shim
 * counted (vs_ledger_set_overhead); and what it holds there, overhead
 * included, with the overhead (0, or -1 when the card is not open). */
void vs_tenant_set_overhead(vs_tenant_session *s, int card, uint64_t overhead);
int vs_tenant_held(vs_tenant_session *s, int card, uint64_t *held, uint64_t *overhead);
/* The card's driver reading (vs_ledger_drv_predict / vs_ledger_drv_note):
 * -1 when the card is not open or has no reading. */
int vs_tenant_drv_predict(vs_tenant_session *s, int card, uint64_t *drv_free, uint64_t *held, uint64_t *ctx_cost);
void vs_tenant_drv_note(vs_tenant_session *s, int card, uint64_t drv_free, uint64_t ctx_cost);
void vs_tenant_drv_counted(vs_tenant_session *s, int card, uint64_t n);
/* The tenant's view; returns 0 and fills free/total, or -1 when the card is
 * not enforced (the caller reports the driver's own numbers). */
int vs_tenant_view(vs_tenant_session *s, int card, uint64_t cached, uint64_t *free_bytes, uint64_t *total_bytes);
/* The same, and *others_cache the caches the card's other processes
 * published (vs_ledger_others_cache), from the same reading of the ledger. */
int vs_tenant_view_caches(vs_tenant_session *s, int card, uint64_t cached, uint64_t *free_bytes,
                          uint64_t *total_bytes, uint64_t *others_cache);
/* Closes every card (gives back this process's slots). */
void vs_tenant_fini(vs_tenant_session *s);
/* Checks the card's ledger file (deleted, replaced, truncated, damaged: then
 * re-attaches carrying this process's usage; see vs_ledger_check). */
void vs_tenant_check(vs_tenant_session *s, int card);
/* The trim mailbox of the card's ledger (ledger.h, issue 23), and this
 * process's published cache there. */
int vs_tenant_trim_others(vs_tenant_session *s, int card, vs_trim_scope scope, uint64_t timeout_ms);
void vs_tenant_set_cache(vs_tenant_session *s, int card, uint64_t bytes);
int vs_tenant_trim_asked(vs_tenant_session *s, int card, uint32_t *req);
void vs_tenant_trim_answer(vs_tenant_session *s, int card, uint32_t req);
/* At process exit: every card's slot is given back now (vs_ledger_exit). */
void vs_tenant_exit(vs_tenant_session *s);
#endif

/* The cross-process ledger of one card: who holds how much device memory,
 * and the admission rule of docs/config.md evaluated atomically.
 *
 * One file per card under ledger_dir ("card-<id>.ledger", id = index or
 * GPU UUID), mapped shared by every process using the card. Process slots
 * are the source of truth; tenant totals are their sums and are rebuilt
 * from them when a process dies inside the critical section. Each process
 * holds an open-file-description lock on its slot's byte, which the kernel
 * drops at death: that is how the dead are found (in any PID namespace),
 * without trusting pids. Writers serialise on a robust process-shared
 * mutex; readers copy under a sequence counter and never block writers.
 *
 * A handle belongs to the process that opened it: in a fork child every
 * call fails with -ECHILD (the child opens its own; it is its own process
 * in the ledger), and the library closes the inherited descriptors at fork
 * so a child cannot keep a dead parent's slot alive. */
#ifndef VS_TENANT_LEDGER_H
#define VS_TENANT_LEDGER_H
#include <stddef.h>
#include <stdint.h>

#include "plan.h"

typedef struct vs_ledger vs_ledger;

typedef enum {
  VS_REFUSE_NONE = 0,
  VS_REFUSE_LIMIT,     /* U_a + n > L_a */
  VS_REFUSE_CAPACITY,  /* U_a + n + sum_{t!=a} max(U_t, R_t) + H > C: others' reservations or the card */
  VS_REFUSE_TIMEOUT,   /* wait mode: the time ran out (the condition is in .cause) */
} vs_refusal_kind;

typedef struct vs_refusal {
  vs_refusal_kind kind;
  vs_refusal_kind cause;   /* for TIMEOUT: the condition that still refused */
  uint64_t request;        /* n */
  uint64_t used;           /* U_a */
  uint64_t limit;          /* L_a (VS_NO_LIMIT when none) */
  uint64_t others;         /* sum_{t!=a} max(U_t, R_t) */
  uint64_t headroom;       /* H */
  uint64_t capacity;       /* C */
  int warned;              /* on admission: this charge crossed warn_at (logged, event recorded;
                            * at most once per 10 s per tenant): the caller may write a dump */
} vs_refusal;

/* Opens (creating when needed) the ledger of a card and takes a slot for
 * this process under tenant `tenant` with this plan (which the process
 * keeps). card_id names the file: the card's UUID when known (stable across
 * CUDA_VISIBLE_DEVICES), else its index as a string. NULL with a message in
 * err on failure (permissions, a world-writable dir, a symlink, no slot). */
vs_ledger *vs_ledger_open(const char *dir, const char *card_id, const vs_plan *plan, const char *tenant, char *err,
                          size_t errlen);
/* Gives back the slot and its usage (a dead process's is reclaimed by others). */
void vs_ledger_close(vs_ledger *h);

/* Admission: 0 when n more bytes are admitted (and charged), 1 when refused
 * (*why says by which condition, with the numbers, or on admission whether
 * warn_at was crossed; may be NULL), <0 -errno.
 * Quiet: call vs_ledger_report_refusal() once the caller gives up (e.g.
 * after trimming its cache and trying again). Logs and records the warn_at
 * crossing itself. */
int vs_ledger_charge(vs_ledger *h, uint64_t n, vs_refusal *why);
/* Same, but when refused waits (no busy wait) until others free memory, a
 * dead process is reclaimed, or timeout_ms runs out (why->kind TIMEOUT).
 * A request that could never fit fails at once. */
int vs_ledger_wait_charge(vs_ledger *h, uint64_t n, uint64_t timeout_ms, vs_refusal *why);
/* Waits (no busy wait) until n more bytes would be admitted now, without
 * charging them: 0 then (the caller charges; it may lose a race to another
 * process and wait again), 1 when deadline_ns (CLOCK_MONOTONIC) passes
 * first (why->kind TIMEOUT, .cause the condition) or at once when the
 * request could never fit (why->kind the condition), <0 -errno. For a
 * caller that cannot wait where it charges (the shim's arena charges under
 * its own locks and waits outside them). */
int vs_ledger_wait_fit(vs_ledger *h, uint64_t n, uint64_t deadline_ns, vs_refusal *why);
/* Charges n bytes without the rule: memory the driver already handed out
 * beyond what was admitted (a pitch allocation larger than its estimate). */
void vs_ledger_force(vs_ledger *h, uint64_t n);
/* Gives back n bytes (clamped to what the process holds) and wakes waiters. */
void vs_ledger_uncharge(vs_ledger *h, uint64_t n);
/* The bytes of allocations the program holds (for status; not enforced). */
void vs_ledger_set_live(vs_ledger *h, uint64_t live);
/* One log line naming tenant, request, usage, limit and the condition, and
 * a "limit" event in the ring. Rate-limited to one line per second per
 * process (the count of the rest is given). */
void vs_ledger_report_refusal(vs_ledger *h, const vs_refusal *why);

/* The tenant's view of the card: total = min(L_a, C - H - sum_{t!=a} R_t);
 * free = what it could be admitted now once the other processes' caches
 * went back (vs_ledger_set_cache), plus `cached` (device memory the
 * process holds but does not use, e.g. its arena cache), at most total.
 * Takes no lock. */
void vs_ledger_view(vs_ledger *h, uint64_t cached, uint64_t *free_bytes, uint64_t *total_bytes);
/* The same, and *others_cache what vs_ledger_others_cache answers, from
 * the same reading of the ledger (cuMemGetInfo needs both). */
void vs_ledger_view_caches(vs_ledger *h, uint64_t cached, uint64_t *free_bytes, uint64_t *total_bytes,
                           uint64_t *others_cache);

/* Finds slots of dead processes and gives their usage back (an event per
 * process). Runs by itself on refusals, while waiting, and at most every
 * VS_LEDGER_SWEEP_MS in admissions and vs_ledger_check; returns the number
 * reclaimed. */
int vs_ledger_sweep(vs_ledger *h);

/* Checks the file now (issue 10): when it was truncated, deleted, damaged
 * or replaced, re-attaches to the ledger now at the path, carrying this
 * process's usage, with one log line. 1 when it did, else 0. Every writer
 * call does the same at most every 100 ms (and at once on a fault).
 * Issue 23: also reclaims the dead when the card's last sweep is older
 * than VS_LEDGER_SWEEP_MS (any process's sweep counts), so a background
 * thread calling this every VS_LEDGER_CHECK_MS reclaims a dead process
 * within VS_LEDGER_RECLAIM_MS whatever the survivors do (allocating from
 * their caches only, or idle). */
#define VS_LEDGER_SWEEP_MS 150
#define VS_LEDGER_CHECK_MS 100
#define VS_LEDGER_RECLAIM_MS (VS_LEDGER_SWEEP_MS + VS_LEDGER_CHECK_MS)
int vs_ledger_check(vs_ledger *h);

/* Issue 23: before a `fail` refusal, the caches of other processes that
 * stand in its way get their chance. vs_ledger_trim_others asks them to
 * give their arena cache back (the slot's trim mailbox; their background
 * threads answer within VS_LEDGER_CHECK_MS) and waits for their answers,
 * at most timeout_ms. Who is asked depends on what refused:
 *   VS_TRIM_TENANT  the tenant's limit: every other process of our tenant
 *                   on the card that holds memory;
 *   VS_TRIM_CAPACITY the card's condition: those, and every process
 *                   holding memory of another tenant that holds more than
 *                   its reserve;
 *   VS_TRIM_CARD    the driver itself: every other process holding memory.
 * Without the shim their memory would have gone back to the driver when
 * their programs freed it. Returns how many were asked (0: nobody to ask,
 * no wait). The asked process's side: vs_ledger_trim_asked (1 with the
 * request number when one waits), then vs_ledger_trim_answer once trimmed. */
#define VS_LEDGER_TRIM_WAIT_MS 300
typedef enum { VS_TRIM_TENANT = 0, VS_TRIM_CAPACITY, VS_TRIM_CARD } vs_trim_scope;
int vs_ledger_trim_others(vs_ledger *h, vs_trim_scope scope, uint64_t timeout_ms);
/* What this process's arenas on the card would give back if asked (their
 * cache), published for the others' views and trim asks: kept within what
 * it holds, lowered at once as it gives memory back. Takes the lock only
 * when the figure changed. */
void vs_ledger_set_cache(vs_ledger *h, uint64_t bytes);
/* The caches every other process on the card published (lock-free). */
uint64_t vs_ledger_others_cache(vs_ledger *h);
int vs_ledger_trim_asked(vs_ledger *h, uint32_t *req);
void vs_ledger_trim_answer(vs_ledger *h, uint32_t req);

/* At process exit: gives back the slot and its usage now (status shows the
 * truth at once, not "dead, reclaim pending"); the handle stays valid and
 * every later call on it does nothing (threads may still run during exit). */
void vs_ledger_exit(vs_ledger *h);

/* Whether the handle was inherited across fork (every call then fails or
 * does nothing; open a new one). */
int vs_ledger_inherited(const vs_ledger *h);

/* How many requests wait (on_limit = wait) on the card now, in any process;
 * lock-free. A process holding cached memory may give it back when > 0. */
uint32_t vs_ledger_waiters(const vs_ledger *h);
/* The same counted from the processes' slots (a walk of every slot, for a
 * background thread's tick: bytes written over the card's count cannot
 * make it act on waiters that are not there). */
uint32_t vs_ledger_waiting_slots(const vs_ledger *h);

/* ---- on_limit = spill:MAX (issue 13) --------------------------------------
 * Host memory served in place of refused device memory is accounted apart
 * from device usage: it never enters the admission rule. The tenant's
 * spilled bytes (all its processes) are capped by MAX from this process's
 * plan, atomically under the ledger lock; a dead process's are reclaimed
 * with its slot. */
typedef struct vs_spill_note {
  uint64_t spilled;        /* the tenant's spilled bytes after (admitted) or now (refused) */
  uint64_t max;            /* MAX (0: the tenant does not spill here) */
  uint64_t used, limit;    /* the tenant's device usage and limit (for the log line) */
  int episode;             /* admitted, and this process held no spilled bytes before:
                            * an episode starts (a `spill` event was recorded) */
} vs_spill_note;
/* 0: n spilled bytes admitted and counted; 1: refused (no MAX, or MAX would
 * be exceeded); <0 -errno. note may be NULL. */
int vs_ledger_spill(vs_ledger *h, uint64_t n, vs_spill_note *note);
/* Gives back n spilled bytes (clamped to what the process has spilled). */
void vs_ledger_unspill(vs_ledger *h, uint64_t n);
/* MAX of this process's plan for its tenant (0: no spilling). */
uint64_t vs_ledger_spill_max(const vs_ledger *h);
/* What this process has spilled on the card. */
uint64_t vs_ledger_spilled(const vs_ledger *h);

/* What this process holds on the card (its overhead included). */
uint64_t vs_ledger_held(const vs_ledger *h);
/* issue 24: sets this process's overhead on the card, the footprint the
 * driver reports beyond what the shim counted (docs/nvml.md): part of what
 * it holds, charged to the tenant without the rule (the driver already
 * took it) or given back when it shrinks; shown apart by status. */
void vs_ledger_set_overhead(vs_ledger *h, uint64_t overhead);
uint64_t vs_ledger_overhead(const vs_ledger *h);
/* issue 24, the footprint without NVML (docs/nvml.md). vs_ledger_drv_predict:
 * the driver's free memory on the card now as the last reading predicts
 * it (the reading, less what every slot took since, plus what they gave
 * back): 0, or -1 when no process has noted a reading; *held: what every
 * slot holds now (either way); *ctx_cost: the last context cost noted (0:
 * none). vs_ledger_drv_note: drv_free, just read by this process, becomes
 * the reading; ctx_cost, when not 0, the last context cost. */
int vs_ledger_drv_predict(vs_ledger *h, uint64_t *drv_free, uint64_t *held, uint64_t *ctx_cost);
void vs_ledger_drv_note(vs_ledger *h, uint64_t drv_free, uint64_t ctx_cost);
/* n bytes the driver already held at the last reading (a context charged
 * late) are now in the ledger: the reading's held moves with them, so the
 * next prediction does not take them for memory given back. */
void vs_ledger_drv_counted(vs_ledger *h, uint64_t n);

/* Test hook: stop (SIGSTOP) or sleep inside the critical section of every
 * admitted charge, between the slot and the tenant total updates, to test
 * death while holding the lock. Also set at open by
 * $VRAMSHIM_TEST_LEDGER_STALL=stop|sleep. */
typedef enum { VS_LEDGER_HOOK_NONE, VS_LEDGER_HOOK_STOP, VS_LEDGER_HOOK_SLEEP } vs_ledger_hook;
void vs_ledger_set_test_hook(vs_ledger *h, vs_ledger_hook hook);
/* This process's start time (/proc/self/stat field 22, clock ticks since
 * boot): with the pid, what tells a live slot from a reused pid. */
uint64_t vs_ledger_self_start_time(void);
#endif

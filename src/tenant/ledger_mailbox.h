/* Dump requests through the ledger: a mailbox in each process slot.
 *
 * The tool (`vramshim dump --pid P`) maps the ledger files of ledger_dir,
 * finds P's slots, bumps each slot's request number and wakes it (a
 * process-shared futex on the file's memory). The shim's background thread
 * of P sleeps on that word; woken, it writes a dump and answers: publishes
 * the file's path, then the request number answered. A tool whose request
 * number is answered got a dump taken after it asked.
 *
 * No lock: the mailbox words are atomics, the path is published under its
 * own sequence counter (odd while written). The slot layout is in
 * ledger_shm.h (dump_req, dump_done, dump_pub, dump_path). */
#ifndef VS_TENANT_LEDGER_MAILBOX_H
#define VS_TENANT_LEDGER_MAILBOX_H
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct vs_ledger_shm;

/* One ledger file mapped read-write for its mailboxes. */
typedef struct vs_mailbox_map {
  struct vs_ledger_shm *shm;
  int fd;                        /* kept for slot liveness checks; close-on-exec */
  int card_index;
  char card_id[VS_NAME_MAX];
} vs_mailbox_map;

/* Maps dir/card-<id>.ledger (no symlinks, not world-writable, this
 * layout). 0, or -1 with err. */
int vs_mailbox_map_open(const char *dir, const char *card_id, vs_mailbox_map *m, char *err, size_t errlen);
void vs_mailbox_map_close(vs_mailbox_map *m);

/* The slot of an active process with this pid (and start_time, unless 0)
 * whose owner is alive, or -1. from: first slot to look at. */
int vs_mailbox_find(const vs_mailbox_map *m, int32_t pid, uint64_t start_time, int from);
/* Fields of a slot, read without the lock. */
int32_t vs_mailbox_slot_pid(const vs_mailbox_map *m, int slot);
const char *vs_mailbox_slot_tenant(const vs_mailbox_map *m, int slot);
/* The tenant of a slot: its reserve, limit (VS_NO_LIMIT when none) and usage. */
void vs_mailbox_tenant_use(const vs_mailbox_map *m, int slot, uint64_t *reserve, uint64_t *limit, uint64_t *used);
/* The slot's tenant's spilled host bytes (all its processes) and MAX (0: it
 * does not spill), for dumps (on_limit = spill, issue 13). */
void vs_mailbox_tenant_spill(const vs_mailbox_map *m, int slot, uint64_t *spilled, uint64_t *spill_max);
/* issue 24: the overhead of the tenant of slot, summed over its live slots (lock-free, for dumps). */
void vs_mailbox_tenant_overhead(const vs_mailbox_map *m, int slot, uint64_t *overhead);

/* ---- The tool's side ------------------------------------------------------ */
/* Posts a request and wakes the owner; returns the request number to await. */
uint32_t vs_mailbox_post(vs_mailbox_map *m, int slot);
/* Waits until the request number seq is answered (0, path in path), the
 * slot no longer belongs to pid (-1: the process ended), or deadline_ns
 * (CLOCK_MONOTONIC) passes (1). */
int vs_mailbox_await(vs_mailbox_map *m, int slot, int32_t pid, uint32_t seq, uint64_t deadline_ns, char *path,
                     size_t pathlen);

/* ---- The process's side ----------------------------------------------------- */
/* 1 while the slot is still this process's (pid and start_time, active):
 * a slot given back and taken by another process must not be answered. */
int vs_mailbox_owned(const vs_mailbox_map *m, int slot, int32_t pid, uint64_t start_time);
/* The word the owner sleeps on (its request number). */
uint32_t *vs_mailbox_req_word(vs_mailbox_map *m, int slot);
/* 1 when a request is waiting (its number in *req), else 0. */
int vs_mailbox_pending(vs_mailbox_map *m, int slot, uint32_t *req);
/* Publishes path as the answer to every request up to req, and wakes the tools. */
void vs_mailbox_answer(vs_mailbox_map *m, int slot, uint32_t req, const char *path);

/* Wakes the background thread of a slot's owner (it sleeps on dump_req,
 * keyed as vs_mailbox_req_wait) without posting a dump request: the trim
 * mailbox's nudge (issue 23). */
void vs_mailbox_nudge(struct vs_ledger_shm *shm, int slot);

/* Process-shared futex on a 32-bit word (works on private memory too). */
void vs_mailbox_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns);
void vs_mailbox_futex_wake(uint32_t *word);
/* Waits for the slot's request word to leave expected, keyed by the
 * ledger (the one that works across processes on Windows too, wake.h);
 * vs_mailbox_post wakes it. */
void vs_mailbox_req_wait(vs_mailbox_map *m, int slot, uint32_t expected, uint64_t timeout_ns);

#endif

/* The ledger's lock (issue 23): a 32-bit word in the ledger file that no
 * process can hold against the others for longer than a bounded time,
 * whatever it does or whatever is written over the word.
 *
 * The word is 0 when free, else owner << 23 | nonce: owner is the holder's
 * slot + 1 (1..256), or VS_LOCK_NO_SLOT while a process attaches (it has no
 * slot yet); the nonce (23 bits, per process, advancing) makes every
 * acquisition a new value. Taking it is one compare-and-swap; a waiter
 * sleeps on the word (futex, wake.h) in slices and takes the lock over:
 *   - at once when the word names no process (an owner field no holder
 *     can write: the word is damaged; VS_LOCK_TAKEN_BAD), or a slot whose
 *     byte lock is not held (the holder died; VS_LOCK_TAKEN_DEAD);
 *   - when the same word stayed for VS_LOCK_LEASE_NS of its own waiting:
 *     the holder is stopped (SIGSTOP, a cgroup freezer, a debugger),
 *     frozen, died while attaching (VS_LOCK_NO_SLOT: no slot to test), or
 *     the word lies with a live slot (VS_LOCK_TAKEN_STUCK).
 * Every takeover is repaired by the taker from what the ledger records:
 * the slots are the source of truth (each write section changes one slot's
 * fields with single stores), the totals are rebuilt from them. A holder
 * that resumes after losing the lock finishes its section (its stores may
 * disagree with the slots for that moment) and learns of the loss when its
 * release finds another word (VS_LOCK_LOST): it then takes the lock again
 * and rebuilds the totals, so the books are right again microseconds after
 * it resumes. So no process waits for another more than
 * VS_LOCK_LEASE_NS plus one slice. */
#ifndef VS_TENANT_LEDGER_LOCK_H
#define VS_TENANT_LEDGER_LOCK_H
#include "ledger_shm.h"

#include <stdint.h>

#define VS_LOCK_NONCE_BITS 23
#define VS_LOCK_NO_SLOT 511u                 /* owner field of a process that has no slot yet */
#define VS_LOCK_LEASE_NS 500000000ull        /* a word unchanged this long is taken over */

/* In the ledger file. waiters: processes asleep on the word (a stale count
 * costs only wake calls); a release wakes them when above 0. */
/* vs_ledger_lockw, the word itself: ledger_shm.h */

enum {
  VS_LOCK_TAKEN = 0,         /* free, or released by its holder */
  VS_LOCK_TAKEN_DEAD = 1,    /* its holder's slot is dead: repair */
  VS_LOCK_TAKEN_STUCK = 2,   /* its holder kept it past the lease: repair */
  VS_LOCK_TAKEN_BAD = 3,     /* the word named no process: repair, the file is damaged */
};

/* Takes the lock l for the holder of slot (-1: none yet); fd: any
 * descriptor of the ledger file (slot liveness); key: wake.h's key of the
 * ledger. Returns one of the above; *mine is the word written, for the
 * release; *owner the word taken over (for the log line). */
int vs_ledger_lock_take(vs_ledger_lockw *l, int fd, int slot, const char *key, uint32_t *mine, uint32_t *owner);
/* 0 released; VS_LOCK_LOST when the word was no longer ours (another
 * process took it over while we were stopped): nothing is changed then. */
#define VS_LOCK_LOST 1
int vs_ledger_lock_give(vs_ledger_lockw *l, uint32_t mine, const char *key);
/* The holder slot a word names, -1 when none (free, no slot, or damaged). */
int vs_ledger_lock_owner_slot(uint32_t w);
/* Whether a word could have been written by a holder (free, a slot, or a process without one). */
int vs_ledger_lock_word_valid(uint32_t w);
#endif

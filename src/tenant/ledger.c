/* The ledger: opening, admission, release, death of processes. */
#include "ledger.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "dir.h"
#include "file.h"
#include "filelock.h"
#include "kept.h"
#include "ledger_shm.h"
#include "log.h"
#include "map_guard.h"
#include "proc.h"
#include "procenv.h"
#include "shm.h"
#include "wake.h"
#include "ledger_lock.h"
#include "ledger_mailbox.h"
#include "xlock.h"

#define SWEEP_EVERY_NS (VS_LEDGER_SWEEP_MS * 1000000ull) /* reclaim the dead at least this often (ledger.h) */
#define WARN_EVERY_NS 10000000000ull  /* one warn_at line per tenant per 10 s */
#define REFUSAL_LOG_EVERY_NS 1000000000ull
#define WAIT_SLICE_MS 100             /* a waiter re-checks for the dead this often */
#define FILE_CHECK_NS 100000000ull    /* the file is checked for deletion/replacement this often */

/* The books' part of the view (vs_ledger_view_caches), kept with what it
 * was read from: the mapping (epoch), the ledger's seq (every change of a
 * field the view reads is a write section: ledger_shm.h), and the
 * process's own map of reservations (known, reuses_seen). A program that
 * asks cuMemGetInfo in a loop reads it back instead of summing every
 * tenant again. ver is a seqlock of its own: odd while one thread writes
 * it; readers that see it odd or moved compute afresh. */
typedef struct view_kept {
  _Atomic uint32_t ver;               /* vs_kept_begin and its kin (kept.h) */
  uint64_t seq_epoch, known_reuses;   /* the key: seq << 32 | epoch, known << 32 | reuses_seen */
  uint64_t avail, their_caches;       /* the answer, before the caller's own cache */
} view_kept;

struct vs_ledger {
  int fd;                       /* -1 in a fork child */
  vs_ledger_shm *shm;           /* changes on re-attach (atomic loads where read without mu) */
  /* Issue 10: the file may be truncated, deleted, damaged or replaced while
   * mapped. Every writer of this handle holds mu (process-local) and first
   * checks the file (check_file); on trouble the handle re-attaches to the
   * ledger now at dir/name, carrying this process's usage (mine_held). */
  pthread_mutex_t mu;
  char dir[VS_PATH_MAX];
  char name[VS_NAME_MAX + 16];
  char card_id[VS_NAME_MAX];
  uint64_t mine_held, mine_peak; /* this process's charge, kept outside the file */
  uint64_t mine_spilled;         /* and its spilled host bytes (issue 13), carried the same way */
  uint64_t mine_mask;            /* its slot's reserve_mask (issue 23: checked like the counters) */
  uint64_t mine_overhead;        /* the part of mine_held that is overhead (issue 24), carried too */
  uint64_t next_check_ns;        /* CLOCK_MONOTONIC_COARSE */
  int reattach_failed;           /* logged once until a re-attach succeeds */
  int exited;                    /* vs_ledger_exit ran: every call is a no-op (under mu) */
  int pid;                      /* the owner process */
  int slot;
  uint32_t tenant;              /* index in shm->tenants */
  vs_plan plan;                 /* kept for the life of the process */
  uint64_t limit, warn_at;      /* L_a, and the warn_at threshold in bytes (0 = none) */
  uint64_t spill_max;           /* on_limit = spill:MAX of our plan; 0 = no spilling (issue 13) */
  uint64_t total;               /* what the tenant could ever hold here (vs_plan_total) */
  int64_t reserve_of[VS_LEDGER_TENANTS]; /* R_t from our plan; -1: not in it, use the ledger's */
  uint32_t known;               /* reserve_of[] is filled for tenants below this */
  uint32_t reuses_seen;         /* shm->tenant_reuses when reserve_of[] was filled */
  /* Bumped after every change of shm, tenant or slot (attach, a failed
   * re-attach's restore): the view's kept answer names the mapping by it. */
  uint32_t epoch;
  view_kept kept;
  vs_ledger_hook hook;
  uint64_t last_refusal_log_ns, refusals_unlogged;
  char tenant_name[VS_NAME_MAX];
  struct vs_ledger *next;       /* every open handle of the process, for fork */
};

/* h->fd as the calls that do not take h->mu read it (-1 in a fork child;
 * a re-attach changes it under mu). */
static int fd_of(const vs_ledger *h) { return __atomic_load_n(&h->fd, __ATOMIC_RELAXED); }

/* ---- Handles of this process, closed in a fork child ------------------- */
static pthread_mutex_t g_handles_lock = PTHREAD_MUTEX_INITIALIZER;
static vs_ledger *g_handles;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void) { pthread_mutex_lock(&g_handles_lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_handles_lock); }
/* The child must not keep the parent's slot locks alive (OFD locks follow
 * the descriptor), so it drops the descriptors; the parent's slots stay. */
static void atfork_child(void) {
  for (vs_ledger *h = g_handles; h; h = h->next) {
    if (h->fd >= 0) close(h->fd);
    h->fd = -1;
  }
  g_handles = NULL;
  pthread_mutex_unlock(&g_handles_lock);
}
static void register_atfork(void) { vs_plat_atfork(atfork_prepare, atfork_parent, atfork_child); }

uint64_t vs_ledger_self_start_time(void) { return vs_plat_self_start_time(); }

/* After a change of h->shm, h->tenant or h->slot, once the handle's fields
 * say one mapping again: the view's kept answer (view_kept) is not read
 * back across it. */
static void view_moved(vs_ledger *h) { __atomic_fetch_add(&h->epoch, 1, __ATOMIC_RELEASE); }

/* ---- Seqlock and lock ------------------------------------------------------ */
static void write_begin(vs_ledger_shm *s) {
  VS_STORE(&s->seq, s->seq + 1);
  VS_FENCE(__ATOMIC_RELEASE);
}
static void write_end(vs_ledger_shm *s) { __atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE); }

/* What the slots say waits (each slot's count bounded: a thread per wait,
 * far below VS_WAITING_MAX; more is bytes written over it, and read as 0). */
#define VS_WAITING_MAX 4096u
static uint32_t slots_waiting(const vs_ledger_shm *s) {
  uint32_t sum = 0;
  for (int i = 0; i < VS_LEDGER_SLOTS; i++) {
    uint32_t w = VS_LOAD(&s->slots[i].waiting);
    if (VS_LOAD(&s->slots[i].state) == VS_SLOT_ACTIVE && w <= VS_WAITING_MAX) sum += w;
  }
  return sum;
}

/* Totals from slots: run when a writer died inside the lock. */
static void rebuild_locked(vs_ledger_shm *s) {
  if (s->seq & 1) s->seq++;
  write_begin(s);
  for (uint32_t t = 0; t < s->ntenants && t < VS_LEDGER_TENANTS; t++) {
    VS_STORE(&s->tenants[t].used, 0);
    VS_STORE(&s->tenants[t].spilled, 0);
    VS_STORE(&s->tenants[t].cached, 0);
    VS_STORE(&s->tenants[t].reserve_holders, 0);
  }
  for (int i = 0; i < VS_LEDGER_SLOTS; i++) {
    vs_ledger_slot *sl = &s->slots[i];
    if (sl->state != VS_SLOT_ACTIVE) continue;
    if (sl->tenant < VS_LEDGER_TENANTS) {
      VS_STORE(&s->tenants[sl->tenant].used, s->tenants[sl->tenant].used + sl->held);
      VS_STORE(&s->tenants[sl->tenant].spilled, s->tenants[sl->tenant].spilled + sl->spilled);
      if (sl->cache > sl->held) VS_STORE(&sl->cache, sl->held);
      VS_STORE(&s->tenants[sl->tenant].cached, s->tenants[sl->tenant].cached + sl->cache);
    }
    for (int t = 0; t < VS_LEDGER_TENANTS; t++)
      if (sl->reserve_mask >> t & 1) VS_STORE(&s->tenants[t].reserve_holders, s->tenants[t].reserve_holders + 1);
  }
  /* The waiter count too (bytes written over it would make every process
   * give its cache back at every tick); a thread between its two counts
   * leaves it one short until that thread is done (wait_loop). */
  __atomic_store_n(&s->waiters, slots_waiting(s), __ATOMIC_SEQ_CST);
  write_end(s);
}

/* Inside a write section: the slot leaves (its owner closed it or died);
 * the reservations its config held end with it unless another live
 * process's config holds them too (reserve_holders). */
static void free_slot_locked(vs_ledger_shm *s, vs_ledger_slot *sl) {
  for (int t = 0; t < VS_LEDGER_TENANTS; t++)
    if (sl->reserve_mask >> t & 1 && s->tenants[t].reserve_holders)
      VS_STORE(&s->tenants[t].reserve_holders, s->tenants[t].reserve_holders - 1);
  memset(sl, 0, sizeof *sl);
}

/* The lock (ledger_lock.h) is never held against us for long: taken over
 * from a holder that died, stopped past the lease, or a word no holder
 * could have written, the totals that holder may have left half-written
 * are rebuilt from the slots. The word this thread wrote is kept for the
 * release (a thread holds one ledger's lock at a time). */
static __thread uint32_t t_lock_mine;

static int lock_shm(vs_ledger_shm *s, int fd, int slot) {
  char key[40];
  vs_plat_xlock_key(&s->lock, key, sizeof key);
  uint32_t owner;
  int r = vs_ledger_lock_take(&s->lk, fd, slot, key, &t_lock_mine, &owner);
  if (r == VS_LOCK_TAKEN) return 0;
  rebuild_locked(s);
  int k = vs_ledger_lock_owner_slot(owner);
  int pid = k >= 0 ? s->slots[k].pid : 0;
  if (r == VS_LOCK_TAKEN_DEAD) {
    VS_INFO("ledger of card %s: process %d died holding the lock; totals rebuilt from process slots", s->card_id, pid);
  } else if (r == VS_LOCK_TAKEN_STUCK) {
    VS_WARN("ledger of card %s: process %d held the lock for more than %llu ms (stopped, frozen, or its lock word "
            "lies): took the lock over; totals rebuilt from process slots",
            s->card_id, pid, (unsigned long long)(VS_LOCK_LEASE_NS / 1000000ull));
  } else {
    /* Damage: every process moves the file aside at its next call (file_trouble). */
    VS_STORE(&s->damaged, 1);
    VS_WARN("ledger of card %s: its lock word 0x%08x names no process (the file is damaged): took the lock over; "
            "the file is moved aside",
            s->card_id, (unsigned)owner);
  }
  return 0;
}

/* A release that finds the word changed: this process was stopped (or
 * starved) inside the lock past the lease and another took it over; what
 * it wrote after resuming may disagree with the slots, so it takes the
 * lock again and rebuilds the totals from them (once: a second loss in a
 * row is left to the next taker's repair). */
static void unlock_shm(vs_ledger_shm *s, int fd, int slot) {
  char key[40];
  vs_plat_xlock_key(&s->lock, key, sizeof key);
  if (vs_ledger_lock_give(&s->lk, t_lock_mine, key) == 0) return;
  static _Atomic int said;
  if (!said++)
    VS_WARN("ledger of card %s: this process held the lock for more than %llu ms (it was stopped or starved) and "
            "another process took it over; totals rebuilt from process slots",
            s->card_id, (unsigned long long)(VS_LOCK_LEASE_NS / 1000000ull));
  lock_shm(s, fd, slot);
  rebuild_locked(s);
  vs_ledger_lock_give(&s->lk, t_lock_mine, key);
}

/* Takes up to n off the count at w, never below 0 (a count taken off for
 * a dead process and a late decrement must not wrap it round); returns
 * what it took. */
static uint32_t count_take(uint32_t *w, uint32_t n) {
  uint32_t v = __atomic_load_n(w, __ATOMIC_SEQ_CST);
  while (n && !__atomic_compare_exchange_n(w, &v, v > n ? v - n : 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return v < n ? v : n;
}

/* A slot leaves (its process died, or exits with threads still waiting):
 * its waiters leave the count with it. */
static void slot_waiters_gone(vs_ledger_shm *s, vs_ledger_slot *sl) {
  count_take(&s->waiters, __atomic_exchange_n(&sl->waiting, 0, __ATOMIC_SEQ_CST));
}

static void wake_waiters(vs_ledger_shm *s) {
  if (__atomic_load_n(&s->waiters, __ATOMIC_SEQ_CST))
  {
    char key[40];
    vs_plat_xlock_key(&s->lock, key, sizeof key);
    vs_plat_wake(&s->gen, key, "gen");
  }
}

/* ---- Events ------------------------------------------------------------------ */
static void add_event_locked(vs_ledger_shm *s, int kind, int32_t pid, uint32_t tenant, uint64_t bytes,
                             uint64_t used, uint64_t limit) {
  vs_ledger_event *e = &s->events[s->event_head % VS_LEDGER_EVENTS];
  write_begin(s);
  e->time_ns = vs_clock_ns(CLOCK_REALTIME);
  e->pid = pid;
  e->tenant = (uint16_t)tenant;
  e->kind = (uint16_t)kind;
  e->bytes = bytes;
  e->used = used;
  e->limit = limit;
  s->event_head++;
  write_end(s);
}

/* ---- Dead processes ------------------------------------------------------- */
/* vs_ledger_slot_alive: ledger_shm.h */

/* Under the lock: whether every tenant's used, spilled, cached and
 * reserve_holders are what its ACTIVE slots add up to (ledger_shm.h's invariants; what
 * rebuild_locked would write). */
static int totals_sound_locked(const vs_ledger_shm *s) {
  uint64_t used[VS_LEDGER_TENANTS] = {0}, spilled[VS_LEDGER_TENANTS] = {0}, cached[VS_LEDGER_TENANTS] = {0};
  uint32_t holders[VS_LEDGER_TENANTS] = {0};
  for (int i = 0; i < VS_LEDGER_SLOTS; i++) {
    const vs_ledger_slot *sl = &s->slots[i];
    if (sl->state != VS_SLOT_ACTIVE) continue;
    if (sl->cache > sl->held) return 0;
    if (sl->tenant < VS_LEDGER_TENANTS) {
      used[sl->tenant] += sl->held;
      spilled[sl->tenant] += sl->spilled;
      cached[sl->tenant] += sl->cache;
    }
    for (uint64_t m = sl->reserve_mask; m; m &= m - 1) holders[__builtin_ctzll(m)]++;
  }
  for (uint32_t t = 0; t < s->ntenants && t < VS_LEDGER_TENANTS; t++)
    if (s->tenants[t].used != used[t] || s->tenants[t].spilled != spilled[t] || s->tenants[t].cached != cached[t] ||
        s->tenants[t].reserve_holders != holders[t])
      return 0;
  return 1;
}

/* Under the lock: a waiter count far above what the slots say (bytes
 * written over it) is set back to theirs; a little above is threads
 * between their two counts (wait_loop), left alone. */
static void waiters_sound_locked(vs_ledger_shm *s) {
  uint32_t sum = slots_waiting(s), v = __atomic_load_n(&s->waiters, __ATOMIC_SEQ_CST);
  if (v <= sum + VS_LEDGER_SLOTS) return;
  __atomic_store_n(&s->waiters, sum, __ATOMIC_SEQ_CST);
  VS_WARN("ledger of card %s: %u waiters counted where the processes' slots say %u (the file was written over?): "
          "set to theirs",
          s->card_id, (unsigned)v, (unsigned)sum);
}

static int sweep_locked(vs_ledger *h) {
  vs_ledger_shm *s = h->shm;
  int n = 0;
  for (int i = 0; i < VS_LEDGER_SLOTS; i++) {
    vs_ledger_slot *sl = &s->slots[i];
    if (sl->state != VS_SLOT_ACTIVE || i == h->slot || vs_ledger_slot_alive(h->fd, i)) continue;
    uint32_t t = sl->tenant < VS_LEDGER_TENANTS ? sl->tenant : 0;
    uint64_t held = sl->held, spilled = sl->spilled;
    int32_t pid = sl->pid;
    slot_waiters_gone(s, sl);
    write_begin(s);
    VS_STORE(&s->tenants[t].used, s->tenants[t].used >= held ? s->tenants[t].used - held : 0);
    VS_STORE(&s->tenants[t].cached, vs_sat_sub(s->tenants[t].cached, sl->cache));
    /* Its spilled host memory went with the process; its share of MAX comes back (issue 13). */
    VS_STORE(&s->tenants[t].spilled, s->tenants[t].spilled >= spilled ? s->tenants[t].spilled - spilled : 0);
    free_slot_locked(s, sl);
    write_end(s);
    add_event_locked(s, VS_EVENT_RECLAIM, pid, t, held, s->tenants[t].used, s->tenants[t].limit);
    if (spilled)
      VS_INFO("ledger of card %s: reclaimed %llu bytes (and %llu spilled to host) of dead process %d (tenant '%s')",
              s->card_id, (unsigned long long)held, (unsigned long long)spilled, (int)pid, s->tenants[t].name);
    else
      VS_INFO("ledger of card %s: reclaimed %llu bytes of dead process %d (tenant '%s')", s->card_id,
              (unsigned long long)held, (int)pid, s->tenants[t].name);
    n++;
  }
  VS_STORE(&s->last_sweep_ns, vs_clock_ns(CLOCK_MONOTONIC_COARSE));
  waiters_sound_locked(s);
  if (!totals_sound_locked(s)) {
    /* Issue 23: bytes written over the file (the invariant holds whenever
     * no writer is inside the lock, and we hold it). */
    rebuild_locked(s);
    VS_WARN("ledger of card %s: the tenants' totals disagreed with the process slots (the file was written over?): "
            "rebuilt from the slots",
            s->card_id);
    n++;   /* memory may have come back: waiters look again */
  }
  if (n) __atomic_add_fetch(&s->gen, 1, __ATOMIC_SEQ_CST);
  return n;
}

/* Signed: another process may have stamped a slightly later time; a stamp
 * far in the future is garbage (issue 23), and due. */
static int sweep_due(const vs_ledger_shm *s) {
  int64_t d = (int64_t)(vs_clock_ns(CLOCK_MONOTONIC_COARSE) - VS_LOAD(&s->last_sweep_ns));
  return d > (int64_t)SWEEP_EVERY_NS || d < -(int64_t)SWEEP_EVERY_NS;
}

static vs_ledger_shm *enter(vs_ledger *h);
static void leave(vs_ledger *h);

int vs_ledger_sweep(vs_ledger *h) {
  vs_ledger_shm *s = h ? enter(h) : NULL;
  if (!s) return -ECHILD;
  int r = lock_shm(s, h->fd, h->slot);
  if (r) {
    leave(h);
    return r;
  }
  int n = sweep_locked(h);
  unlock_shm(s, h->fd, h->slot);
  leave(h);
  if (n) wake_waiters(s);
  return n;
}

/* ---- Tenants ------------------------------------------------------------------ */
/* Whether nothing uses tenant entry t (ledger_shm.h): no slot that is not
 * FREE names it (a dead process's too: its bytes are not reclaimed yet) or
 * has its bit in reserve_mask, and its totals are zero. Under the lock. */
static int entry_unused_locked(const vs_ledger_shm *s, uint32_t t) {
  const vs_ledger_tenant *e = &s->tenants[t];
  if (e->used || e->spilled || e->reserve_holders) return 0;
  for (int i = 0; i < VS_LEDGER_SLOTS; i++) {
    const vs_ledger_slot *sl = &s->slots[i];
    if (sl->state != VS_SLOT_FREE && (sl->tenant == t || sl->reserve_mask >> t & 1)) return 0;
  }
  return 1;
}

/* The table is full: gives the next entry nothing uses, round the table
 * from the last one reused (so the names used longest ago go first and
 * status keeps the newest), after reclaiming the dead when none is, to
 * `name`, never one in keep (entries the caller
 * took in this attach, whose slot is not ACTIVE yet). -1 when every entry is
 * in use.
 * Why only when full: until then an index names one tenant for the life of
 * the file, as before, so status keeps every tenant's peak and events their
 * names; only the table's limit (VS_LEDGER_TENANTS) makes us forget one, and
 * forgetting an unused entry beats refusing every new tenant name (with
 * HAMi's variables a tenant per pod: 64 pods, then exit 78 for ever).
 * Safe because nothing that caches the index can still need it: a process's
 * own tenant and its reservations are pinned by its slot, totals are zero;
 * what processes cache about other indexes (reserve_of[]) is refilled when
 * they see tenant_reuses change; events naming the index lose the name
 * (VS_EVENT_NO_TENANT) rather than show the new one. The old tenant's peak
 * and history go with the entry. */
static int take_unused_locked(vs_ledger *h, const char *name, uint64_t keep) {
  vs_ledger_shm *s = h->shm;
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t k = 0; k < VS_LEDGER_TENANTS; k++) {
      uint32_t t = (s->reuse_next + k) % VS_LEDGER_TENANTS;
      if (keep >> t & 1 || !entry_unused_locked(s, t)) continue;
      vs_ledger_tenant *e = &s->tenants[t];
      char old[VS_NAME_MAX];
      snprintf(old, sizeof old, "%s", e->name);
      write_begin(s);
      /* Lock-free readers (vs_ledger_view) load these: atomic stores. */
      VS_STORE(&e->reserve, 0);
      VS_STORE(&e->limit, VS_NO_LIMIT);
      VS_STORE(&e->spill_max, 0);
      e->peak = e->spill_peak = e->last_warn_ns = e->generation = 0;
      memset(e->name, 0, sizeof e->name);
      snprintf(e->name, sizeof e->name, "%s", name);
      for (int i = 0; i < VS_LEDGER_EVENTS; i++)
        if (s->events[i].tenant == t) s->events[i].tenant = (uint16_t)VS_EVENT_NO_TENANT;
      VS_STORE(&s->tenant_reuses, s->tenant_reuses + 1);
      s->reuse_next = (t + 1) % VS_LEDGER_TENANTS;
      write_end(s);
      VS_INFO("ledger of card %s: all %d tenant entries taken; the unused entry of tenant '%s' now serves tenant '%s' "
              "(status no longer shows '%s' or its peak)",
              s->card_id, VS_LEDGER_TENANTS, old, name, old);
      return (int)t;
    }
    if (pass || !sweep_locked(h)) break; /* dead processes may be what holds entries */
  }
  return -1;
}

/* The index of tenant `name`, creating its entry when asked (appended, or
 * when the table is full an unused one: take_unused_locked). keep: see
 * there. Outside any write section (it opens its own). */
static int find_tenant_locked(vs_ledger *h, const char *name, int create, uint64_t keep) {
  vs_ledger_shm *s = h->shm;
  for (uint32_t i = 0; i < s->ntenants && i < VS_LEDGER_TENANTS; i++)
    if (!strcmp(s->tenants[i].name, name)) return (int)i;
  if (!create) return -1;
  if (s->ntenants >= VS_LEDGER_TENANTS) return take_unused_locked(h, name, keep);
  vs_ledger_tenant *t = &s->tenants[s->ntenants];
  write_begin(s);
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->limit = VS_NO_LIMIT;
  VS_STORE(&s->ntenants, s->ntenants + 1); /* after the entry: lock-free readers bound by it */
  write_end(s);
  return (int)s->ntenants - 1;
}

/* Our plan's reservation for every ledger tenant (new ones appear as other
 * processes join). An entry given to another name (tenant_reuses changed)
 * makes every cached one suspect: all are filled again. */
static void refresh_map_locked(vs_ledger *h) {
  vs_ledger_shm *s = h->shm;
  uint32_t k = h->known;
  uint32_t reuses = s->tenant_reuses;
  int again = reuses != h->reuses_seen;
  if (again) k = 0;
  for (; k < s->ntenants && k < VS_LEDGER_TENANTS; k++) {
    const vs_plan_tenant *p = vs_plan_find(&h->plan, s->tenants[k].name);
    __atomic_store_n(&h->reserve_of[k], p ? (int64_t)p->reserve : -1, __ATOMIC_RELAXED);
  }
  if (again) __atomic_store_n(&h->reuses_seen, reuses, __ATOMIC_RELAXED);
  /* Release: a lock-free reader (view) that sees known also sees reserve_of. */
  if (again || k != h->known) __atomic_store_n(&h->known, k, __ATOMIC_RELEASE);
}

/* ---- Opening ---------------------------------------------------------------- */
/* Whether any process holds a slot lock on the file (uses it). */
static int in_use(int fd) { return vs_plat_range_held(fd, VS_SLOT_LOCK_BASE, VS_LEDGER_SLOTS); }

/* A damaged ledger that processes still use is never re-initialised: it is
 * renamed aside (they notice the replacement and carry their usage into the
 * new one) and the caller opens the path again. */
static int move_aside(int fd, int dfd, const char *name, const char *path, const char *what, char *err,
                      size_t errlen) {
  /* Only the file we opened: another process may have moved it aside and
   * started a new one at the path meanwhile (then open the path again). */
  if (vs_plat_path_is_file(path, fd) != 1) return 1;
  char aside[VS_NAME_MAX + 64];
  snprintf(aside, sizeof aside, "%s.damaged-%lld-%d", name, (long long)time(NULL), vs_plat_pid());
  if (vs_plat_renameat(dfd, name, aside)) {
    snprintf(err, errlen, "ledger %s is %s while in use and cannot be moved aside: %s", path, what, strerror(errno));
    return -1;
  }
  VS_WARN("ledger %s was %s: moved aside to %s and started a new one (running processes of this version carry "
          "their usage into it)",
          path, what, aside);
  return 1;
}

/* 0 ready, 1 moved aside (open the path again), -1 error (err). */
/* again: a process that used the ledger re-attaches (so it is in use,
 * whatever the file now at the path says). */
static int init_file(int fd, int dfd, const char *name, const char *path, const vs_plan *plan, const char *card_id,
                     int again, char *err, size_t errlen) {
  /* Type and owner: checked by the caller (vs_plat_shared_file_check). */
  int64_t size = vs_plat_file_size(fd);
  if (size < 0) {
    snprintf(err, errlen, "ledger %s: %s", path, strerror(errno));
    return -1;
  }
  int used = again || in_use(fd);
  if (size != 0 && size != (int64_t)sizeof(vs_ledger_shm)) {
    uint64_t magic = 0;
    int other_version = vs_plat_pread(fd, &magic, sizeof magic, 0) == (long)sizeof magic && magic == VS_LEDGER_MAGIC;
    /* Another vramshim's ledger that its processes still use cannot be
     * shared (nor moved under them); one nobody uses (left by an upgrade)
     * is moved aside, as is a damaged one. */
    if (other_version && used && !again) {
      snprintf(err, errlen,
               "ledger %s has another layout (%lld bytes, this vramshim uses %zu) and is in use: an older or newer "
               "vramshim runs on this card; restart its processes, or set another ledger_dir",
               path, (long long)size, sizeof(vs_ledger_shm));
      return -1;
    }
    return move_aside(fd, dfd, name, path, other_version ? "left by another vramshim version" : "truncated or resized", err,
                      errlen);
  }
  if (size == 0 && vs_plat_truncate(fd, (int64_t)sizeof(vs_ledger_shm))) {
    snprintf(err, errlen, "ledger %s: cannot size it: %s", path, strerror(errno));
    return -1;
  }
  /* Read the header with pread, not through a mapping: another process may
   * truncate the file at any moment (a mapping would fault). */
  vs_ledger_shm hdr;
  memset(&hdr, 0, sizeof hdr);
  long got = vs_plat_pread(fd, &hdr, offsetof(vs_ledger_shm, lock), 0);
  int fresh = size == 0;
  if (got == (long)offsetof(vs_ledger_shm, lock) && hdr.magic == VS_LEDGER_MAGIC) {
    /* Issue 23: a file of our size whose header names another size, or a
     * version no vramshim ever had, was written over: damaged, not another
     * version's (whose file would have its own size, and is refused while
     * in use). */
    if (hdr.size != sizeof hdr || hdr.version == 0 || hdr.version > VS_LEDGER_VERSION + 64)
      return move_aside(fd, dfd, name, path, "damaged (bad header)", err, errlen);
    if (hdr.version != VS_LEDGER_VERSION || hdr.size != sizeof hdr) {
      if (!used) return move_aside(fd, dfd, name, path, "left by another vramshim version", err, errlen);
      snprintf(err, errlen,
               "ledger %s has layout version %u, this vramshim uses %u, and is in use: restart the other version's "
               "processes, or set another ledger_dir",
               path, hdr.version, VS_LEDGER_VERSION);
      return -1;
    }
    /* Issue 23: a process found a lock word no holder could have written. */
    if (hdr.damaged) return move_aside(fd, dfd, name, path, "damaged (its lock word named no process)", err, errlen);
    return 0;
  }
  /* Not initialised: new, or its creator died before finishing (both: no
   * process uses it), or damaged / truncated to nothing while in use. */
  if (used && !fresh) return move_aside(fd, dfd, name, path, "damaged (bad header)", err, errlen);
  if (used && fresh)
    VS_INFO("ledger %s was truncated while processes used it: re-initialised; running processes carry their usage "
            "into it",
            path);
  vs_ledger_shm *s = vs_plat_map_shared(fd, sizeof *s);
  if (!s) {
    snprintf(err, errlen, "ledger %s: cannot map it: %s", path, strerror(errno));
    return -1;
  }
  vs_plat_guard_add(s, sizeof *s);
  memset(s, 0, sizeof *s);
  s->version = VS_LEDGER_VERSION;
  s->size = (uint32_t)sizeof *s;
  vs_plat_xlock_init(&s->lock);
  s->card_index = plan->card;
  snprintf(s->card_id, sizeof s->card_id, "%s", card_id);
  s->capacity = plan->capacity;
  s->headroom = plan->headroom;
  __atomic_store_n(&s->magic, VS_LEDGER_MAGIC, __ATOMIC_RELEASE);
  vs_plat_guard_remove(s);
  vs_plat_unmap(s, sizeof *s);
  return 0;
}

static int claim_slot_locked(vs_ledger *h) {
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < VS_LEDGER_SLOTS; i++) {
      if (h->shm->slots[i].state != VS_SLOT_FREE) continue;
      if (vs_plat_range_trylock(h->fd, VS_SLOT_LOCK_BASE + i, 1) == 0) return i;
      /* Held: a process is between freeing the slot and dropping its lock. */
    }
    h->slot = -1;
    sweep_locked(h);
  }
  return -1;
}

/* Opens dir/name (creating and initialising it when needed) and takes a
 * slot there for this handle's process, charged `carry` bytes (its usage,
 * when re-attaching). Sets fd, shm, dev, ino, slot, tenant; 0 or -1 (err). */
static int attach(vs_ledger *h, uint64_t carry, char *err, size_t errlen) {
  char path[VS_PATH_MAX + VS_NAME_MAX + 16];
  snprintf(path, sizeof path, "%s/%s", h->dir, h->name);
  const vs_plan *plan = &h->plan;
  int fd = -1, bad = 1;
  for (int tries = 0; tries < 3 && bad; tries++) {
    int dfd = vs_ledger_open_dir(h->dir, 1, err, errlen);
    if (dfd < 0) return -1;
    fd = vs_plat_openat(dfd, h->name, O_RDWR | O_CREAT | O_NOFOLLOW, 0660);
    if (fd < 0) {
      int e = errno;
      close(dfd);
      snprintf(err, errlen, "ledger %s: cannot open it: %s", path, strerror(e));
      return -1;
    }
    if (vs_ledger_check_owner(fd, path, err, errlen)) {
      close(dfd);
      close(fd);
      return -1;
    }
    vs_plat_file_lock(fd); /* serialises creation only */
    bad = init_file(fd, dfd, h->name, path, plan, h->card_id, h->shm != NULL, err, errlen);
    vs_plat_file_unlock(fd);
    close(dfd);
    if (bad) {
      close(fd);
      fd = -1;
      if (bad < 0) return -1;
    }
  }
  if (fd < 0) return -1;
  vs_ledger_shm *s = vs_plat_map_shared(fd, sizeof *s);
  if (!s) {
    snprintf(err, errlen, "ledger %s: cannot map it", path);
    close(fd);
    return -1;
  }
  vs_plat_guard_add(s, sizeof *s);
  int old_fd = h->fd;
  vs_ledger_shm *old_shm = h->shm;
  __atomic_store_n(&h->fd, fd, __ATOMIC_RELAXED); /* read without mu (fd_of) */
  h->slot = -1;
  __atomic_store_n(&h->shm, s, __ATOMIC_RELEASE);
  view_moved(h);

  uint64_t start_time = vs_ledger_self_start_time(); /* reads /proc: not under the lock */
  if (lock_shm(s, h->fd, h->slot)) {
    snprintf(err, errlen, "ledger %s: its lock is unusable", path);
    goto fail;
  }
  int slot = claim_slot_locked(h);
  int t = slot < 0 ? -1 : find_tenant_locked(h, h->tenant_name, 1, 0);
  if (slot < 0 || t < 0) {
    unlock_shm(s, h->fd, h->slot);
    if (slot < 0)
      snprintf(err, errlen, "ledger %s is full (%d processes at most)", path, VS_LEDGER_SLOTS);
    else
      snprintf(err, errlen,
               "ledger %s is full (%d tenants at most, each with a live process, a reservation a live process's "
               "config holds, or memory charged)",
               path, VS_LEDGER_TENANTS);
    goto fail;
  }
  h->slot = slot;
  __atomic_store_n(&h->tenant, (uint32_t)t, __ATOMIC_RELAXED);
  __atomic_store_n(&h->known, 0, __ATOMIC_RELEASE);  /* tenant indexes are the new file's */
  __atomic_store_n(&h->reuses_seen, s->tenant_reuses, __ATOMIC_RELAXED);
  view_moved(h);
  /* The newest process's plan is what status shows; each process still
   * enforces its own (see refresh_map_locked). Entries first: creating one
   * is a write section of its own, and sections do not nest. */
  int idx[VS_CFG_MAX_TENANTS];
  uint64_t keep = 1ull << t; /* taken here, not yet pinned by our slot: never handed on in this loop */
  for (int i = 0; i < plan->ntenants; i++) {
    idx[i] = find_tenant_locked(h, plan->tenants[i].name, 1, keep);
    if (idx[i] >= 0) keep |= 1ull << idx[i];
  }
  write_begin(s);
  uint64_t mask = 0;
  for (int i = 0; i < plan->ntenants; i++) {
    int k = idx[i];
    if (k < 0) continue;
    if (plan->tenants[i].reserve && !(mask >> k & 1)) {
      mask |= 1ull << k;
      VS_STORE(&s->tenants[k].reserve_holders, s->tenants[k].reserve_holders + 1);
    }
    VS_STORE(&s->tenants[k].reserve, plan->tenants[i].reserve);
    VS_STORE(&s->tenants[k].limit, plan->tenants[i].limit);
    VS_STORE(&s->tenants[k].spill_max, plan->tenants[i].spill_max);
    s->tenants[k].generation = plan->generation;
  }
  /* A tenant without a section is held to [tenant default]'s rules
   * (vs_plan_rules): its entry says so, for status and dumps (issue 22). */
  if (!vs_plan_find(plan, h->tenant_name)) {
    VS_STORE(&s->tenants[t].limit, h->limit);
    VS_STORE(&s->tenants[t].spill_max, h->spill_max);
  }
  /* The header is the card's, not the last attacher's (issue 22): the plan
   * fields change with a config of another generation only, and the
   * physical index is written once, by the first process that knows it
   * (a process that sees the card by UUID alone reads it here, card_ident.h). */
  if (s->plan_generation != plan->generation || !s->plan_pid) {
    s->capacity = plan->capacity;
    s->headroom = plan->headroom;
    s->plan_generation = plan->generation;
    s->plan_pid = h->pid;
  }
  if (s->card_index < 0 && plan->card >= 0) s->card_index = plan->card;
  vs_ledger_slot *sl = &s->slots[slot];
  memset(sl, 0, sizeof *sl);
  sl->pid = h->pid;
  sl->start_time = start_time;
  sl->tenant = (uint32_t)t;
  sl->generation = plan->generation;
  sl->attach_ns = vs_clock_ns(CLOCK_REALTIME);
  sl->reserve_mask = mask;
  h->mine_mask = mask;
  /* Re-attaching: what this process holds is carried over as it is (it is
   * device memory already taken; admission is not asked again). */
  sl->held = carry;
  sl->peak = h->mine_peak > carry ? h->mine_peak : carry;
  VS_STORE(&s->tenants[t].used, s->tenants[t].used + carry);
  if (s->tenants[t].used > s->tenants[t].peak) s->tenants[t].peak = s->tenants[t].used;
  if (carry) sl->overhead = h->mine_overhead <= carry ? h->mine_overhead : carry;
  if (h->mine_spilled) {   /* also with no device bytes to carry (0 on a first attach) */
    sl->spilled = sl->spill_peak = h->mine_spilled;
    VS_STORE(&s->tenants[t].spilled, s->tenants[t].spilled + h->mine_spilled);
    if (s->tenants[t].spilled > s->tenants[t].spill_peak) s->tenants[t].spill_peak = s->tenants[t].spilled;
  }
  sl->state = VS_SLOT_ACTIVE;
  write_end(s);
  refresh_map_locked(h);
  int reclaimed = sweep_locked(h);
  unlock_shm(s, h->fd, h->slot);
  if (reclaimed) wake_waiters(s);
  return 0;
fail:
  vs_plat_guard_remove(s);
  vs_plat_unmap(s, sizeof *s);
  close(fd);
  __atomic_store_n(&h->fd, old_fd, __ATOMIC_RELAXED);
  __atomic_store_n(&h->shm, old_shm, __ATOMIC_RELEASE);
  view_moved(h);
  return -1;
}

vs_ledger *vs_ledger_open(const char *dir, const char *card_id, const vs_plan *plan, const char *tenant, char *err,
                          size_t errlen) {
  char name[VS_NAME_MAX + 16];
  if (!dir || !card_id || !plan || !tenant || !*tenant || vs_ledger_file_name(card_id, name, sizeof name) ||
      strlen(dir) >= VS_PATH_MAX || strlen(card_id) >= VS_NAME_MAX) {
    snprintf(err, errlen, "ledger: bad arguments (dir, card id, plan and tenant are required)");
    return NULL;
  }
  pthread_once(&g_atfork_once, register_atfork);
  vs_ledger *h = calloc(1, sizeof *h);
  if (!h) {
    snprintf(err, errlen, "ledger: out of memory");
    return NULL;
  }
  pthread_mutex_init(&h->mu, NULL);
  snprintf(h->dir, sizeof h->dir, "%s", dir);
  snprintf(h->name, sizeof h->name, "%s", name);
  snprintf(h->card_id, sizeof h->card_id, "%s", card_id);
  h->fd = -1;
  h->pid = vs_plat_pid();
  h->slot = -1;
  h->plan = *plan;
  snprintf(h->tenant_name, sizeof h->tenant_name, "%s", tenant);
  const vs_plan_tenant *me = vs_plan_rules(plan, tenant); /* default's for a tenant without a section */
  h->limit = me ? me->limit : VS_NO_LIMIT;
  h->spill_max = me ? me->spill_max : 0;
  h->total = vs_plan_total(plan, tenant);
  h->warn_at = me && me->warn_ppm ? (uint64_t)((vs_u128)h->total * me->warn_ppm / VS_PPM_100) : 0;
  const char *hook = vs_plat_getenv("VRAMSHIM_TEST_LEDGER_STALL");
  if (hook && !strcmp(hook, "stop")) h->hook = VS_LEDGER_HOOK_STOP;
  if (hook && !strcmp(hook, "sleep")) h->hook = VS_LEDGER_HOOK_SLEEP;
  if (attach(h, 0, err, errlen)) {
    pthread_mutex_destroy(&h->mu);
    free(h);
    return NULL;
  }
  h->next_check_ns = vs_clock_ns(CLOCK_MONOTONIC_COARSE) + FILE_CHECK_NS;
  pthread_mutex_lock(&g_handles_lock);
  h->next = g_handles;
  g_handles = h;
  pthread_mutex_unlock(&g_handles_lock);
  return h;
}

/* ---- Truncated, deleted, damaged or replaced files (issue 10) -------------- */
/* Caller holds h->mu. What is wrong with the file under this handle, or NULL. */
static const char *file_trouble(vs_ledger *h, int force) {
  vs_ledger_shm *s = h->shm;
  if (vs_plat_guard_broken(s)) return "truncated (the mapping faulted)";
  if (__atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != VS_LEDGER_MAGIC || s->version != VS_LEDGER_VERSION ||
      s->size != sizeof *s)
    return "damaged (bad header)";
  if (VS_LOAD(&s->damaged)) return "damaged (its lock word named no process)";
  const vs_ledger_slot *mine = &s->slots[h->slot];
  /* Only this process writes its slot's counters, always with its own
   * copies (issue 23: bytes written over them are damage too). */
  if (mine->pid != h->pid || mine->state != VS_SLOT_ACTIVE || mine->held != h->mine_held ||
      mine->spilled != h->mine_spilled || mine->tenant != h->tenant || mine->reserve_mask != h->mine_mask)
    return "damaged (this process's slot was overwritten)";
  uint64_t now = vs_clock_ns(CLOCK_MONOTONIC_COARSE);
  if (!force && now < h->next_check_ns) return NULL;
  h->next_check_ns = now + FILE_CHECK_NS;
  int64_t size = vs_plat_file_size(h->fd);
  if (size >= 0 && size < (int64_t)sizeof *s) return "truncated";
  char path[VS_PATH_MAX + VS_NAME_MAX + 16];
  snprintf(path, sizeof path, "%s/%s", h->dir, h->name);
  int same = vs_plat_path_is_file(path, h->fd);
  if (same == -1) return "deleted";
  if (same == 0) return "replaced by another file";
  return NULL;
}

/* This process leaves file s, when s is sound and still lists it in
 * `slot`: the slot's bytes leave its tenant's totals and the slot is free
 * again. announce: the others learn of it at once (generation, wake-ups);
 * a file being left for another one needs no such news. 1 when left. */
static int leave_file(vs_ledger_shm *s, int fd, int slot, uint32_t tenant, int pid, int announce) {
  if (vs_plat_guard_broken(s) || __atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != VS_LEDGER_MAGIC ||
      s->slots[slot].pid != pid || lock_shm(s, fd, slot) != 0)
    return 0;
  vs_ledger_slot *sl = &s->slots[slot];
  slot_waiters_gone(s, sl);
  write_begin(s);
  uint64_t u = s->tenants[tenant].used, sp = s->tenants[tenant].spilled;
  VS_STORE(&s->tenants[tenant].used, u >= sl->held ? u - sl->held : 0);
  VS_STORE(&s->tenants[tenant].spilled, sp >= sl->spilled ? sp - sl->spilled : 0);
  VS_STORE(&s->tenants[tenant].cached, vs_sat_sub(s->tenants[tenant].cached, sl->cache));
  free_slot_locked(s, sl);
  write_end(s);
  if (announce) __atomic_add_fetch(&s->gen, 1, __ATOMIC_SEQ_CST);
  unlock_shm(s, fd, slot);
  if (announce) wake_waiters(s);
  return 1;
}

/* Caller holds h->mu. Re-attaches to the ledger now at the path, carrying
 * this process's usage; the old mapping becomes private zero pages (the
 * address stays valid for lock-free readers) and the old descriptor is
 * closed (its slot lock goes with it). One log line. On failure the handle
 * keeps the old file (enforcing as before, against it). */
static void reattach(vs_ledger *h, const char *why) {
  char err[VS_ERR_MAX], b[32];
  int old_fd = h->fd, old_slot = h->slot;
  vs_ledger_shm *old = h->shm;
  uint32_t old_tenant = h->tenant;
  if (attach(h, h->mine_held, err, sizeof err)) {
    h->slot = old_slot;
    __atomic_store_n(&h->tenant, old_tenant, __ATOMIC_RELAXED);
    view_moved(h);
    h->next_check_ns = vs_clock_ns(CLOCK_MONOTONIC_COARSE) + 10 * FILE_CHECK_NS; /* do not retry at every call */
    if (!h->reattach_failed++)
      VS_WARN("ledger %s/%s was %s, and re-attaching failed: %s; this process keeps counting in the old one "
              "(trying again every second)",
              h->dir, h->name, why, err);
    return;
  }
  /* The old file, when still sound (deleted or replaced, not damaged), no
   * longer lists this process: its dump mailbox there is given up too. */
  leave_file(old, old_fd, old_slot, old_tenant, h->pid, 0);
  vs_plat_guard_retire(old, sizeof *old);
  close(old_fd);
  h->reattach_failed = 0;
  VS_WARN("ledger %s/%s was %s: tenant '%s' re-attached to the ledger now there, carrying this process's %s", h->dir,
          h->name, why, h->tenant_name, vs_fmt_bytes(h->mine_held, b, sizeof b));
}

/* Writers start here: takes h->mu and makes sure the file is sound. NULL
 * (nothing locked) in a fork child. */
static vs_ledger_shm *enter(vs_ledger *h) {
  if (fd_of(h) < 0) return NULL;
  pthread_mutex_lock(&h->mu);
  if (h->exited) {
    pthread_mutex_unlock(&h->mu);
    return NULL;
  }
  const char *why = file_trouble(h, 0);
  if (why) reattach(h, why);
  return h->shm;
}
static void leave(vs_ledger *h) { pthread_mutex_unlock(&h->mu); }
/* enter() with the ledger's lock taken: NULL (nothing held) when either
 * fails. leave_locked() gives both back. */
static vs_ledger_shm *enter_locked(vs_ledger *h) {
  vs_ledger_shm *s = h ? enter(h) : NULL;
  if (s && lock_shm(s, h->fd, h->slot)) {
    leave(h);
    return NULL;
  }
  return s;
}
static void leave_locked(vs_ledger *h, vs_ledger_shm *s) {
  unlock_shm(s, h->fd, h->slot);
  leave(h);
}

void vs_ledger_exit(vs_ledger *h) {
  if (!h || fd_of(h) < 0) return;
  pthread_mutex_lock(&h->mu);
  if (!h->exited && !vs_plat_guard_broken(h->shm) &&
      __atomic_load_n(&h->shm->magic, __ATOMIC_ACQUIRE) == VS_LEDGER_MAGIC && lock_shm(h->shm, h->fd, h->slot) == 0) {
    /* Issue 23: the dead go with us (forked children that died before
     * this process, when no other process is left to reclaim them). */
    int n = sweep_locked(h);
    unlock_shm(h->shm, h->fd, h->slot);
    if (n) wake_waiters(h->shm);
  }
  if (!h->exited) leave_file(h->shm, h->fd, h->slot, h->tenant, h->pid, 1);
  h->exited = 1;
  pthread_mutex_unlock(&h->mu);
}

int vs_ledger_check(vs_ledger *h) {
  if (!h || fd_of(h) < 0) return 0;
  pthread_mutex_lock(&h->mu);
  if (h->exited) {
    pthread_mutex_unlock(&h->mu);
    return 0;
  }
  const char *why = file_trouble(h, 0);
  if (why) reattach(h, why);
  vs_ledger_shm *s = h->shm;
  int n = 0;
  if (sweep_due(s) && lock_shm(s, h->fd, h->slot) == 0) {
    n = sweep_locked(h);
    unlock_shm(s, h->fd, h->slot);
  }
  pthread_mutex_unlock(&h->mu);
  if (n) wake_waiters(s);
  return why != NULL;
}

void vs_ledger_close(vs_ledger *h) {
  if (!h) return;
  pthread_mutex_lock(&g_handles_lock);
  for (vs_ledger **pp = &g_handles; *pp; pp = &(*pp)->next)
    if (*pp == h) {
      *pp = h->next;
      break;
    }
  pthread_mutex_unlock(&g_handles_lock);
  if (h->fd >= 0) pthread_mutex_lock(&h->mu);
  vs_ledger_shm *s = h->shm;
  /* A damaged or truncated file is left alone: its slot lock goes with the
   * descriptor, and the others reclaim the slot. */
  if (h->fd >= 0) leave_file(s, h->fd, h->slot, h->tenant, h->pid, 1);
  vs_plat_guard_remove(s);
  vs_plat_unmap(s, sizeof *s);
  if (h->fd >= 0) {
    close(h->fd); /* drops the slot lock after the slot is free */
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_destroy(&h->mu);
  }
  free(h);
}

/* ---- Admission ---------------------------------------------------------------- */
/* R_t: our plan's reservation for tenant t when the plan names it (known:
 * how many reserve_of[] entries are filled), else the ledger's while a live
 * process's config holds it (reserve_holders), else none: a reservation
 * ends with the last process under a config that has it. */
static uint64_t reserve_of(const vs_ledger *h, uint32_t t, uint32_t known) {
  int64_t mine = t < known ? __atomic_load_n(&h->reserve_of[t], __ATOMIC_RELAXED) : -1;
  if (mine >= 0) return (uint64_t)mine;
  const vs_ledger_shm *s = __atomic_load_n(&h->shm, __ATOMIC_ACQUIRE); /* a re-attach may change it */
  return VS_LOAD(&s->tenants[t].reserve_holders) ? VS_LOAD(&s->tenants[t].reserve) : 0;
}

/* The sum of max(U_t, R_t) over the tenants below nt other than ours;
 * with caches: U_t without what their processes' arenas would give back
 * when asked (the view), and *caches the sum of those caches. Relaxed
 * atomic reads: the lock-free view uses it too. */
static uint64_t others_of(const vs_ledger *h, uint32_t known, uint32_t nt, uint64_t *caches) {
  const vs_ledger_shm *s = __atomic_load_n(&h->shm, __ATOMIC_ACQUIRE);
  uint32_t mine = __atomic_load_n(&h->tenant, __ATOMIC_RELAXED);
  uint64_t others = 0, cached = 0;
  for (uint32_t t = 0; t < nt; t++) {
    if (t == mine) continue;
    uint64_t u = VS_LOAD(&s->tenants[t].used), r = reserve_of(h, t, known);
    if (caches) {
      uint64_t c = VS_LOAD(&s->tenants[t].cached);
      u = vs_sat_sub(u, c);
      cached = vs_sat_add(cached, c);
    }
    others = vs_sat_add(others, u > r ? u : r);
  }
  if (caches) *caches = cached;
  return others;
}

/* The rule, under the lock: 0 admitted, else the refusing condition. */
static vs_refusal_kind evaluate_locked(const vs_ledger *h, uint64_t n, vs_refusal *why) {
  const vs_ledger_shm *s = h->shm;
  uint64_t ua = s->tenants[h->tenant].used, others = others_of(h, h->known, h->known, NULL);
  uint64_t want = vs_sat_add(ua, n);
  vs_refusal_kind k = VS_REFUSE_NONE;
  if (want > h->limit) k = VS_REFUSE_LIMIT;
  else if (vs_sat_add(vs_sat_add(want, others), h->plan.headroom) > h->plan.capacity) k = VS_REFUSE_CAPACITY;
  if (why) {
    why->kind = k;
    why->cause = k;
    why->request = n;
    why->used = ua;
    why->limit = h->limit;
    why->others = others;
    why->headroom = h->plan.headroom;
    why->capacity = h->plan.capacity;
    why->warned = 0;
  }
  return k;
}

/* What charge and probe start with, under the lock: refreshes the tenant
 * map, reclaims the dead when due, and evaluates the rule for n more bytes;
 * before refusing, reclaims the dead anyway (unless just done) and
 * evaluates again. *reclaimed: the slots reclaimed (the caller wakes the
 * waiters after unlocking when any were). */
static vs_refusal_kind admit_locked(vs_ledger *h, uint64_t n, vs_refusal *w, int *reclaimed) {
  refresh_map_locked(h);
  int swept = 0;
  *reclaimed = 0;
  if (sweep_due(h->shm)) {
    *reclaimed += sweep_locked(h);
    swept = 1;
  }
  vs_refusal_kind k = evaluate_locked(h, n, w);
  if (k != VS_REFUSE_NONE && !swept) {
    /* Before saying no, make sure no dead process holds what we need. */
    int got = sweep_locked(h);
    *reclaimed += got;
    if (got) k = evaluate_locked(h, n, w);
  }
  return k;
}

static void stall_hook(vs_ledger *h) {
  if (h->hook == VS_LEDGER_HOOK_STOP) vs_plat_stop_self();
  else if (h->hook == VS_LEDGER_HOOK_SLEEP) sleep(3600);
}

/* Adds n to what our slot holds and to our tenant's usage (and their
 * peaks), in one write section; returns the tenant's usage after. With
 * stall, the test hook (if set) runs between the two updates. */
static uint64_t add_locked(vs_ledger *h, uint64_t n, int stall) {
  vs_ledger_shm *s = h->shm;
  vs_ledger_slot *sl = &s->slots[h->slot];
  vs_ledger_tenant *t = &s->tenants[h->tenant];
  write_begin(s);
  VS_STORE(&sl->held, sl->held + n);
  if (sl->held > sl->peak) sl->peak = sl->held;
  __atomic_store_n(&h->mine_held, sl->held, __ATOMIC_RELAXED);
  if (sl->peak > h->mine_peak) h->mine_peak = sl->peak;
  /* The worst place to die: slot updated, total not, seq odd. */
  if (stall && h->hook) stall_hook(h);
  VS_STORE(&t->used, t->used + n);
  if (t->used > t->peak) t->peak = t->used;
  write_end(s);
  return t->used;
}

int vs_ledger_charge(vs_ledger *h, uint64_t n, vs_refusal *why) {
  if (!h) return -EINVAL;
  vs_ledger_shm *s = enter(h); /* NULL in a fork child (see atfork_child; getpid() would be a syscall) */
  if (!s) return -ECHILD;
  int r = lock_shm(s, h->fd, h->slot);
  if (r) {
    leave(h);
    return r;
  }
  vs_refusal local;
  vs_refusal *w = why ? why : &local;
  int reclaimed;
  vs_refusal_kind k = admit_locked(h, n, w, &reclaimed);
  int warn = 0;
  uint64_t used = 0;
  if (k == VS_REFUSE_NONE) {
    vs_ledger_tenant *t = &s->tenants[h->tenant];
    uint64_t before = t->used;
    used = add_locked(h, n, 1);
    if (h->warn_at && before < h->warn_at && used >= h->warn_at) {
      uint64_t now = vs_clock_ns(CLOCK_REALTIME);
      if (now - t->last_warn_ns >= WARN_EVERY_NS) {
        t->last_warn_ns = now;
        add_event_locked(s, VS_EVENT_WARN, h->pid, h->tenant, used, used, h->limit);
        warn = 1;
      }
    }
  }
  leave_locked(h, s);
  if (reclaimed) wake_waiters(s);
  w->warned = warn;
  if (warn) {
    char a[32], b[32];
    uint64_t eff = h->total;
    VS_WARN("tenant '%s' on card %d crossed its warning threshold: using %s of %s (%.0f%%)", h->tenant_name,
            h->plan.card, vs_fmt_bytes(used, a, sizeof a), vs_fmt_bytes(eff, b, sizeof b),
            eff ? 100.0 * (double)used / (double)eff : 100.0);
  }
  return k == VS_REFUSE_NONE ? 0 : 1;
}

void vs_ledger_force(vs_ledger *h, uint64_t n) {
  vs_ledger_shm *s = h && n ? enter(h) : NULL;
  if (!s) return;
  if (lock_shm(s, h->fd, h->slot) == 0) {
    add_locked(h, n, 0);
    unlock_shm(s, h->fd, h->slot);
  }
  leave(h);
}

/* Under the lock: gives back up to n of a slot's counter and its tenant's
 * total (never below zero: a slot gives back at most what it holds).
 * Returns the slot's new value. */
static uint64_t give_back_locked(vs_ledger_shm *s, uint64_t *slot_v, uint64_t *tenant_v, uint64_t n) {
  uint64_t m = n < *slot_v ? n : *slot_v;
  write_begin(s);
  VS_STORE(slot_v, *slot_v - m);
  VS_STORE(tenant_v, *tenant_v >= m ? *tenant_v - m : 0);
  write_end(s);
  return *slot_v;
}

/* Under the lock: slot sl's published cache becomes c, and its tenant
 * t's total moves with it (the invariant totals_sound_locked checks). */
static void set_cache_locked(vs_ledger_shm *s, vs_ledger_slot *sl, uint32_t t, uint64_t c) {
  write_begin(s);
  VS_STORE(&s->tenants[t].cached, vs_sat_sub(s->tenants[t].cached, sl->cache) + c);
  VS_STORE(&sl->cache, c);
  write_end(s);
}

/* Under the lock: n bytes went back to the driver. An arena gives back
 * only its cache, so the published cache falls by as much (a pass-through
 * free lowers it too: an underestimate, raised again at the next
 * publication, never a promise of memory nobody holds), and stays within
 * held. */
static void cache_less_locked(vs_ledger_shm *s, vs_ledger *h, uint64_t n) {
  vs_ledger_slot *sl = &s->slots[h->slot];
  uint64_t keep = vs_sat_sub(sl->cache, n);
  if (keep > sl->held) keep = sl->held;
  if (keep != sl->cache) set_cache_locked(s, sl, h->tenant, keep);
}

void vs_ledger_uncharge(vs_ledger *h, uint64_t n) {
  vs_ledger_shm *s = n ? enter_locked(h) : NULL;
  if (!s) return;
  uint64_t held = give_back_locked(s, &s->slots[h->slot].held, &s->tenants[h->tenant].used, n);
  cache_less_locked(s, h, n);
  __atomic_store_n(&h->mine_held, held, __ATOMIC_RELAXED);
  __atomic_add_fetch(&s->gen, 1, __ATOMIC_SEQ_CST);
  if (sweep_due(s)) sweep_locked(h);
  leave_locked(h, s);
  wake_waiters(s);
}

/* Whether the request could fit if every other process freed everything. */
static int could_ever_fit(const vs_ledger *h, uint64_t n) {
  return n <= h->limit && n <= h->total;
}

/* Sleeps on the ledger's generation futex (woken whenever memory is given
 * back; in slices, so a lost wake-up costs at most one slice) and retries
 * `attempt` until it stops refusing or the deadline passes (then the
 * refusal becomes VS_REFUSE_TIMEOUT with its cause kept). Counted in
 * `waiters` meanwhile, so processes that free can give their caches back. */
static int wait_loop(vs_ledger *h, uint64_t n, uint64_t deadline_ns, vs_refusal *w,
                     int (*attempt)(vs_ledger *, uint64_t, vs_refusal *)) {
  /* The waiter count stays on the mapping it was added to; the futex is the
   * current one's (a re-attach in between costs at most a slice). */
  vs_ledger_shm *s0 = __atomic_load_n(&h->shm, __ATOMIC_ACQUIRE);
  uint32_t *mine = &s0->slots[h->slot].waiting;
  int r;
  /* The card's count first, the slot's second, and off in the other
   * order: a rebuild (which sets the card's from the slots') in between
   * then leaves the card's count short by one for a while, never long. */
  __atomic_add_fetch(&s0->waiters, 1, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(mine, 1, __ATOMIC_SEQ_CST);
  for (;;) {
    vs_ledger_shm *s = __atomic_load_n(&h->shm, __ATOMIC_ACQUIRE);
    /* Read gen before trying: a release after our check changes it, and
     * the futex wait then returns at once. */
    uint32_t g = __atomic_load_n(&s->gen, __ATOMIC_SEQ_CST);
    r = attempt(h, n, w);
    if (r != 1) break;
    uint64_t now = vs_mono_ns();
    if (now >= deadline_ns) {
      w->cause = w->kind;
      w->kind = VS_REFUSE_TIMEOUT;
      break;
    }
    uint64_t left = deadline_ns - now, slice = WAIT_SLICE_MS * 1000000ull;
    if (left > slice) left = slice;
    char key[40];
    vs_plat_xlock_key(&s->lock, key, sizeof key);
    vs_plat_wait(&s->gen, g, left, key, "gen");
  }
  /* Off the count once, unless the slot's leaving took it off already. */
  if (count_take(mine, 1)) count_take(&s0->waiters, 1);
  return r;
}

int vs_ledger_wait_charge(vs_ledger *h, uint64_t n, uint64_t timeout_ms, vs_refusal *why) {
  vs_refusal local;
  vs_refusal *w = why ? why : &local;
  int r = vs_ledger_charge(h, n, w);
  if (r != 1 || !could_ever_fit(h, n) || timeout_ms == 0) return r;
  return wait_loop(h, n, vs_mono_ns() + timeout_ms * 1000000ull, w, vs_ledger_charge);
}

/* The admission rule for n more bytes without charging them (refreshes the
 * tenant map, reclaims the dead first when due or when it would refuse). */
static int probe(vs_ledger *h, uint64_t n, vs_refusal *w) {
  vs_ledger_shm *s = enter(h);
  if (!s) return -ECHILD;
  int r = lock_shm(s, h->fd, h->slot);
  if (r) {
    leave(h);
    return r;
  }
  int reclaimed;
  vs_refusal_kind k = admit_locked(h, n, w, &reclaimed);
  leave_locked(h, s);
  if (reclaimed) wake_waiters(s);
  return k == VS_REFUSE_NONE ? 0 : 1;
}

int vs_ledger_wait_fit(vs_ledger *h, uint64_t n, uint64_t deadline_ns, vs_refusal *why) {
  vs_refusal local;
  vs_refusal *w = why ? why : &local;
  if (!h) return -EINVAL;
  if (fd_of(h) < 0) return -ECHILD;
  int r = probe(h, n, w);
  if (r != 1 || !could_ever_fit(h, n)) return r;
  return wait_loop(h, n, deadline_ns, w, probe);
}

/* ---- Trims asked of other processes (issue 23) ----------------------------------- */
/* Whether the process in slot sl may hold what a refusal of this scope
 * needs: our tenant's any memory (its usage is ours); another tenant's,
 * where its usage beyond its reserve is what the card's condition counts
 * (capacity), or wherever it lies (the driver refused). Any process that
 * holds memory, not only one whose published cache says so: a cache made
 * since its last publication (at most a tick old) counts too, and a
 * process with nothing to give answers at once. */
static int worth_asking(const vs_ledger *h, const vs_ledger_shm *s, const vs_ledger_slot *sl, vs_trim_scope scope) {
  uint32_t t = VS_LOAD(&sl->tenant);
  if (!VS_LOAD(&sl->held)) return 0;
  if (t == h->tenant) return 1;
  if (scope == VS_TRIM_TENANT || t >= VS_LEDGER_TENANTS) return 0;
  return scope == VS_TRIM_CARD || VS_LOAD(&s->tenants[t].used) > reserve_of(h, t, h->known);
}

static int unanswered(const vs_ledger_slot *sl, uint32_t want) {
  return (int32_t)(__atomic_load_n(&sl->trim_done, __ATOMIC_SEQ_CST) - want) < 0;
}

/* Asked processes that did not answer in time (stopped: SIGSTOP, a frozen
 * cgroup, a paused container; or stuck) cannot give their caches back, so
 * those leave the others' views: free memory no request can get is not
 * free. Each owner's background thread publishes its cache again at its
 * first tick once it runs (vs_ledger_set_cache compares with the slot),
 * and answers the request then. A slot that changed owner meanwhile loses
 * a publication it makes again at its next tick. Each cache taken out is
 * an event and a line (once per publication: a cache already out is not
 * taken out again). */
static void forget_unanswered(vs_ledger *h, const int *asked, const uint32_t *want, int timeout_ms, int n) {
  vs_ledger_shm *s = enter_locked(h);
  if (!s) return;
  for (int k = 0; k < n; k++) {
    vs_ledger_slot *sl = &s->slots[asked[k]];
    uint32_t t = sl->tenant;
    uint64_t cache = sl->cache;
    if (sl->state != VS_SLOT_ACTIVE || !cache || !unanswered(sl, want[k]) || t >= VS_LEDGER_TENANTS) continue;
    set_cache_locked(s, sl, t, 0);
    add_event_locked(s, VS_EVENT_UNANSWERED, sl->pid, t, cache, s->tenants[t].used, s->tenants[t].limit);
    char b[32];
    VS_WARN("ledger of card %s: process %d (tenant '%.*s') left a request to give back its cache of %s unanswered "
            "for %d ms (stopped or frozen?): no longer counted as free until it runs again",
            s->card_id, (int)sl->pid, (int)sizeof s->tenants[t].name, s->tenants[t].name,
            vs_fmt_bytes(cache, b, sizeof b), timeout_ms);
  }
  leave_locked(h, s);
}

int vs_ledger_trim_others(vs_ledger *h, vs_trim_scope scope, uint64_t timeout_ms) {
  vs_ledger_shm *s = h ? enter(h) : NULL;
  if (!s) return 0;
  /* Lock-free: the mailbox words are atomics; a slot that changes owner
   * meanwhile answers nothing and costs the wait. */
  uint32_t want[VS_LEDGER_SLOTS];
  int asked[VS_LEDGER_SLOTS], n = 0;
  for (int i = 0; i < VS_LEDGER_SLOTS; i++) {
    vs_ledger_slot *sl = &s->slots[i];
    if (i == h->slot || VS_LOAD(&sl->state) != VS_SLOT_ACTIVE || !worth_asking(h, s, sl, scope) ||
        !vs_ledger_slot_alive(h->fd, i))
      continue;
    want[n] = __atomic_add_fetch(&sl->trim_req, 1, __ATOMIC_SEQ_CST);
    asked[n++] = i;
    vs_mailbox_nudge(s, i);
  }
  leave(h);
  uint64_t deadline = vs_mono_ns() + timeout_ms * 1000000ull;
  for (int left = n; left;) {
    left = 0;
    for (int k = 0; k < n; k++)
      if (unanswered(&s->slots[asked[k]], want[k])) left++;
    if (!left) break;
    if (vs_mono_ns() >= deadline) {
      forget_unanswered(h, asked, want, (int)timeout_ms, n);
      break;
    }
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
  }
  return n;
}

int vs_ledger_trim_asked(vs_ledger *h, uint32_t *req) {
  vs_ledger_shm *s = h ? enter(h) : NULL;
  if (!s) return 0;
  const vs_ledger_slot *sl = &s->slots[h->slot];
  uint32_t r = __atomic_load_n(&sl->trim_req, __ATOMIC_SEQ_CST);
  int asked = r != __atomic_load_n(&sl->trim_done, __ATOMIC_SEQ_CST);
  leave(h);
  *req = r;
  return asked;
}

void vs_ledger_set_cache(vs_ledger *h, uint64_t bytes) {
  if (!h || fd_of(h) < 0) return;
  /* Most publications change nothing: no lock for them. */
  const vs_ledger_slot *cur = &__atomic_load_n(&h->shm, __ATOMIC_ACQUIRE)->slots[h->slot];
  uint64_t held = VS_LOAD(&cur->held);
  if (VS_LOAD(&cur->cache) == (bytes < held ? bytes : held)) return;
  vs_ledger_shm *s = enter_locked(h);
  if (!s) return;
  vs_ledger_slot *sl = &s->slots[h->slot];
  set_cache_locked(s, sl, h->tenant, bytes < sl->held ? bytes : sl->held);
  leave_locked(h, s);
}

void vs_ledger_trim_answer(vs_ledger *h, uint32_t req) {
  vs_ledger_shm *s = h ? enter(h) : NULL;
  if (!s) return;
  __atomic_store_n(&s->slots[h->slot].trim_done, req, __ATOMIC_SEQ_CST);
  leave(h);
}

/* ---- on_limit = spill:MAX (issue 13) ------------------------------------------ */
int vs_ledger_spill(vs_ledger *h, uint64_t n, vs_spill_note *note) {
  vs_spill_note local;
  vs_spill_note *o = note ? note : &local;
  memset(o, 0, sizeof *o);
  if (!h) return -EINVAL;
  if (fd_of(h) < 0) return -ECHILD;
  o->max = h->spill_max;
  if (!h->spill_max) return 1;
  vs_ledger_shm *s = enter(h);
  if (!s) return -ECHILD;
  int r = lock_shm(s, h->fd, h->slot);
  if (r) {
    leave(h);
    return r;
  }
  vs_ledger_slot *sl = &s->slots[h->slot];
  vs_ledger_tenant *t = &s->tenants[h->tenant];
  int reclaimed = 0;
  /* Before saying no, make sure no dead process holds part of MAX. */
  if (vs_sat_add(t->spilled, n) > h->spill_max || sweep_due(s)) reclaimed = sweep_locked(h);
  o->used = t->used;
  o->limit = h->limit;
  int refused = vs_sat_add(t->spilled, n) > h->spill_max;
  if (!refused) {
    o->episode = sl->spilled == 0;
    write_begin(s);
    VS_STORE(&sl->spilled, sl->spilled + n);
    if (sl->spilled > sl->spill_peak) sl->spill_peak = sl->spilled;
    VS_STORE(&t->spilled, t->spilled + n);
    if (t->spilled > t->spill_peak) t->spill_peak = t->spilled;
    write_end(s);
    __atomic_store_n(&h->mine_spilled, sl->spilled, __ATOMIC_RELAXED);
    if (o->episode) add_event_locked(s, VS_EVENT_SPILL, h->pid, h->tenant, n, t->spilled, h->spill_max);
  }
  o->spilled = t->spilled;
  leave_locked(h, s);
  if (reclaimed) wake_waiters(s);
  return refused;
}

void vs_ledger_unspill(vs_ledger *h, uint64_t n) {
  vs_ledger_shm *s = n ? enter_locked(h) : NULL;
  if (!s) return;
  uint64_t spilled = give_back_locked(s, &s->slots[h->slot].spilled, &s->tenants[h->tenant].spilled, n);
  __atomic_store_n(&h->mine_spilled, spilled, __ATOMIC_RELAXED);
  leave_locked(h, s);
}

uint64_t vs_ledger_spill_max(const vs_ledger *h) { return h ? h->spill_max : 0; }

uint64_t vs_ledger_spilled(const vs_ledger *h) {
  return h && fd_of(h) >= 0 ? __atomic_load_n(&h->mine_spilled, __ATOMIC_RELAXED) : 0;
}

void vs_ledger_set_live(vs_ledger *h, uint64_t live) {
  if (!h || fd_of(h) < 0) return;
  /* Unchanged (a program that asks cuMemGetInfo in a loop refreshes on
   * every call): no lock to take. Read without the lock as the view reads
   * the slot; a re-attach meanwhile costs at most one refresh, which the
   * next change makes. */
  const vs_ledger_shm *s = __atomic_load_n(&h->shm, __ATOMIC_ACQUIRE);
  int slot = h->slot;
  if (slot >= 0 && VS_LOAD(&s->slots[slot].live) == live) return;
  /* Display only: skipped while a writer (or a re-attach) holds the handle. */
  if (pthread_mutex_trylock(&h->mu)) return;
  if (!h->exited) VS_STORE(&h->shm->slots[h->slot].live, live);
  pthread_mutex_unlock(&h->mu);
}

uint32_t vs_ledger_waiting_slots(const vs_ledger *h) {
  return h && fd_of(h) >= 0 ? slots_waiting(__atomic_load_n(&h->shm, __ATOMIC_ACQUIRE)) : 0;
}

uint32_t vs_ledger_waiters(const vs_ledger *h) {
  return h && fd_of(h) >= 0 ? __atomic_load_n(&__atomic_load_n(&h->shm, __ATOMIC_ACQUIRE)->waiters, __ATOMIC_RELAXED) : 0;
}

int vs_ledger_inherited(const vs_ledger *h) { return h && fd_of(h) < 0; }

/* issue 24: the process's footprint beyond what the shim counted is part of
 * its charge, so the admission rule sees it like any other byte. It is
 * memory the driver already took: charged without the rule (like
 * vs_ledger_force), and the next request meets it. */
void vs_ledger_set_overhead(vs_ledger *h, uint64_t overhead) {
  vs_ledger_shm *s = enter_locked(h);
  if (!s) return;
  vs_ledger_slot *sl = &s->slots[h->slot];
  uint64_t old = sl->overhead, held = sl->held;
  if (overhead > old) {
    add_locked(h, overhead - old, 0);
    held = sl->held;
  } else if (overhead < old) {
    held = give_back_locked(s, &sl->held, &s->tenants[h->tenant].used, old - overhead);
    cache_less_locked(s, h, 0);
    __atomic_store_n(&h->mine_held, held, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->gen, 1, __ATOMIC_SEQ_CST);
  }
  write_begin(s);
  VS_STORE(&sl->overhead, overhead < held ? overhead : held);
  write_end(s);
  __atomic_store_n(&h->mine_overhead, sl->overhead, __ATOMIC_RELAXED);
  leave_locked(h, s);
  if (overhead < old) wake_waiters(s);
}

/* Under the lock: what every tenant holds on the card. */
static uint64_t card_held_locked(const vs_ledger_shm *s) {
  uint64_t sum = 0;
  for (uint32_t t = 0; t < s->ntenants && t < VS_LEDGER_TENANTS; t++) sum += s->tenants[t].used;
  return sum;
}

int vs_ledger_drv_predict(vs_ledger *h, uint64_t *drv_free, uint64_t *held, uint64_t *ctx_cost) {
  vs_ledger_shm *s = enter_locked(h);
  if (!s) return -1;
  int rc = -1;
  uint64_t now = card_held_locked(s);
  *held = now;
  *ctx_cost = s->drv_ctx_cost;
  if (s->drv_seen_ns) {
    uint64_t base = s->drv_free_seen + s->drv_held_seen;
    *drv_free = base > now ? base - now : 0;
    rc = 0;
  }
  leave_locked(h, s);
  return rc;
}

void vs_ledger_drv_note(vs_ledger *h, uint64_t drv_free, uint64_t ctx_cost) {
  vs_ledger_shm *s = enter_locked(h);
  if (!s) return;
  uint64_t ns = vs_clock_ns(CLOCK_REALTIME);
  write_begin(s);
  VS_STORE(&s->drv_free_seen, drv_free);
  VS_STORE(&s->drv_held_seen, card_held_locked(s));
  VS_STORE(&s->drv_seen_ns, ns ? ns : 1);
  if (ctx_cost) VS_STORE(&s->drv_ctx_cost, ctx_cost);
  write_end(s);
  leave_locked(h, s);
}

void vs_ledger_drv_counted(vs_ledger *h, uint64_t n) {
  vs_ledger_shm *s = enter_locked(h);
  if (!s) return;
  if (s->drv_seen_ns) {
    write_begin(s);
    VS_STORE(&s->drv_held_seen, s->drv_held_seen + n);
    write_end(s);
  }
  leave_locked(h, s);
}

uint64_t vs_ledger_overhead(const vs_ledger *h) {
  return h && fd_of(h) >= 0 ? __atomic_load_n(&h->mine_overhead, __ATOMIC_RELAXED) : 0;
}

uint64_t vs_ledger_held(const vs_ledger *h) {
  return h && fd_of(h) >= 0 ? __atomic_load_n(&h->mine_held, __ATOMIC_RELAXED) : 0;
}

void vs_ledger_set_test_hook(vs_ledger *h, vs_ledger_hook hook) {
  if (h) h->hook = hook;
}

/* ---- View and reports -------------------------------------------------------- */
/* The books' part of the view from the ledger as it is (relaxed reads,
 * without the lock): what the tenant could still be granted, and the other
 * processes' caches (ours is the caller's). */
static void view_books(const vs_ledger *h, const vs_ledger_shm *s, uint32_t known, uint64_t *avail,
                       uint64_t *their_caches) {
  /* An entry changed name since reserve_of[] was filled: the ledger's values until the next refresh. */
  if (VS_LOAD(&s->tenant_reuses) != __atomic_load_n(&h->reuses_seen, __ATOMIC_RELAXED)) known = 0;
  uint32_t nt = VS_LOAD(&s->ntenants);
  if (nt > VS_LEDGER_TENANTS) nt = VS_LEDGER_TENANTS;
  /* Other processes' caches count as free: a refusal they could cover
   * asks them for it first (vs_ledger_trim_others). */
  const vs_ledger_tenant *mine = &s->tenants[__atomic_load_n(&h->tenant, __ATOMIC_RELAXED)];
  uint64_t caches = 0, ua = VS_LOAD(&mine->used), own = VS_LOAD(&s->slots[h->slot].cache),
           theirs = VS_LOAD(&mine->cached), others = others_of(h, known, nt, &caches);
  /* Other processes' caches, our tenant's included: as
   * vs_ledger_others_cache, in the same reading. */
  *their_caches = vs_sat_sub(vs_sat_add(caches, theirs), own);
  ua = vs_sat_sub(ua, vs_sat_sub(theirs, own));
  uint64_t by_limit = h->limit > ua ? h->limit - ua : 0;
  uint64_t taken = vs_sat_add(vs_sat_add(ua, others), h->plan.headroom);
  uint64_t by_card = h->plan.capacity > taken ? h->plan.capacity - taken : 0;
  *avail = by_limit < by_card ? by_limit : by_card;
}

/* The kept answer for key (a, b), if it is the one kept: 1 and *avail,
 * *theirs set. */
static int kept_read(vs_ledger *h, uint64_t a, uint64_t b, uint64_t *avail, uint64_t *theirs) {
  view_kept *k = &h->kept;
  uint32_t v = vs_kept_read(&k->ver);
  if (!v) return 0;
  uint64_t ka = __atomic_load_n(&k->seq_epoch, __ATOMIC_RELAXED), kb = __atomic_load_n(&k->known_reuses,
                                                                                         __ATOMIC_RELAXED);
  *avail = __atomic_load_n(&k->avail, __ATOMIC_RELAXED);
  *theirs = __atomic_load_n(&k->their_caches, __ATOMIC_RELAXED);
  return vs_kept_still(&k->ver, v) && ka == a && kb == b;
}

/* Keeps an answer read at key (a, b); skipped while another thread keeps one. */
static void kept_write(vs_ledger *h, uint64_t a, uint64_t b, uint64_t avail, uint64_t theirs) {
  view_kept *k = &h->kept;
  uint32_t odd = vs_kept_begin(&k->ver);
  if (!odd) return;
  __atomic_store_n(&k->seq_epoch, a, __ATOMIC_RELAXED);
  __atomic_store_n(&k->known_reuses, b, __ATOMIC_RELAXED);
  __atomic_store_n(&k->avail, avail, __ATOMIC_RELAXED);
  __atomic_store_n(&k->their_caches, theirs, __ATOMIC_RELAXED);
  vs_kept_end(&k->ver, odd);
}

void vs_ledger_view_caches(vs_ledger *h, uint64_t cached, uint64_t *free_bytes, uint64_t *total_bytes,
                           uint64_t *others_cache) {
  uint64_t total = h ? h->total : 0, avail = 0, their_caches = 0;
  if (h && fd_of(h) >= 0) {
    uint32_t epoch = __atomic_load_n(&h->epoch, __ATOMIC_ACQUIRE);
    const vs_ledger_shm *s = __atomic_load_n(&h->shm, __ATOMIC_ACQUIRE);
    uint32_t known = __atomic_load_n(&h->known, __ATOMIC_ACQUIRE); /* later tenants: ledger values */
    uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
    uint64_t a = (uint64_t)seq << 32 | epoch,
             b = (uint64_t)known << 32 | __atomic_load_n(&h->reuses_seen, __ATOMIC_RELAXED);
    if ((seq & 1) || !kept_read(h, a, b, &avail, &their_caches)) {
      view_books(h, s, known, &avail, &their_caches);
      /* Kept only when no write section ran meanwhile (seq) and the
       * handle still names the same mapping (epoch). */
      VS_FENCE(__ATOMIC_ACQUIRE);
      if (!(seq & 1) && VS_LOAD(&s->seq) == seq && __atomic_load_n(&h->epoch, __ATOMIC_RELAXED) == epoch)
        kept_write(h, a, b, avail, their_caches);
    }
  }
  uint64_t f = vs_sat_add(avail, cached);
  if (free_bytes) *free_bytes = f < total ? f : total;
  if (total_bytes) *total_bytes = total;
  if (others_cache) *others_cache = their_caches;
}

void vs_ledger_view(vs_ledger *h, uint64_t cached, uint64_t *free_bytes, uint64_t *total_bytes) {
  vs_ledger_view_caches(h, cached, free_bytes, total_bytes, NULL);
}

uint64_t vs_ledger_others_cache(vs_ledger *h) {
  uint64_t c = 0;
  vs_ledger_view_caches(h, 0, NULL, NULL, &c);
  return c;
}

void vs_ledger_report_refusal(vs_ledger *h, const vs_refusal *why) {
  if (!h || !why || why->kind == VS_REFUSE_NONE) return;
  vs_ledger_shm *s = enter(h);
  if (!s) return;
  /* h->mu also guards this handle's rate-limit fields (threads share it). */
  if (lock_shm(s, h->fd, h->slot) == 0) {
    add_event_locked(s, VS_EVENT_LIMIT, h->pid, h->tenant, why->request, why->used, why->limit);
    unlock_shm(s, h->fd, h->slot);
  }
  uint64_t now = vs_mono_ns();
  if (h->last_refusal_log_ns && now - h->last_refusal_log_ns < REFUSAL_LOG_EVERY_NS) {
    h->refusals_unlogged++;
    leave(h);
    return;
  }
  h->last_refusal_log_ns = now;
  uint64_t unlogged = h->refusals_unlogged;
  h->refusals_unlogged = 0;
  leave(h);
  char rq[32], us[32], li[32], ot[32], hr[32], ca[32], more[64] = "";
  vs_fmt_bytes(why->request, rq, sizeof rq);
  vs_fmt_bytes(why->used, us, sizeof us);
  vs_bytes_or_none(why->limit, li, sizeof li);
  vs_fmt_bytes(why->others, ot, sizeof ot);
  vs_fmt_bytes(why->headroom, hr, sizeof hr);
  vs_fmt_bytes(why->capacity, ca, sizeof ca);
  if (unlogged) snprintf(more, sizeof more, " (%llu more refusals in the last second)", (unsigned long long)unlogged);
  vs_refusal_kind c = why->kind == VS_REFUSE_TIMEOUT ? why->cause : why->kind;
  const char *waited = why->kind == VS_REFUSE_TIMEOUT ? " after waiting" : "";
  if (c == VS_REFUSE_LIMIT)
    VS_WARN("tenant '%s' on card %d: refused %s%s: usage %s + request would exceed the tenant's limit %s "
            "(condition: limit)%s",
            h->tenant_name, h->plan.card, rq, waited, us, li, more);
  else
    VS_WARN("tenant '%s' on card %d: refused %s%s: usage %s (limit %s) + request + other tenants' usage or "
            "reservations %s + headroom %s would exceed the card's %s (condition: reservations/capacity)%s",
            h->tenant_name, h->plan.card, rq, waited, us, li, ot, hr, ca, more);
}

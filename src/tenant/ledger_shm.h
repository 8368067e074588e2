/* The layout of a ledger file (internal to the tenant concern).
 *
 * Invariants, for every tenant t, whenever no writer is inside the lock:
 *   tenants[t].used == sum of slots[s].held over ACTIVE slots s with tenant t,
 *   tenants[t].cached == sum of slots[s].cache over the same slots, and
 *   slots[s].cache <= slots[s].held;
 *   waiters == sum of slots[s].waiting over ACTIVE slots, but for threads
 *   between their two counts (ledger.c, wait_loop).
 * Slots are the source of truth: a writer that dies inside the lock, or is
 * stopped there past the lock's lease (ledger_lock.h), may leave a tenant
 * total stale, and the process that takes the lock over rebuilds totals
 * from slots.
 * A slot is ACTIVE exactly while its owner holds the OFD lock on byte
 * VS_SLOT_LOCK_BASE + slot; an ACTIVE slot whose byte is unlocked belongs to
 * a dead process and is reclaimed.
 * seq is odd while a writer changes anything readers copy.
 * Reservations end with their last process (issue 10): for every tenant t,
 *   tenants[t].reserve_holders == number of ACTIVE slots s whose
 *   reserve_mask has bit t (their plan reserves memory for t);
 * a process whose own plan does not name t counts tenants[t].reserve only
 * while that number is above 0 (rebuilt from slots like the totals).
 * Tenant entries (version 5): an index names one tenant for as long as
 * anything uses the entry (an ACTIVE slot with that tenant, dead or alive;
 * a slot whose reserve_mask has its bit; used, spilled or reserve_holders
 * above 0). Only when the table is full may an entry nothing uses be given
 * to a new name (ledger.c, take_unused_locked); that bumps tenant_reuses,
 * so a process's cached per-index facts (reserve_of[]) are refilled, and
 * events naming the index are re-pointed at VS_EVENT_NO_TENANT.
 * Changing this layout: bump VS_LEDGER_VERSION. */
#ifndef VS_TENANT_LEDGER_SHM_H
#define VS_TENANT_LEDGER_SHM_H
#include <stdint.h>

#include "config.h"
#include "fence.h"
#include "filelock.h" /* vs_ledger_slot_alive */
#include "plat_types.h" /* vs_plat_xlock */

#include <stdint.h>

/* The ledger's lock word (ledger_lock.h takes and gives it). */
typedef struct vs_ledger_lockw {
  uint32_t word;
  uint32_t waiters;
} vs_ledger_lockw;

#define VS_LEDGER_MAGIC 0x5245474445534c56ull /* "VSLEDGER" */
#define VS_LEDGER_VERSION 10u    /* 3: spilled bytes per tenant and slot, event `spill` (issue 13); 4: reserve_holders, reserve_mask (issue 10); 5: unused tenant entries are reused when the table is full (tenant_reuses); 6: the bounded lock word (ledger_lock.h), `damaged`, the trim mailbox (issue 23); 7: overhead per slot (issue 24); 8: the driver reading drv_* (issue 24, the footprint without NVML); 9: cache per slot and cached per tenant, waiting per slot; 10: event `unanswered` */
#define VS_LEDGER_SLOTS 256
#define VS_LEDGER_TENANTS 64
#define VS_LEDGER_EVENTS 256
#define VS_SLOT_LOCK_BASE (1ll << 30) /* lock bytes lie past the end of the file */

enum { VS_SLOT_FREE = 0, VS_SLOT_ACTIVE = 1 };
/* An event's tenant after its entry went to another name (see above). */
#define VS_EVENT_NO_TENANT 0xffffu
enum { VS_EVENT_WARN = 1, VS_EVENT_LIMIT = 2, VS_EVENT_RECLAIM = 3, VS_EVENT_SPILL = 4, VS_EVENT_UNANSWERED = 5 };

typedef struct vs_ledger_tenant {
  char name[VS_NAME_MAX];
  uint64_t reserve;          /* as set by the newest process whose plan names the tenant */
  uint64_t limit;            /* VS_NO_LIMIT when none */
  uint64_t used;             /* sum of its slots' held */
  uint64_t peak;
  uint64_t last_warn_ns;     /* CLOCK_REALTIME of the last warn_at line (rate limit) */
  uint64_t generation;       /* config generation of reserve/limit */
  /* on_limit = spill:MAX (issue 13). Host bytes, never part of `used`:
   * spilled == sum of its ACTIVE slots' spilled (the same invariant as
   * used/held, rebuilt the same way); spill_max as set by the newest
   * process whose plan names the tenant (0 = it does not spill). */
  uint64_t spilled;
  uint64_t spill_peak;
  uint64_t spill_max;
  /* issue 10: live processes whose config reserves memory for the tenant
   * (see the invariant above); reserve applies to others only while > 0. */
  uint32_t reserve_holders;
  uint32_t tenant_pad;
  /* The part of `used` its processes' arenas would give back when asked
   * (their cache: the trim mailbox below). Others' views count it as
   * free, and a refusal it could cover asks for it first. */
  uint64_t cached;
} vs_ledger_tenant;

typedef struct vs_ledger_slot {
  uint32_t state;
  int32_t pid;               /* as seen by the process itself (display only) */
  uint64_t start_time;       /* vs_plat_self_start_time: tells pid reuse apart */
  uint32_t tenant;
  uint32_t pad;
  uint64_t held;             /* device bytes charged by the process */
  uint64_t live;             /* bytes of its live allocations (reported) */
  uint64_t peak;
  uint64_t generation;       /* config generation the process runs */
  uint64_t attach_ns;        /* CLOCK_REALTIME */
  /* issue 10: bit t set when this process's plan reserves memory for
   * ledger tenant t (VS_LEDGER_TENANTS <= 64); counted in reserve_holders. */
  uint64_t reserve_mask;
  /* Dump mailbox (ledger_mailbox.h), used without the lock: a tool bumps
   * dump_req and wakes it (futex); the process's background thread writes
   * a dump, publishes dump_path (dump_pub odd while writing), then sets
   * dump_done to the request number it answered and wakes that. */
  uint32_t dump_req;
  uint32_t dump_done;
  uint32_t dump_pub;
  uint32_t dump_pad;
  char dump_path[VS_PATH_MAX + 128];
  /* on_limit = spill (issue 13): host bytes this process serves in place of
   * device memory. Not in `held`; reclaimed with the slot at death. */
  uint64_t spilled;
  uint64_t spill_peak;
  /* Trim mailbox (issue 23), used without the lock: a process about to
   * refuse an allocation that this one's cache could let in (one of the
   * same tenant, or any whose refusal is the card's) bumps trim_req and wakes the
   * owner (on dump_req's wait); the owner's background thread gives its
   * arena cache on the card back, then sets trim_done to the request
   * number it answered (vs_ledger_trim_others). */
  uint32_t trim_req;
  uint32_t trim_done;
  /* issue 24: the part of `held` that is the process's footprint beyond
   * what the shim counted (its contexts' own memory, as the driver reports
   * it: docs/nvml.md, "True footprint"); always <= held. */
  uint64_t overhead;
  /* What the process's arenas on the card would give back on a trim ask
   * (vs_arena_reclaimable), as it last published it: at most `held`;
   * lowered at once when it gives memory back, raised by its background
   * thread (vs_ledger_set_cache). */
  uint64_t cache;
  /* Its threads now counted in the ledger's `waiters` (on_limit = wait):
   * what the sweep takes off `waiters` when the process died waiting, so a
   * waiter killed with SIGKILL does not leave every process on the card
   * giving its cache back for ever. */
  uint32_t waiting;
  uint32_t waiting_pad;
} vs_ledger_slot;

typedef struct vs_ledger_event {
  uint64_t time_ns;          /* CLOCK_REALTIME */
  int32_t pid;
  uint16_t tenant;
  uint16_t kind;
  uint64_t bytes;            /* request (limit, spill), usage reached (warn), reclaimed (reclaim) */
  uint64_t used;             /* the tenant's usage; for spill: its spilled bytes after the request */
  uint64_t limit;            /* the tenant's limit; for spill: MAX */
} vs_ledger_event;

typedef struct vs_ledger_shm {
  uint64_t magic;            /* written last at creation */
  uint32_t version;
  uint32_t size;
  /* Issue 23: the lock every writer takes (ledger_lock.h: bounded, taken
   * over from a dead, stopped or lying holder). damaged: set by a process
   * that found a word no holder could have written; every process then
   * moves the file aside and carries its usage into a new one, as for a
   * bad header (in the header: read before mapping, like magic). */
  vs_ledger_lockw lk;
  uint32_t damaged;
  uint32_t lock_pad;
  /* Not a lock any more: only its key names this ledger's wake-up events
   * on Windows (wake.h, vs_plat_xlock_key); made with the file. */
  vs_plat_xlock lock;
  uint32_t seq;              /* seqlock for lock-free readers */
  uint32_t gen;              /* futex word: bumped whenever memory is given back */
  uint32_t waiters;          /* threads in wait mode, each also in its slot's `waiting` (a dead one's are taken off) */
  uint32_t ntenants;         /* entries appended until full; then unused ones are reused (see above) */
  uint32_t tenant_reuses;    /* bumped (under the lock, in a write section) whenever an entry changes name */
  uint32_t reuse_next;       /* where the search for an unused entry starts: after the last one reused */
  int32_t card_index;
  int32_t plan_pid;          /* the newest process that set the plan below */
  char card_id[VS_NAME_MAX];
  uint64_t capacity, headroom, plan_generation;
  uint64_t last_sweep_ns;    /* CLOCK_MONOTONIC */
  uint64_t event_head;       /* events written so far; slot = head % VS_LEDGER_EVENTS */
  /* Issue 24, the true footprint without NVML: the driver's free memory on
   * the card as a process last read it (cuMemGetInfo in a context of its
   * own), with the bytes every slot held then (drv_held_seen). A new
   * context's cost is that reading, moved by what the ledger took or gave
   * back since, less the free memory after it. drv_seen_ns 0: no reading.
   * drv_ctx_cost: what the last context so measured took (0: none yet). */
  uint64_t drv_free_seen, drv_held_seen, drv_seen_ns, drv_ctx_cost;
  vs_ledger_tenant tenants[VS_LEDGER_TENANTS];
  vs_ledger_slot slots[VS_LEDGER_SLOTS];
  vs_ledger_event events[VS_LEDGER_EVENTS];
} vs_ledger_shm;

/* Relaxed atomic access to fields read without the lock. */
#define VS_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define VS_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
/* The seqlock's fences: VS_FENCE (fence.h). */

/* "card-<id>.ledger" with id reduced to [A-Za-z0-9_-]; 0 or -1 if too long. */
int vs_ledger_file_name(const char *card_id, char *out, size_t len);
/* Opens dir (creating it 0700) refusing symlinks, world-writable dirs and
 * dirs of another non-root user (issue 10). */
int vs_ledger_open_dir(const char *dir, int create, char *err, size_t errlen);
/* 0 when the opened ledger file may be used: a regular file, not
 * world-writable, ours or root's (or a group member's inside a root-owned
 * setgid directory); our own is made group-writable (0660). -1 with err. */
int vs_ledger_check_owner(int fd, const char *path, char *err, size_t errlen);
/* Whether the slot's owner still holds its lock (fd: any descriptor of the file). */
static inline int vs_ledger_slot_alive(int fd, int slot) {
  return vs_plat_range_held(fd, VS_SLOT_LOCK_BASE + slot, 1); /* cannot tell: alive, never steal */
}
#endif

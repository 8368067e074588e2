/* Reading ledgers without taking part: what `vramshim status` uses.
 * A snapshot is a consistent copy (seqlock), taken without any lock a
 * writer waits on. Usage of processes found dead is left out of the tenant
 * totals (they are reclaimed at the next ledger activity) and listed. */
#ifndef VS_TENANT_LEDGER_READ_H
#define VS_TENANT_LEDGER_READ_H
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define VS_SNAP_TENANTS 64
#define VS_SNAP_PROCS 256
#define VS_SNAP_EVENTS 256

#define VS_SNAP_RESERVE_PIDS 8

typedef struct vs_snap_tenant {
  char name[VS_NAME_MAX];
  uint64_t reserve, limit;      /* limit VS_NO_LIMIT when none; reserve 0 once no live config holds it */
  /* Where the reservation comes from: the live processes whose config
   * reserves memory for the tenant (the first VS_SNAP_RESERVE_PIDS pids). */
  int reserve_procs;
  int reserve_pids[VS_SNAP_RESERVE_PIDS];
  uint64_t used;                /* held by its live processes */
  uint64_t recorded;            /* the ledger's running total (= used once the dead are reclaimed) */
  uint64_t peak;
  int nprocs;
  uint64_t spilled;             /* host bytes its live processes serve in place of device memory (issue 13) */
  uint64_t spill_peak, spill_max; /* spill_max 0: on_limit is not spill */
  uint64_t overhead;            /* of used: its live processes' footprint beyond the shim's count (issue 24) */
  uint64_t cached;              /* of used: what its live processes' arenas would give back when asked */
} vs_snap_tenant;

typedef struct vs_snap_proc {
  int pid;
  uint64_t start_time;
  char tenant[VS_NAME_MAX];
  uint64_t held, live, peak;
  uint64_t generation;
  uint64_t attach_ns;
  int alive;                    /* 0: dead, its usage not yet reclaimed */
  uint64_t spilled, spill_peak; /* host bytes served in place of device memory (issue 13) */
  uint64_t overhead;            /* of held: footprint beyond what the shim counted (issue 24) */
  uint64_t cached;              /* of held: what its arenas would give back when asked (as it last published) */
} vs_snap_proc;

typedef struct vs_snap_event {
  uint64_t time_ns;
  int pid;
  char tenant[VS_NAME_MAX];
  const char *kind;             /* one of vs_snap_event_kinds */
  uint64_t bytes, used, limit;
} vs_snap_event;

/* Every kind an event may have, VS_SNAP_EVENT_KINDS of them: "warn",
 * "limit", "reclaim", "spill", "unanswered". */
#define VS_SNAP_EVENT_KINDS 5
extern const char *const vs_snap_event_kinds[VS_SNAP_EVENT_KINDS];

typedef struct vs_ledger_snapshot {
  char card_id[VS_NAME_MAX];
  int card_index;
  uint64_t capacity, headroom, generation; /* the newest process's plan */
  int consistent;               /* 0 when a writer kept changing it (or died mid-write) */
  int ntenants, nprocs, nevents;
  int generations;              /* distinct config generations among live processes */
  uint64_t dead_bytes;          /* held by dead processes, not yet reclaimed */
  uint64_t dead_spilled;        /* spilled by dead processes, not yet reclaimed (issue 13) */
  vs_snap_tenant tenants[VS_SNAP_TENANTS];
  vs_snap_proc procs[VS_SNAP_PROCS];
  vs_snap_event events[VS_SNAP_EVENTS]; /* oldest first */
} vs_ledger_snapshot;

/* Card ids with a ledger file in dir, sorted; returns how many (<= max), or
 * -1 with err when the dir cannot be read. */
int vs_ledger_list(const char *dir, char ids[][VS_NAME_MAX], int max, char *err, size_t errlen);
/* The default ledger dir: VS_DEFAULT_LEDGER_DIR when usable (made if
 * missing and allowed), else a per-user fallback (*fallback = 1: other
 * users' processes are not counted). -1 when the default exists but may
 * not be trusted (another user's, world-writable, a symlink). */
int vs_ledger_default_dir(char *out, size_t len, int *fallback);
/* 0, or -1 with err. */
int vs_ledger_snapshot_read(const char *dir, const char *card_id, vs_ledger_snapshot *out, char *err, size_t errlen);
#endif

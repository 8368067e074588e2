/* The history store of `vramshim record` (issue 26): one SQLite database.
 *
 * Tables (schema version 1; docs/history.md):
 *   samples(t, card, tenant, pid, used, cached, spilled, overhead, lim, reserve)
 *       raw samples, t in Unix ms; pid 0 is the tenant's total on the card,
 *       other rows one process each; used = device bytes held, cached =
 *       held - live; lim NULL when the tenant has no limit. Kept 14 days.
 *   agg(level, t, card, tenant, n, used_min, used_mean, used_max, cached_min,
 *       cached_mean, cached_max, spilled_max, lim, reserve)
 *       tenant totals per hour (level 1, kept 90 days) and per day (level 2,
 *       kept 366 days); t is the bucket's start, n the raw samples in it.
 *   events(time_ns, card, tenant, pid, kind, bytes, used, lim)
 *       every ledger event (warn, limit = a refusal, reclaim, spill), once.
 *   actions(t, card, tenant, event, program, status, exit_code, duration_ms, output)
 *       every threshold action run: status ok, failed, timeout, not-started.
 *   cards(card, card_index, capacity, headroom, t)
 *       each card as last seen (t): its index, so `history --card 0` works.
 *   meta(key, value): the schema version.
 *
 * WAL journal, synchronous = NORMAL: each sampling pass is one transaction,
 * so a recorder killed at any point loses at most the pass it was in. One
 * writer per database: it holds a lock on FILE.lock (dropped by the system
 * when it dies); another recorder is refused. A database SQLite finds
 * damaged is moved aside (FILE.damaged-DATE) with a message, never reset. */
#ifndef VS_HISTORY_STORE_H
#define VS_HISTORY_STORE_H
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#define VS_STORE_RAW_DAYS 14
#define VS_STORE_HOURLY_DAYS 90
#define VS_STORE_DAILY_DAYS 366
#define VS_STORE_HOUR_MS 3600000ll
#define VS_STORE_DAY_MS 86400000ll
#define VS_STORE_BUSY (-2)

typedef struct vs_store {
  sqlite3 *db;
  int lock_fd;                  /* writer: the held FILE.lock; -1 for readers */
  char path[512];
} vs_store;

/* The database to use when none is given: $VRAMSHIM_HISTORY_DB, else
 * /var/lib/vramshim/history.db when usable, else a per-user one
 * (*fallback = 1). */
void vs_store_default_path(int for_writing, char *out, size_t len, int *fallback);

/* For the recorder: creates the file (and its folder, 0755) when missing;
 * moves a damaged one aside (note says so); takes the writer's lock.
 * 0; VS_STORE_BUSY when another recorder writes it; -1 with err. */
int vs_store_open_writer(const char *path, vs_store *s, char *note, size_t notelen, char *err, size_t errlen);
/* Read-only, for history, status and the tests: 0, or -1 with err. */
int vs_store_open_reader(const char *path, vs_store *s, char *err, size_t errlen);
void vs_store_close(vs_store *s);
/* Writer: 1 while the path still names the database and lock it holds; 0
 * once they were removed or replaced under it (then: close, open again). */
int vs_store_still_there(const vs_store *s);

int vs_store_exec(vs_store *s, const char *sql, char *err, size_t errlen);
/* One sample row; lim UINT64_MAX = none. */
int vs_store_sample(vs_store *s, int64_t t_ms, const char *card, const char *tenant, int pid, uint64_t used,
                    uint64_t cached, uint64_t spilled, uint64_t overhead, uint64_t lim, uint64_t reserve);
/* The card as seen in this pass. */
int vs_store_card(vs_store *s, int64_t t_ms, const char *card, int card_index, uint64_t capacity, uint64_t headroom);
/* One ledger event: 1 when new, 0 when already stored, -1 on error. */
int vs_store_event(vs_store *s, uint64_t time_ns, const char *card, const char *tenant, int pid, const char *kind,
                   uint64_t bytes, uint64_t used, uint64_t lim);
int vs_store_action(vs_store *s, int64_t t_ms, const char *card, const char *tenant, const char *event,
                    const char *program, const char *status, int exit_code, int64_t duration_ms, const char *output);
/* Hourly and daily aggregates of every complete hour and day before now
 * that the finer level still holds, then pruning past the retention
 * above. Run at start and once an hour. 0, or -1 with err. */
int vs_store_maintain(vs_store *s, int64_t now_ms, char *err, size_t errlen);
#endif

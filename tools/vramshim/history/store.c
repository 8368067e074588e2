#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "action.h"   /* vs_plat_default_state_file */
#include "dir.h"
#include "file.h"
#include "filelock.h"
#include "timeutil.h"

#define SCHEMA_VERSION "1"

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS samples(t INTEGER NOT NULL, card TEXT NOT NULL, tenant TEXT NOT NULL,"
    " pid INTEGER NOT NULL, used INTEGER NOT NULL, cached INTEGER NOT NULL, spilled INTEGER NOT NULL,"
    " overhead INTEGER NOT NULL, lim INTEGER, reserve INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS samples_by_tenant ON samples(tenant, card, pid, t);"
    "CREATE INDEX IF NOT EXISTS samples_by_time ON samples(t);"
    "CREATE TABLE IF NOT EXISTS agg(level INTEGER NOT NULL, t INTEGER NOT NULL, card TEXT NOT NULL,"
    " tenant TEXT NOT NULL, n INTEGER NOT NULL, used_min INTEGER NOT NULL, used_mean REAL NOT NULL,"
    " used_max INTEGER NOT NULL, cached_min INTEGER NOT NULL, cached_mean REAL NOT NULL, cached_max INTEGER NOT NULL,"
    " spilled_max INTEGER NOT NULL, lim INTEGER, reserve INTEGER NOT NULL, PRIMARY KEY(level, card, tenant, t));"
    "CREATE TABLE IF NOT EXISTS events(time_ns INTEGER NOT NULL, card TEXT NOT NULL, tenant TEXT NOT NULL,"
    " pid INTEGER NOT NULL, kind TEXT NOT NULL, bytes INTEGER NOT NULL, used INTEGER NOT NULL, lim INTEGER,"
    " UNIQUE(card, time_ns, pid, kind, bytes));"
    "CREATE INDEX IF NOT EXISTS events_by_tenant ON events(tenant, time_ns);"
    "CREATE TABLE IF NOT EXISTS actions(t INTEGER NOT NULL, card TEXT NOT NULL, tenant TEXT NOT NULL,"
    " event TEXT NOT NULL, program TEXT NOT NULL, status TEXT NOT NULL, exit_code INTEGER,"
    " duration_ms INTEGER NOT NULL, output TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS cards(card TEXT PRIMARY KEY, card_index INTEGER NOT NULL, capacity INTEGER NOT NULL,"
    " headroom INTEGER NOT NULL, t INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO meta VALUES('schema', '" SCHEMA_VERSION "');";

void vs_store_default_path(int for_writing, char *out, size_t len, int *fallback) {
  const char *env = getenv("VRAMSHIM_HISTORY_DB");
  *fallback = 0;
  if (env && *env) snprintf(out, len, "%s", env);
  else vs_plat_default_state_file("history.db", for_writing, out, len, fallback);
}

int vs_store_exec(vs_store *s, const char *sql, char *err, size_t errlen) {
  char *msg = NULL;
  int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "history database %s: %s", s->path, msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    return -1;
  }
  return 0;
}

static int damaged_code(int rc) { return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB; }

/* Opens, sets WAL, checks the pages, makes the schema. 0, 1 when SQLite
 * calls it damaged (reason in err), -1 on another error. */
static int open_checked(vs_store *s, char *err, size_t errlen) {
  int rc = sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "history database %s: %s", s->path, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
    sqlite3_close(s->db);
    s->db = NULL;
    return damaged_code(rc) ? 1 : -1;
  }
  sqlite3_busy_timeout(s->db, 5000);
  char *msg = NULL;
  rc = sqlite3_exec(s->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, &msg);
  if (rc == SQLITE_OK) {
    sqlite3_free(msg);
    msg = NULL;
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check", -1, &st, NULL);
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(st);
      if (rc == SQLITE_ROW) {
        const char *r = (const char *)sqlite3_column_text(st, 0);
        if (!r || strcmp(r, "ok")) {
          snprintf(err, errlen, "history database %s fails its check: %s", s->path, r ? r : "?");
          sqlite3_finalize(st);
          return 1;
        }
        rc = SQLITE_OK;
      }
    }
    sqlite3_finalize(st);
  }
  if (rc == SQLITE_OK) rc = sqlite3_exec(s->db, schema_sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "history database %s: %s", s->path, msg ? msg : sqlite3_errmsg(s->db));
    sqlite3_free(msg);
    return damaged_code(rc) ? 1 : -1;
  }
  return 0;
}

/* FILE -> FILE.damaged-YYYYMMDD-HHMMSS, its -wal and -shm beside it. */
static int move_aside(const char *path, char *to, size_t tolen) {
  time_t now = time(NULL);
  struct tm tm;
  char stamp[32];
  vs_plat_gmtime(now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  snprintf(to, tolen, "%s.damaged-%s", path, stamp);
  if (vs_plat_rename(path, to)) return -1;
  static const char *const sides[] = {"-wal", "-shm"};
  for (int i = 0; i < 2; i++) {
    char a[704], b[704];
    snprintf(a, sizeof a, "%s%s", path, sides[i]);
    snprintf(b, sizeof b, "%s%s", to, sides[i]);
    if (access(a, F_OK) == 0) vs_plat_rename(a, b);
  }
  return 0;
}

/* The folder of path, made owner-only when missing (the package makes
 * /var/lib/vramshim; a per-user fallback is made here). */
static int make_parent(const char *path, char *err, size_t errlen) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  char *bslash = strrchr(dir, '\\');
  if (bslash && (!slash || bslash > slash)) slash = bslash;
  if (!slash || slash == dir) return 0;
  *slash = 0;
  if (access(dir, F_OK) == 0) return 0;
  /* Missing, so made here, owner-only: it is the folder itself (used). */
  char used[600];
  int fd = vs_plat_own_dir_open(dir, used, sizeof used, err, errlen);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

int vs_store_open_writer(const char *path, vs_store *s, char *note, size_t notelen, char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  s->lock_fd = -1;
  if (note && notelen) note[0] = 0;
  if (strlen(path) + 32 > sizeof s->path) {
    snprintf(err, errlen, "history database path too long: %s", path);
    return -1;
  }
  snprintf(s->path, sizeof s->path, "%s", path);
  if (make_parent(path, err, errlen)) return -1;
  char lock[600];
  snprintf(lock, sizeof lock, "%s.lock", path);
  s->lock_fd = vs_plat_open_regular(lock, O_RDWR | O_CREAT, 0644);
  if (s->lock_fd < 0) {
    snprintf(err, errlen, "history database %s: cannot open its lock file %s: %s", path, lock,
             vs_plat_open_strerror(errno));
    return -1;
  }
  if (vs_plat_range_trylock(s->lock_fd, 0, 1)) {
    close(s->lock_fd);
    s->lock_fd = -1;
    snprintf(err, errlen, "history database %s: another recorder is writing it (it holds %s); this one exits", path,
             lock);
    return VS_STORE_BUSY;
  }
  int r = open_checked(s, err, errlen);
  if (r == 1) {
    /* Damaged: moved aside for the operator (and for SQLite's .recover),
     * never silently reset. */
    char to[600], why[512];
    snprintf(why, sizeof why, "%s", err);
    sqlite3_close(s->db);
    s->db = NULL;
    if (move_aside(path, to, sizeof to)) {
      snprintf(err, errlen, "%s; cannot move it aside: %s", why, strerror(errno));
      vs_store_close(s);
      return -1;
    }
    if (note)
      snprintf(note, notelen, "%s; moved it aside to %s and started a new database (recover with sqlite3 %s .recover)",
               why, to, to);
    r = open_checked(s, err, errlen);
  }
  if (r) {
    vs_store_close(s);
    return -1;
  }
  return 0;
}

int vs_store_open_reader(const char *path, vs_store *s, char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  s->lock_fd = -1;
  snprintf(s->path, sizeof s->path, "%s", path);
  if (access(path, R_OK)) {
    snprintf(err, errlen, "history database %s: %s (is `vramshim record` running? --db FILE names another)", path,
             strerror(errno));
    return -1;
  }
  /* Read-only: a reader sees the recorder's committed passes (WAL) and
   * never writes. */
  int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READONLY, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(s->db, 5000);
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'schema'", -1, &st, NULL);
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(st) == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(st, 0), SCHEMA_VERSION)
               ? SQLITE_OK
               : SQLITE_MISMATCH;
      sqlite3_finalize(st);
    }
  }
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "history database %s: %s", path,
             rc == SQLITE_MISMATCH ? "not a vramshim history of this version"
                                   : s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
    vs_store_close(s);
    return -1;
  }
  return 0;
}

int vs_store_still_there(const vs_store *s) {
  char lock[600];
  snprintf(lock, sizeof lock, "%s.lock", s->path);
  return s->lock_fd < 0 || (vs_plat_path_is_file(lock, s->lock_fd) == 1 && access(s->path, F_OK) == 0);
}

void vs_store_close(vs_store *s) {
  if (s->db) sqlite3_close(s->db);
  s->db = NULL;
  if (s->lock_fd >= 0) close(s->lock_fd);
  s->lock_fd = -1;
}

static void bind_lim(sqlite3_stmt *st, int i, uint64_t lim) {
  if (lim == UINT64_MAX) sqlite3_bind_null(st, i);
  else sqlite3_bind_int64(st, i, (sqlite3_int64)lim);
}

static int step_done(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 0 : -1;
}

int vs_store_sample(vs_store *s, int64_t t_ms, const char *card, const char *tenant, int pid, uint64_t used,
                    uint64_t cached, uint64_t spilled, uint64_t overhead, uint64_t lim, uint64_t reserve) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "INSERT INTO samples VALUES(?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL)) return -1;
  sqlite3_bind_int64(st, 1, t_ms);
  sqlite3_bind_text(st, 2, card, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 3, tenant, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 4, pid);
  sqlite3_bind_int64(st, 5, (sqlite3_int64)used);
  sqlite3_bind_int64(st, 6, (sqlite3_int64)cached);
  sqlite3_bind_int64(st, 7, (sqlite3_int64)spilled);
  sqlite3_bind_int64(st, 8, (sqlite3_int64)overhead);
  bind_lim(st, 9, lim);
  sqlite3_bind_int64(st, 10, (sqlite3_int64)reserve);
  return step_done(st);
}

int vs_store_card(vs_store *s, int64_t t_ms, const char *card, int card_index, uint64_t capacity, uint64_t headroom) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO cards VALUES(?,?,?,?,?)", -1, &st, NULL)) return -1;
  sqlite3_bind_text(st, 1, card, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 2, card_index);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)capacity);
  sqlite3_bind_int64(st, 4, (sqlite3_int64)headroom);
  sqlite3_bind_int64(st, 5, t_ms);
  return step_done(st);
}

int vs_store_event(vs_store *s, uint64_t time_ns, const char *card, const char *tenant, int pid, const char *kind,
                   uint64_t bytes, uint64_t used, uint64_t lim) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "INSERT OR IGNORE INTO events VALUES(?,?,?,?,?,?,?,?)", -1, &st, NULL)) return -1;
  sqlite3_bind_int64(st, 1, (sqlite3_int64)time_ns);
  sqlite3_bind_text(st, 2, card, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 3, tenant, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 4, pid);
  sqlite3_bind_text(st, 5, kind, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 6, (sqlite3_int64)bytes);
  sqlite3_bind_int64(st, 7, (sqlite3_int64)used);
  bind_lim(st, 8, lim);
  if (step_done(st)) return -1;
  return sqlite3_changes(s->db) > 0;
}

int vs_store_action(vs_store *s, int64_t t_ms, const char *card, const char *tenant, const char *event,
                    const char *program, const char *status, int exit_code, int64_t duration_ms, const char *output) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "INSERT INTO actions VALUES(?,?,?,?,?,?,?,?,?)", -1, &st, NULL)) return -1;
  sqlite3_bind_int64(st, 1, t_ms);
  sqlite3_bind_text(st, 2, card, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 3, tenant, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 4, event, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 5, program, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 6, status, -1, SQLITE_TRANSIENT);
  if (exit_code == INT32_MIN) sqlite3_bind_null(st, 7);
  else sqlite3_bind_int(st, 7, exit_code);
  sqlite3_bind_int64(st, 8, duration_ms);
  sqlite3_bind_text(st, 9, output, -1, SQLITE_TRANSIENT);
  return step_done(st);
}

/* Runs sql with ?1 = a, ?2 = b. */
static int run2(vs_store *s, const char *sql, int64_t a, int64_t b) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL)) return -1;
  sqlite3_bind_int64(st, 1, a);
  sqlite3_bind_int64(st, 2, b);
  return step_done(st);
}

/* Hourly aggregates of every complete hour the raw samples still hold,
 * daily ones of every complete day the hourly ones still hold, written
 * again at each pass (INSERT OR REPLACE: a late or inserted sample of a
 * kept hour is counted); then pruning, at whole hours and days so that the
 * oldest kept hour (day) is never a partial one. A period past its
 * retention keeps the aggregate made while it was whole. */
int vs_store_maintain(vs_store *s, int64_t now_ms, char *err, size_t errlen) {
  int64_t hour_end = now_ms / VS_STORE_HOUR_MS * VS_STORE_HOUR_MS;
  int64_t day_end = now_ms / VS_STORE_DAY_MS * VS_STORE_DAY_MS;
  int64_t raw_cut = (now_ms - VS_STORE_RAW_DAYS * VS_STORE_DAY_MS) / VS_STORE_HOUR_MS * VS_STORE_HOUR_MS;
  int64_t hourly_cut = (now_ms - VS_STORE_HOURLY_DAYS * VS_STORE_DAY_MS) / VS_STORE_DAY_MS * VS_STORE_DAY_MS;
  int64_t year = now_ms - VS_STORE_DAILY_DAYS * VS_STORE_DAY_MS;
  if (vs_store_exec(s, "BEGIN IMMEDIATE", err, errlen)) return -1;
  int bad = 0;
  bad |= run2(s,
              "INSERT OR REPLACE INTO agg SELECT 1, t / 3600000 * 3600000 AS b, card, tenant, count(*), min(used),"
              " avg(used), max(used), min(cached), avg(cached), max(cached), max(spilled), max(lim), max(reserve)"
              " FROM samples WHERE pid = 0 AND t >= ?1 AND t < ?2 GROUP BY b, card, tenant",
              (int64_t)0, hour_end);
  bad |= run2(s,
              "INSERT OR REPLACE INTO agg SELECT 2, t / 86400000 * 86400000 AS b, card, tenant, sum(n),"
              " min(used_min), sum(used_mean * n) / sum(n), max(used_max), min(cached_min),"
              " sum(cached_mean * n) / sum(n), max(cached_max), max(spilled_max), max(lim), max(reserve)"
              " FROM agg WHERE level = 1 AND t >= ?1 AND t < ?2 GROUP BY b, card, tenant",
              (int64_t)0, day_end);
  bad |= run2(s, "DELETE FROM samples WHERE t < ?1 AND ?2 = ?2", raw_cut, 0);
  bad |= run2(s, "DELETE FROM agg WHERE level = 1 AND t < ?1 AND ?2 = ?2", hourly_cut, 0);
  bad |= run2(s, "DELETE FROM agg WHERE level = 2 AND t < ?1 AND ?2 = ?2", year, 0);
  bad |= run2(s, "DELETE FROM events WHERE time_ns < ?1 * 1000000 AND ?2 = ?2", year, 0);
  bad |= run2(s, "DELETE FROM actions WHERE t < ?1 AND ?2 = ?2", year, 0);
  if (bad) {
    snprintf(err, errlen, "history database %s: aggregation failed: %s", s->path, sqlite3_errmsg(s->db));
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  return vs_store_exec(s, "COMMIT", err, errlen);
}

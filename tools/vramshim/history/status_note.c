/* The failed threshold actions of the last day, for `vramshim status` (its
 * table, JSON and Prometheus): the recorder keeps them in the history
 * database (actions table). None when there is no database, or nothing
 * failed. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "commands.h"
#include "store.h"

static void copy_col(char *dst, size_t len, sqlite3_stmt *q, int col) {
  const unsigned char *s = sqlite3_column_text(q, col);
  snprintf(dst, len, "%s", s ? (const char *)s : "");
}

int vs_history_failed_actions(vs_failed_action **out) {
  *out = NULL;
  char db[512], err[512];
  int fallback;
  vs_store_default_path(0, db, sizeof db, &fallback);
  vs_store st;
  if (vs_store_open_reader(db, &st, err, sizeof err)) return 0;
  sqlite3_stmt *q;
  int n = 0, cap = 0;
  int64_t since = (int64_t)(vs_clock_ns(CLOCK_REALTIME) / 1000000ull) - VS_STORE_DAY_MS;
  if (sqlite3_prepare_v2(st.db,
                         "SELECT t, card, tenant, event, program, status, exit_code, duration_ms, output FROM actions"
                         " WHERE t >= ?1 AND status != 'ok' ORDER BY t",
                         -1, &q, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(q, 1, since);
    while (sqlite3_step(q) == SQLITE_ROW) {
      if (n == cap) {
        vs_failed_action *m = realloc(*out, (size_t)(cap = cap ? 2 * cap : 8) * sizeof *m);
        if (!m) break;   /* out of memory: the ones read so far */
        *out = m;
      }
      vs_failed_action *a = &(*out)[n++];
      a->t_ms = sqlite3_column_int64(q, 0);
      copy_col(a->card, sizeof a->card, q, 1);
      copy_col(a->tenant, sizeof a->tenant, q, 2);
      copy_col(a->event, sizeof a->event, q, 3);
      copy_col(a->program, sizeof a->program, q, 4);
      copy_col(a->status, sizeof a->status, q, 5);
      a->has_exit_code = sqlite3_column_type(q, 6) != SQLITE_NULL;
      a->exit_code = a->has_exit_code ? sqlite3_column_int(q, 6) : 0;
      a->duration_ms = sqlite3_column_int64(q, 7);
      copy_col(a->output, sizeof a->output, q, 8);
    }
    sqlite3_finalize(q);
  }
  vs_store_close(&st);
  return n;
}

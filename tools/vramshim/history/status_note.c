/* The failed threshold actions of the last day, for `vramshim status`: the
 * recorder keeps them in the history database (actions table). Nothing is
 * printed when there is no database, or nothing failed. */
#include <stdio.h>
#include <time.h>

#include "clock.h"
#include "commands.h"
#include "store.h"
#include "timeutil.h"

void vs_history_status_note(FILE *out) {
  char db[512], err[512];
  int fallback;
  vs_store_default_path(0, db, sizeof db, &fallback);
  vs_store st;
  if (vs_store_open_reader(db, &st, err, sizeof err)) return;
  sqlite3_stmt *q;
  int64_t since = (int64_t)(vs_clock_ns(CLOCK_REALTIME) / 1000000ull) - VS_STORE_DAY_MS;
  if (sqlite3_prepare_v2(st.db,
                         "SELECT t, card, tenant, event, program, status, exit_code FROM actions WHERE t >= ?1 AND"
                         " status != 'ok' ORDER BY t",
                         -1, &q, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(q, 1, since);
    while (sqlite3_step(q) == SQLITE_ROW) {
      time_t t = (time_t)(sqlite3_column_int64(q, 0) / 1000);
      struct tm tm;
      char when[32], how[64];
      vs_plat_localtime(t, &tm);
      strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
      const char *status = (const char *)sqlite3_column_text(q, 5);
      if (sqlite3_column_type(q, 6) != SQLITE_NULL) snprintf(how, sizeof how, "exit status %d", sqlite3_column_int(q, 6));
      else snprintf(how, sizeof how, "%s", status);
      fprintf(out, "vramshim: threshold action on_%s of tenant %s on card %s failed at %s (%s): %s; see `vramshim history`\n",
              sqlite3_column_text(q, 3), sqlite3_column_text(q, 2), sqlite3_column_text(q, 1), when, how,
              sqlite3_column_text(q, 4));
    }
    sqlite3_finalize(q);
  }
  vs_store_close(&st);
}

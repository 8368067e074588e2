/* The Windows build: no SQLite nor ncurses here yet, so `record`,
 * `history` and `top` say so (docs/history.md); `status` has no history
 * database to read. */
#include <stdio.h>

#include "commands.h"

static int none(const char *what) {
  fprintf(stderr, "vramshim: %s is not available in the Windows build yet (it needs SQLite and ncurses)\n", what);
  return 1;
}

int cmd_record(int argc, char **argv) {
  (void)argc, (void)argv;
  return none("record");
}
int cmd_history(int argc, char **argv) {
  (void)argc, (void)argv;
  return none("history");
}
int cmd_top(int argc, char **argv) {
  (void)argc, (void)argv;
  return none("top");
}
int vs_history_failed_actions(vs_failed_action **out) {
  *out = NULL;
  return 0;
}

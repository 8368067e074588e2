/* The subcommands of the `vramshim` tool; each lives in its own file. */
#ifndef VS_COMMANDS_H
#define VS_COMMANDS_H
#include <stdint.h>
#include <stdio.h>

int cmd_replay(int argc, char **argv);  /* replay.c: trace replay benchmark */
int cmd_check(int argc, char **argv);   /* check.c: validate a config file */
int cmd_status(int argc, char **argv);  /* status.c: the ledger of every card */
int cmd_dump(int argc, char **argv);    /* dump.c: dumps of live processes or files */
int cmd_run(int argc, char **argv);     /* run.c: a program under the shim (LD_PRELOAD + exec) */
int cmd_record(int argc, char **argv);  /* history/record.c: the ledgers sampled into the history database */
int cmd_history(int argc, char **argv); /* history/history.c: drift, forecast, events and actions over weeks */
int cmd_top(int argc, char **argv);     /* history/top.c: a live view of every card */
/* history/status_note.c: the failed threshold actions of the last day, for
 * `vramshim status` (from the history database, when there is one): how
 * many, oldest first, in *out (malloc'd, the caller frees it; NULL when
 * none). The Windows build has no database: none (history/none.c). */
typedef struct vs_failed_action {
  int64_t t_ms;                      /* when it ended, ms since the Unix epoch */
  char card[64], tenant[64], event[12], program[256], status[16], output[2048];
  int has_exit_code, exit_code;      /* exit_code < 0: killed by that signal */
  int64_t duration_ms;
} vs_failed_action;
int vs_history_failed_actions(vs_failed_action **out);
#endif

/* The subcommands of the `vramshim` tool; each lives in its own file. */
#ifndef VS_COMMANDS_H
#define VS_COMMANDS_H
#include <stdio.h>

int cmd_replay(int argc, char **argv);  /* replay.c: trace replay benchmark */
int cmd_check(int argc, char **argv);   /* check.c: validate a config file */
int cmd_status(int argc, char **argv);  /* status.c: the ledger of every card */
int cmd_dump(int argc, char **argv);    /* dump.c: dumps of live processes or files */
int cmd_run(int argc, char **argv);     /* run.c: a program under the shim (LD_PRELOAD + exec) */
int cmd_record(int argc, char **argv);  /* history/record.c: the ledgers sampled into the history database */
int cmd_history(int argc, char **argv); /* history/history.c: drift, forecast, events and actions over weeks */
int cmd_top(int argc, char **argv);     /* history/top.c: a live view of every card */
/* history/status_note.c: failed threshold actions of the last day, for
 * `vramshim status` (the history database, when there is one). */
void vs_history_status_note(FILE *out);
#endif

/* The subcommands of the `vramshim` tool; each lives in its own file. */
#ifndef VS_COMMANDS_H
#define VS_COMMANDS_H
int cmd_replay(int argc, char **argv);  /* replay.c: trace replay benchmark */
int cmd_check(int argc, char **argv);   /* check.c: validate a config file */
int cmd_status(int argc, char **argv);  /* status.c: the ledger of every card */
int cmd_dump(int argc, char **argv);    /* dump.c: dumps of live processes or files */
int cmd_run(int argc, char **argv);     /* run.c: a program under the shim (LD_PRELOAD + exec) */
#endif

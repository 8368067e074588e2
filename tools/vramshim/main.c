/* vramshim: the command-line tool. Dispatches to one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "procenv.h"

struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
};

static const struct command commands[] = {
    {"status", cmd_status, "usage of every tenant and process on each card (--json, --prometheus, --events)"},
    {"check", cmd_check, "validate a config file and print the plan per card"},
    {"dump", cmd_dump, "fragmentation histogram, memory map and timeline of a live process or a dump file"},
    {"run", cmd_run, "run a program under the shim: vramshim run [--tenant T] [--config F] -- PROGRAM [ARGS]"},
    {"replay", cmd_replay, "replay allocation traces (RMM CSV) through allocator policies side by side"},
    {"record", cmd_record, "sample every card's ledger into the history database; run threshold actions"},
    {"history", cmd_history, "usage over weeks per tenant: drift verdict, forecast of the limit, events (--json, --svg)"},
    {"top", cmd_top, "a live view of every card, tenant and process, refreshed every second"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: vramshim COMMAND [ARGS]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\n'vramshim COMMAND --help' describes each.\n");
}

int main(int argc, char **argv) {
  vs_plat_utf8_args(&argc, &argv); /* Windows: names and paths beyond the ANSI code page */
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("vramshim 0.1.0\n");
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "vramshim: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}

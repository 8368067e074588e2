#include <stdio.h>
#include "commands.h"
int cmd_check(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "vramshim: 'check' is not built yet\n");
  return 2;
}

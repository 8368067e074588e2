#include <stdio.h>
#include "commands.h"
int cmd_status(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "vramshim: 'status' is not built yet\n");
  return 2;
}

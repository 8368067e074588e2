#include <stdio.h>
#include "commands.h"
int cmd_dump(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "vramshim: 'dump' is not built yet\n");
  return 2;
}

#include "procenv.h"

#include <stdlib.h>

void vs_plat_utf8_args(int *argc, char ***argv) { (void)argc, (void)argv; }

const char *vs_plat_getenv(const char *name) { return getenv(name); }

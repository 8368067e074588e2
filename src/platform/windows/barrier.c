#include "barrier.h"

#include <windows.h>

int vs_plat_heavy_barrier_init(void) { return 1; }

void vs_plat_heavy_barrier(void) { FlushProcessWriteBuffers(); }

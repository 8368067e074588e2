/* vramshim_* functions that are not accounting (accounting.c has those). */
#include "driver_table.h"
#include "export.h"
#include "vramshim.h"

VS_EXPORT const char *vramshim_driver_path(void) { return vs_driver_loaded_path(); }

/* Shared by the replay tests: where the real traces are, and loading one. */
#ifndef VS_REPLAY_TEST_UTIL_H
#define VS_REPLAY_TEST_UTIL_H
#include <stdio.h>
#include <stdlib.h>

#include "trace_csv.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* $VRAMSHIM_TRACES_DIR, else shared/traces beside the checkout (from CMake). */
static const char *g_traces_dir;

static void replay_test_init(void) {
  const char *env = getenv("VRAMSHIM_TRACES_DIR");
  g_traces_dir = env && *env ? env : VS_TRACES_DIR;
}

static void load_trace(const char *file, vs_trace *t) {
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/%s", g_traces_dir, file);
  if (vs_trace_load(path, t, err, sizeof err)) {
    print_error("%s (set VRAMSHIM_TRACES_DIR to the folder of the real traces)\n", err);
    fail();
  }
}
#endif

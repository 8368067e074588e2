/* For the interposer's unit tests over the simulated driver (unit_view.c,
 * unit_backend.c): the static interposer library, no preload, the sim
 * loaded by the driver table (VS_SIM_LIBCUDA), and a config and ledger of
 * the test's own in a fresh folder. */
#ifndef VS_UNIT_OVER_SIM_H
#define VS_UNIT_OVER_SIM_H

#include <stdio.h>
#include <stdlib.h>

#include "driver_table.h"

#include "unit_entry_stubs.h"

/* dir: a mkdtemp template, made here. The config: a ledger in dir, `arena`
 * as given, the default tenant limited to `limit` (a config value); one
 * simulated card of 8 GiB, its state in dir. 0 with the driver
 * initialised, else -1. */
static inline int unit_over_sim_setup(char *dir, const char *arena, const char *limit) {
  setenv("VRAMSHIM_DRIVER", VS_SIM_LIBCUDA, 1);
  if (!mkdtemp(dir)) return -1;
  char conf[160], path[160];
  snprintf(conf, sizeof conf, "%s/vramshim.conf", dir);
  FILE *f = fopen(conf, "w");
  if (!f) return -1;
  fprintf(f, "[global]\nledger_dir = %s/ledger\narena = %s\n\n[tenant default]\nlimit = %s\n", dir, arena, limit);
  fclose(f);
  setenv("VRAMSHIM_CONFIG", conf, 1);
  snprintf(path, sizeof path, "%s/sim.state", dir);
  setenv("VRAMSIM_STATE", path, 1);
  setenv("VRAMSIM_CARDS", "8GiB", 1);
  const vs_real_table *real = vs_driver();
  return real && real->cuInit(0) == CUDA_SUCCESS ? 0 : -1;
}

/* Removes the folder setup made. */
static inline int unit_over_sim_teardown(const char *dir) {
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

#endif

#include "tenant_test.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void tt_tempdir(char *out, unsigned len) {
  snprintf(out, len, "/tmp/vs-tenant-test-XXXXXX");
  if (!mkdtemp(out)) {
    perror("mkdtemp");
    abort();
  }
}

void tt_rmdir(const char *dir) {
  char cmd[512];
  if (strncmp(dir, "/tmp/vs-tenant-test-", 20)) return;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

char tt_tmp[256], tt_ledger_dir[300];

int tt_ledger_setup(void **state) {
  (void)state;
  tt_tempdir(tt_tmp, sizeof tt_tmp);
  snprintf(tt_ledger_dir, sizeof tt_ledger_dir, "%s/ledger", tt_tmp);
  return 0;
}

int tt_ledger_teardown(void **state) {
  (void)state;
  tt_rmdir(tt_tmp);
  return 0;
}

void tt_write_file(const char *dir, const char *name, const char *text, char *out, unsigned len) {
  snprintf(out, len, "%s/%s", dir, name);
  FILE *f = fopen(out, "w");
  if (!f) abort();
  fputs(text, f);
  fclose(f);
}

double tt_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void tt_make_plan(vs_plan *plan, const char *text, uint64_t cap) {
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX];
  if (!cfg) fail_msg("out of memory");
  if (vs_config_parse_string(text, "t.conf", cfg, err, sizeof err)) fail_msg("%s", err);
  if (vs_plan_build(cfg, 0, NULL, cap, plan, err, sizeof err)) fail_msg("%s", err);
  free(cfg);
}

/* What tenant quotas cost (docs/benchmarks-tenant.md). Prints numbers; never
 * a pass/fail test.
 *
 *   bench_tenant ledger DIR N          the admission itself: vs_tenant_try +
 *                                      vs_tenant_release on a fresh ledger
 *                                      (no driver), ns per charge and per release
 *   bench_tenant pairs N SIZE          under the shim: N cuMemAlloc + cuMemFree
 *                                      of SIZE bytes, ns per pair (run it with an
 *                                      enforcing config and with passthrough: the
 *                                      difference is what admission adds per
 *                                      driver allocation / arena growth) */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "session.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int ledger(const char *dir, int n) {
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX], text[1024];
  snprintf(text, sizeof text,
           "[global]\nledger_dir = %s\n[card 0]\nheadroom = 1GiB\n"
           "[tenant a]\nreserve = 8GiB\nlimit = 12GiB\nwarn_at = 95%%\n"
           "[tenant b]\nreserve = 4GiB\n[tenant c]\nreserve = 2GiB\n",
           dir);
  if (vs_config_parse_string(text, "bench.conf", cfg, err, sizeof err)) {
    fprintf(stderr, "vramshim-bench: %s\n", err);
    return 1;
  }
  vs_tenant_session *s = vs_tenant_init_with(cfg, "a", 1);
  if (!vs_tenant_card(s, 0, "GPU-bench", 24ull << 30)) return 1;
  double t_try = 0, t_rel = 0;
  for (int round = 0; round < 3; round++) { /* best of three */
    double a = now_ns();
    for (int i = 0; i < n; i++) vs_tenant_try(s, 0, 32ull << 20, NULL), vs_tenant_release(s, 0, 32ull << 20);
    double pair = (now_ns() - a) / n;
    a = now_ns();
    for (int i = 0; i < n; i++) vs_tenant_try(s, 0, 1, NULL);
    double one = (now_ns() - a) / n;
    vs_tenant_release(s, 0, (uint64_t)n);
    if (!round || one < t_try) t_try = one;
    if (!round || pair - one < t_rel) t_rel = pair - one;
  }
  printf("vramshim-bench: ledger admission (uncontended, 3 tenants): charge %.0f ns, release %.0f ns\n", t_try, t_rel);
  vs_tenant_fini(s);
  free(cfg);
  return 0;
}

static int pairs(int n, size_t size) {
  CUdevice d;
  CUcontext c;
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 1;
  CUdeviceptr p;
  for (int i = 0; i < 100; i++) /* warm: the arena's first growth, the ledger opened */
    if (cuMemAlloc(&p, size) || cuMemFree(p)) return 1;
  double best = 0;
  for (int round = 0; round < 3; round++) {
    double a = now_ns();
    for (int i = 0; i < n; i++)
      if (cuMemAlloc(&p, size) || cuMemFree(p)) return 1;
    double per = (now_ns() - a) / n;
    if (!round || per < best) best = per;
  }
  printf("vramshim-bench: cuMemAlloc + cuMemFree of %zu bytes: %.0f ns per pair\n", size, best);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "ledger")) return ledger(argv[2], atoi(argv[3]));
  if (argc == 4 && !strcmp(argv[1], "pairs")) return pairs(atoi(argv[2]), (size_t)strtoull(argv[3], NULL, 0));
  fprintf(stderr, "usage: bench_tenant ledger DIR N | pairs N SIZE\n");
  return 2;
}

/* Helpers shared by the tenant tests. */
#ifndef VS_TENANT_TEST_H
#define VS_TENANT_TEST_H
#include <stdint.h>

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* A fresh private directory under /tmp; the ledger dir is "<it>/ledger". */
void tt_tempdir(char *out, unsigned len);
/* rm -rf of a directory made by tt_tempdir. */
void tt_rmdir(const char *dir);
/* The ledger tests' fixture (CMocka setup and teardown): tt_ledger_setup
 * makes a fresh tt_tempdir in tt_tmp and names its ledger folder
 * "<tt_tmp>/ledger" in tt_ledger_dir (not created); tt_ledger_teardown
 * removes tt_tmp. */
extern char tt_tmp[256], tt_ledger_dir[300];
int tt_ledger_setup(void **state);
int tt_ledger_teardown(void **state);
/* Writes text to dir/name and returns the path in out. */
void tt_write_file(const char *dir, const char *name, const char *text, char *out, unsigned len);
/* Parses text (a config, named "t.conf") and builds its plan for card 0
 * of capacity cap; a parse or plan error fails the current test. */
struct vs_plan;
void tt_make_plan(struct vs_plan *plan, const char *text, uint64_t cap);
/* Monotonic milliseconds. */
double tt_now_ms(void);
/* How long a condition that must come true (a reclaim, a wake-up, a child's
 * start) may take before a test calls it broken. Generous on purpose: a
 * sanitizer build on a loaded 2-core machine is many times slower than a
 * normal one. Tests assert that it happens, never how fast: the speed is a
 * benchmark's to report (tools/bench), and the tests only print it. */
#define TT_EVENTUALLY_MS 30000
#endif

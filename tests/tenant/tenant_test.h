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
/* Writes text to dir/name and returns the path in out. */
void tt_write_file(const char *dir, const char *name, const char *text, char *out, unsigned len);
/* Parses text (a config, named "t.conf") and builds its plan for card 0
 * of capacity cap; a parse or plan error fails the current test. */
struct vs_plan;
void tt_make_plan(struct vs_plan *plan, const char *text, uint64_t cap);
/* Monotonic milliseconds. */
double tt_now_ms(void);
#endif

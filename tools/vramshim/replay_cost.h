/* Modeled driver time for `vramshim replay`: a table of per-call costs
 * (data/driver-costs.csv; docs/driver-costs.md cites each figure) and a
 * tally of the calls a policy made, by kind and size. The replay prints the
 * tally's time beside the call counts. scripts/gpu-validate measures a real
 * driver and writes the same layout. */
#ifndef VS_REPLAY_COST_H
#define VS_REPLAY_COST_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
  VS_CALL_MEM_ALLOC, VS_CALL_MEM_FREE, VS_CALL_ADDR_RESERVE, VS_CALL_ADDR_FREE, VS_CALL_CREATE, VS_CALL_MAP,
  VS_CALL_SET_ACCESS, VS_CALL_UNMAP, VS_CALL_RELEASE, VS_CALL_SYNC, VS_CALL_EVENT_RECORD, VS_CALL_EVENT_QUERY,
  VS_CALL_STREAM_WAIT, VS_NCALLS
} vs_call_kind;

/* The driver's names ("cuMemAlloc", ...), as in the table's call column. */
extern const char *const vs_call_names[VS_NCALLS];

#define VS_COST_POINTS 32
typedef struct vs_cost_table {
  uint32_t n[VS_NCALLS];                     /* points per call, sizes ascending */
  uint64_t size[VS_NCALLS][VS_COST_POINTS];
  double ns[VS_NCALLS][VS_COST_POINTS];
  char path[256];
} vs_cost_table;

/* Reads a table. 0, or -1 with "file:line: reason" in err. Every call must
 * have at least one point. */
int vs_cost_load(const char *path, vs_cost_table *t, char *err, size_t errlen);
/* The cost of one call of `size` bytes: linear in log2(size) between the
 * listed sizes, constant beyond them. */
double vs_cost_ns(const vs_cost_table *t, vs_call_kind k, uint64_t size);

typedef struct vs_call_tally {
  uint64_t calls[VS_NCALLS];
  double ns;   /* modeled time of those calls; 0 without a table */
} vs_call_tally;
static inline void vs_tally(vs_call_tally *c, const vs_cost_table *t, vs_call_kind k, uint64_t size) {
  c->calls[k]++;
  if (t) c->ns += vs_cost_ns(t, k, size);
}

#endif

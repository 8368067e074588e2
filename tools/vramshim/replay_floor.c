/* The floor of `vramshim replay` (replay_floor.h). */
#include "replay_floor.h"

double vs_replay_floor_ns(const vs_trace *t, const vs_cost_table *c, double factor, uint64_t *growths) {
  double live = 0, hwm = 0, held = 0, ns = 0;
  uint64_t n = 0;
  for (size_t i = 0; i < t->nev; i++) {
    double size = (double)t->sizes[t->ev[i].id];
    if (t->ev[i].free) {
      live -= size;
      continue;
    }
    live += size;
    if (live > hwm) hwm = live;
    if (live <= held) continue;
    /* A growth straight to the cap: one handle created, mapped and made
     * accessible, each priced at the growth's size. */
    uint64_t grow = (uint64_t)(factor * hwm - held);
    held = factor * hwm;
    n++;
    if (c) ns += vs_cost_ns(c, VS_CALL_CREATE, grow) + vs_cost_ns(c, VS_CALL_MAP, grow) +
                 vs_cost_ns(c, VS_CALL_SET_ACCESS, grow);
  }
  if (growths) *growths = n;
  return ns;
}

/* vramshim_* functions that are not accounting (accounting.c has those). */
#include "driver_table.h"
#include "export.h"
#include "graph_charge.h"
#include "pool_charge.h"
#include "vramshim.h"

VS_EXPORT const char *vramshim_driver_path(void) { return vs_driver_loaded_path(); }

VS_EXPORT int vramshim_driver_pools(int card, uint64_t *pool_reserved_bytes, uint64_t *graph_reserved_bytes) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return -1;
  if (pool_reserved_bytes) *pool_reserved_bytes = vs_pool_charged(card);
  if (graph_reserved_bytes) *graph_reserved_bytes = vs_graph_mem_charged(card);
  return 0;
}

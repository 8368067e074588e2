/* Filling a dump card from what the shim holds: an arena (stats + walk), or
 * with arena = off a plain list of live allocations. */
#ifndef VS_DUMP_BUILD_H
#define VS_DUMP_BUILD_H

#include "arena.h"
#include "dump_model.h"

/* The arena's own figures (live, reserved, peaks, waste, histogram,
 * largest free, size classes) into c; fragmentation derived from them. */
void vs_dump_card_set_arena_stats(vs_dump_card *c, const vs_arena_stats *st);

/* A walker whose callbacks add the arena's regions and blocks to c. After
 * the walk, vs_dump_walker_status() is 0, or -1 when memory ran out. */
typedef struct vs_dump_walker {
  vs_arena_walker w;    /* pass &dw.w to vs_arena_walk */
  vs_dump_card *card;
  vs_dump_region *cur;
  int failed;
} vs_dump_walker;
void vs_dump_walker_init(vs_dump_walker *dw, vs_dump_card *c);
int vs_dump_walker_status(const vs_dump_walker *dw);

/* Both of the above for a live arena: stats, then the memory map.
 * mode_name: "vmm" or "chunks". 0 or -1 (out of memory). */
int vs_dump_card_from_arena(vs_dump_card *c, vs_arena *a, const char *mode_name);

/* arena = off: each live allocation is its own region of kind
 * "allocation" holding one live block; nothing is free. */
typedef struct vs_dump_alloc { uint64_t addr, size; } vs_dump_alloc;
int vs_dump_card_from_allocations(vs_dump_card *c, const vs_dump_alloc *allocs, size_t n);

#endif

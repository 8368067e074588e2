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

/* ---- One call for the shim ------------------------------------------------ */
struct vs_card_stats;
/* Everything known about one card of this process. */
typedef struct vs_dump_card_source {
  int index;
  uint64_t capacity;                 /* 0 when unknown */
  vs_arena *arena;                   /* NULL: arena = off */
  const char *arena_mode;            /* "vmm" or "chunks" (with an arena) */
  const vs_dump_alloc *allocs;       /* arena = off: the live allocations */
  size_t nallocs;
  struct vs_card_stats *stats;       /* driver calls, counters, timeline; may be NULL */
  const vs_dump_tenant_use *tenant;  /* the tenant's figures on this card; may be NULL */
} vs_dump_card_source;
/* Adds a card to d from src: the arena's stats and map (or the
 * allocations), the stats' driver calls and timeline, the tenant figures.
 * 0, or -1 when memory ran out (d keeps what was added). */
int vs_dump_add_card_from(vs_dump *d, const vs_dump_card_source *src);

/* The timeline sampler for a card with an arena: one sample of the arena's
 * live, reserved and largest free, now. (arena = off: vs_stats_sample_off.) */
void vs_stats_sample_arena(struct vs_card_stats *st, vs_arena *a);

#endif

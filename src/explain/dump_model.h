/* The dump: a neutral in-memory model of what a process holds on its cards.
 *
 * One model, three producers and consumers: the builder (from an arena's
 * stats and walk, or from a plain list of live allocations when arena =
 * off), the JSON writer/reader (docs/dump-format.md), and the `vramshim
 * dump` views (text, SVG, diff). Everything is owned by the vs_dump and
 * released by vs_dump_free().
 *
 * Invariants a valid dump keeps (the reader checks them, the builder
 * produces them): regions do not overlap, except that a region may lie
 * inside one live block of another (the arena carves slabs from its heap:
 * the slab's memory is a live heap block, and the slab its own region with
 * its slots); the blocks of a region are in
 * offset order, do not overlap and stay inside it; histogram bucket i
 * counts free extents with floor(log2(size)) == i. */
#ifndef VS_DUMP_MODEL_H
#define VS_DUMP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define VS_DUMP_SCHEMA_MAJOR 1
/* 1.1: spilled host bytes (on_limit = spill); 1.2: the tenant's overhead (issue 24); 1.3: the driver's pools */
#define VS_DUMP_SCHEMA_MINOR 3
#define VS_DUMP_HIST_BUCKETS 48    /* same as VS_ARENA_HIST_BUCKETS */
#define VS_DUMP_UNLIMITED UINT64_MAX /* tenant limit "none"; written as null */

typedef enum { VS_DUMP_REGION_SLAB = 1, VS_DUMP_REGION_CHUNK, VS_DUMP_REGION_VMM_RANGE,
               VS_DUMP_REGION_DEDICATED, VS_DUMP_REGION_ALLOCATION } vs_dump_region_kind;
typedef enum { VS_DUMP_FREE = 0, VS_DUMP_LIVE = 1, VS_DUMP_PENDING = 2 } vs_dump_block_state;

typedef struct vs_dump_block { uint64_t offset, size; vs_dump_block_state state; } vs_dump_block;

typedef struct vs_dump_region {
  uint64_t base, size;
  vs_dump_region_kind kind;
  uint64_t class_size;             /* slabs: the size class they serve; else 0 */
  size_t nblocks, cap_blocks;
  vs_dump_block *blocks;
} vs_dump_region;

/* spilled: host bytes served in place of device memory (1.1; 0 in 1.0 dumps) */
typedef struct vs_dump_sample { uint64_t t_ms, live, reserved, largest_free, spilled; } vs_dump_sample;
typedef struct vs_dump_counter { char name[48]; uint64_t count; } vs_dump_counter;
typedef struct vs_dump_class { uint64_t size, live, slots; } vs_dump_class;

typedef struct vs_dump_tenant_use {
  int present;                     /* 0: no tenant figures for this card */
  uint64_t reserve, limit, usage;  /* limit VS_DUMP_UNLIMITED when none */
  uint64_t spilled, spill_max;     /* 1.1: the tenant's spilled host bytes, all processes; MAX (0: no spilling) */
  uint64_t overhead;               /* 1.2: of usage, its processes' footprint beyond the shim's count (docs/nvml.md) */
} vs_dump_tenant_use;

typedef struct vs_dump_card {
  int index;
  char arena[16];                  /* "vmm", "chunks" or "off" */
  uint64_t capacity;               /* card's total memory, 0 when unknown */
  uint64_t live_bytes, live_count, peak_live_bytes;
  uint64_t reserved_bytes, peak_reserved_bytes;
  uint64_t internal_waste;         /* rounding: block bytes - requested bytes */
  uint64_t free_bytes, pending_bytes, largest_free;
  double external_fragmentation;   /* 1 - largest_free / free_bytes; 0 when nothing is free */
  uint64_t requests, served_from_cache;
  /* 1.1 (on_limit = spill): host bytes this process serves in place of
   * device memory; not in live/reserved, not in the memory map. */
  uint64_t spilled_bytes, peak_spilled_bytes, spilled_count;
  /* 1.3: what the driver's pools reserve for this process on the card, as
   * last read, charged to the tenant: its memory pools (whose blocks are
   * also in live/reserved) and the graph memory pool (whose blocks are
   * not: graphs' allocation nodes). */
  uint64_t pool_reserved_bytes, graph_reserved_bytes;
  uint64_t hist_count[VS_DUMP_HIST_BUCKETS], hist_bytes[VS_DUMP_HIST_BUCKETS];
  size_t ncalls, nclasses, nregions, nsamples;
  vs_dump_counter *calls;          /* driver calls by name */
  vs_dump_class *classes;          /* size-class occupancy */
  vs_dump_region *regions;         /* the memory map, by base address */
  vs_dump_sample *samples;         /* timeline, oldest first */
  size_t cap_regions, cap_calls, cap_classes;
  vs_dump_tenant_use tenant;
} vs_dump_card;

typedef struct vs_dump {
  unsigned schema_major, schema_minor;
  int64_t pid;
  char exe[256];
  char tenant[64];
  char reason[32];                 /* "request", "refused", "signal", "manual" */
  uint64_t time_unix_ms;
  size_t ncards;
  vs_dump_card *cards;
} vs_dump;

/* ---- Lifetime ------------------------------------------------------------ */
void vs_dump_init(vs_dump *d, int64_t pid, const char *exe, const char *tenant, const char *reason,
                  uint64_t time_unix_ms);
vs_dump_card *vs_dump_add_card(vs_dump *d, int index);   /* NULL on out of memory */
void vs_dump_free(vs_dump *d);                           /* frees contents; d may be reused after init */

/* ---- Filling a card ------------------------------------------------------ */
vs_dump_region *vs_dump_card_add_region(vs_dump_card *c, uint64_t base, uint64_t size, vs_dump_region_kind kind,
                                        uint64_t class_size);
int vs_dump_region_add_block(vs_dump_region *r, uint64_t offset, uint64_t size, vs_dump_block_state state);
int vs_dump_card_add_call(vs_dump_card *c, const char *name, uint64_t count);
int vs_dump_card_add_class(vs_dump_card *c, uint64_t size, uint64_t live, uint64_t slots);
int vs_dump_card_set_samples(vs_dump_card *c, const vs_dump_sample *s, size_t n);

/* Recomputes the free-extent histogram, free/pending bytes, largest free
 * extent and external fragmentation from the memory map, with the arena's
 * rules: an extent is a run of adjacent free blocks of one region (what
 * could serve one request now); pending bytes are not in any extent but
 * are in free_bytes (reserved and not live), so fragmentation counts them. */
void vs_dump_card_derive_free(vs_dump_card *c);
/* 1 - largest / total, 0 when total is 0. */
double vs_dump_fragmentation(uint64_t largest_free, uint64_t free_bytes);
/* floor(log2(size)) clamped to the last bucket; size 0 goes to bucket 0. */
unsigned vs_dump_bucket(uint64_t size);

/* ---- Names --------------------------------------------------------------- */
const char *vs_dump_region_kind_name(vs_dump_region_kind k);   /* "slab", "chunk", ... */
int vs_dump_region_kind_parse(const char *s, vs_dump_region_kind *out);
const char *vs_dump_block_state_name(vs_dump_block_state s);   /* "free", "live", "pending" */
int vs_dump_block_state_parse(const char *s, vs_dump_block_state *out);

/* 0 when the invariants above hold; else -1 with the first broken one in err. */
int vs_dump_check(const vs_dump *d, char *err, size_t errlen);

#endif

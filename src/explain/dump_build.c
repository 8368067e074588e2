/* Filling a dump card from arena stats, an arena walk, or a list of live
 * allocations (arena = off). Needs no arena symbols: see dump_from_arena.c. */
#include "dump_build.h"
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

void vs_dump_card_set_arena_stats(vs_dump_card *c, const vs_arena_stats *st) {
  c->live_bytes = st->live_bytes;
  c->live_count = st->live_count;
  c->peak_live_bytes = st->peak_live_bytes;
  c->reserved_bytes = st->reserved_bytes;
  c->peak_reserved_bytes = st->peak_reserved_bytes;
  c->internal_waste = st->internal_waste;
  c->free_bytes = st->free_bytes;
  c->pending_bytes = st->pending_bytes;
  c->largest_free = st->largest_free;
  c->requests = st->requests;
  c->served_from_cache = st->served_from_cache;
  _Static_assert(VS_DUMP_HIST_BUCKETS == VS_ARENA_HIST_BUCKETS, "histogram buckets differ");
  memcpy(c->hist_count, st->hist_count, sizeof c->hist_count);
  memcpy(c->hist_bytes, st->hist_bytes, sizeof c->hist_bytes);
  c->external_fragmentation = vs_dump_fragmentation(c->largest_free, c->free_bytes);
  uint32_t n = st->class_count < VS_ARENA_MAX_CLASSES ? st->class_count : VS_ARENA_MAX_CLASSES;
  for (uint32_t i = 0; i < n; i++) vs_dump_card_add_class(c, st->class_size[i], st->class_live[i], st->class_slots[i]);
}

static vs_dump_region_kind map_kind(vs_region_kind k) {
  switch (k) {
    case VS_REGION_SLAB: return VS_DUMP_REGION_SLAB;
    case VS_REGION_VMM_RANGE: return VS_DUMP_REGION_VMM_RANGE;
    case VS_REGION_DEDICATED: return VS_DUMP_REGION_DEDICATED;
    case VS_REGION_CHUNK: default: return VS_DUMP_REGION_CHUNK;
  }
}

static vs_dump_block_state map_state(vs_block_state s) {
  return s == VS_BLOCK_LIVE ? VS_DUMP_LIVE : s == VS_BLOCK_PENDING ? VS_DUMP_PENDING : VS_DUMP_FREE;
}

static void on_region(void *user, const vs_region_info *r) {
  vs_dump_walker *dw = user;
  dw->cur = vs_dump_card_add_region(dw->card, r->base, r->size, map_kind(r->kind), r->class_size);
  if (!dw->cur) dw->failed = 1;
}

static void on_block(void *user, const vs_region_info *r, const vs_block_info *b) {
  vs_dump_walker *dw = user;
  /* The walk promises blocks right after their region; check anyway, so a
   * block is never filed under the wrong region. */
  if (!dw->cur || dw->cur->base != r->base) {
    dw->cur = NULL;
    for (size_t i = dw->card->nregions; i-- > 0;)
      if (dw->card->regions[i].base == r->base) {
        dw->cur = &dw->card->regions[i];
        break;
      }
    if (!dw->cur) {
      on_region(user, r);
      if (!dw->cur) return;
    }
  }
  if (vs_dump_region_add_block(dw->cur, b->offset, b->size, map_state(b->state))) dw->failed = 1;
}

void vs_dump_walker_init(vs_dump_walker *dw, vs_dump_card *c) {
  memset(dw, 0, sizeof *dw);
  dw->w.user = dw;
  dw->w.region = on_region;
  dw->w.block = on_block;
  dw->card = c;
}

int vs_dump_walker_status(const vs_dump_walker *dw) {
  return dw->failed ? -1 : 0;
}

static int cmp_alloc(const void *a, const void *b) {
  const vs_dump_alloc *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int vs_dump_card_from_allocations(vs_dump_card *c, const vs_dump_alloc *allocs, size_t n) {
  vs_dump_alloc *v = NULL;
  if (n) {
    v = malloc(n * sizeof *v);
    if (!v) return -1;
    memcpy(v, allocs, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_alloc);
  }
  snprintf(c->arena, sizeof c->arena, "off");
  uint64_t live = 0;
  size_t count = 0;
  for (size_t i = 0; i < n; i++) {
    if (!v[i].size) continue;
    vs_dump_region *r = vs_dump_card_add_region(c, v[i].addr, v[i].size, VS_DUMP_REGION_ALLOCATION, 0);
    if (!r || vs_dump_region_add_block(r, 0, v[i].size, VS_DUMP_LIVE)) {
      free(v);
      return -1;
    }
    live += v[i].size;
    count++;
  }
  free(v);
  c->live_bytes = live;
  c->live_count = count;
  if (c->peak_live_bytes < live) c->peak_live_bytes = live;
  /* Each allocation is its own driver allocation: reserved == live. */
  c->reserved_bytes = live;
  if (c->peak_reserved_bytes < live) c->peak_reserved_bytes = live;
  vs_dump_card_derive_free(c);
  return 0;
}

/* Writes a realistic dump (the known layout, a drifting timeline) as JSON:
 *   explain_make_sample OUT.json            day 1
 *   explain_make_sample OUT.json --day60    the same server, fragmented
 *   explain_make_sample OUT.json --off N    arena = off, N allocations
 * docs/dump-sample.json is this program's day-1 output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_json.h"
#include "layout.h"

/* Day 60: the VMM range has been carved by weeks of uneven requests, a
 * second chunk was needed, and the largest free extent is much smaller. */
static void day60(vs_dump *d) {
  vs_dump_card *c = &d->cards[0];
  vs_dump_region *r = &c->regions[2];
  r->nblocks = 0;
  uint64_t off = 0, seed = 12345;
  while (off < r->size) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t sz = ((seed >> 33) % 12 + 1) * MiB;
    if (off + sz > r->size) sz = r->size - off;
    int live = ((seed >> 20) % 10) < 7;
    vs_dump_region_add_block(r, off, sz, live ? VS_DUMP_LIVE : VS_DUMP_FREE);
    off += sz;
  }
  vs_dump_region *r2 = vs_dump_card_add_region(c, 0x60000000, 64 * MiB, VS_DUMP_REGION_CHUNK, 0);
  vs_dump_region_add_block(r2, 0, 20 * MiB, VS_DUMP_LIVE);
  vs_dump_region_add_block(r2, 20 * MiB, 6 * MiB, VS_DUMP_FREE);
  vs_dump_region_add_block(r2, 26 * MiB, 30 * MiB, VS_DUMP_LIVE);
  vs_dump_region_add_block(r2, 56 * MiB, 8 * MiB, VS_DUMP_FREE);
  vs_dump_card_derive_free(c);
  uint64_t live = 0, count = 0;
  for (size_t i = 0; i < c->nregions; i++)
    for (size_t j = 0; j < c->regions[i].nblocks; j++)
      if (c->regions[i].blocks[j].state == VS_DUMP_LIVE) live += c->regions[i].blocks[j].size, count++;
  c->live_bytes = live - 900 * KiB;
  c->live_count = count;
  c->internal_waste = 900 * KiB;
  c->reserved_bytes += 64 * MiB;
  c->peak_reserved_bytes = c->reserved_bytes;
  c->classes[0].live = 3;
  c->classes[0].slots = 8;
  c->calls[0].count += 1;
  c->tenant.usage = c->reserved_bytes;
  d->time_unix_ms += 59ull * 86400 * 1000;
  for (size_t i = 0; i < c->nsamples; i++) {
    c->samples[i].t_ms += 59ull * 86400 * 1000;
    c->samples[i].reserved += 64 * MiB;
    c->samples[i].largest_free = c->samples[i].largest_free / 2 + 16 * MiB;
  }
}

/* arena = off: n allocations of mixed sizes, each its own region. */
static void arena_off(vs_dump *d, size_t n) {
  vs_dump_card *c = &d->cards[0];
  for (size_t i = 0; i < c->nregions; i++) free(c->regions[i].blocks);
  c->nregions = 0;
  c->nclasses = 0;
  c->internal_waste = 0;
  vs_dump_alloc *v = calloc(n, sizeof *v);
  uint64_t at = 0x7f0000000000ull, seed = 7;
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t k = (seed >> 33) % 100;
    v[i].size = k < 70 ? ((seed >> 40) % 64 + 1) * 4096 : k < 95 ? ((seed >> 40) % 32 + 1) * MiB : 512 * MiB;
    v[i].addr = at;
    at += (v[i].size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
  }
  vs_dump_card_from_allocations(c, v, n);
  snprintf(c->arena, sizeof c->arena, "off");
  free(v);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: explain_make_sample OUT.json [--day60]\n");
    return 2;
  }
  vs_dump d;
  layout_dump(&d, 90);
  if (argc > 2 && !strcmp(argv[2], "--day60")) day60(&d);
  if (argc > 3 && !strcmp(argv[2], "--off")) arena_off(&d, (size_t)atoi(argv[3]));
  FILE *f = fopen(argv[1], "w");
  if (!f) return 1;
  size_t len;
  char *text = vs_dump_to_json(&d, &len);
  int rc = text && fwrite(text, 1, len, f) == len ? 0 : 1;
  if (fclose(f)) rc = 1;
  free(text);
  vs_dump_free(&d);
  return rc;
}

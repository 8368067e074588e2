/* The known layout of layout.h. */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void region(vs_dump_walker *dw, uint64_t base, uint64_t size, vs_region_kind kind, uint64_t cls,
                   const uint64_t *blocks, size_t n) {
  vs_region_info r = {base, size, kind, cls};
  dw->w.region(dw->w.user, &r);
  uint64_t off = 0;
  for (size_t i = 0; i < n; i++) {
    vs_block_info b = {off, blocks[2 * i], (vs_block_state)blocks[2 * i + 1]};
    dw->w.block(dw->w.user, &r, &b);
    off += blocks[2 * i];
  }
}

void layout_walk(vs_dump_card *c) {
  vs_dump_walker dw;
  vs_dump_walker_init(&dw, c);
  const uint64_t L = VS_BLOCK_LIVE, F = VS_BLOCK_FREE, P = VS_BLOCK_PENDING;
  const uint64_t chunk[] = {8 * MiB, L, 4 * MiB, F, 4 * MiB, P, 16 * MiB, L, 1 * MiB, F, 31 * MiB, F};
  const uint64_t slab[] = {512 * KiB, L, 512 * KiB, F, 512 * KiB, L, 512 * KiB, F};
  const uint64_t range[] = {253 * MiB, L, 3 * MiB, F};
  region(&dw, 0x10000000, 64 * MiB, VS_REGION_CHUNK, 0, chunk, 6);
  region(&dw, 0x20000000, 2 * MiB, VS_REGION_SLAB, 512 * KiB, slab, 4);
  region(&dw, 0x40000000, 256 * MiB, VS_REGION_VMM_RANGE, 0, range, 2);
}

void layout_dump(vs_dump *d, size_t samples) {
  vs_dump_init(d, 4242, "/usr/bin/python3", "llm", "request", 1764440000000ull);
  vs_dump_card *c = vs_dump_add_card(d, 0);
  snprintf(c->arena, sizeof c->arena, "vmm");
  c->capacity = 24ull << 30;
  layout_walk(c);
  vs_dump_card_derive_free(c);
  c->live_bytes = (8 + 16 + 1 + 253) * MiB - 300 * KiB;   /* requested; rounding below */
  c->internal_waste = 300 * KiB;
  c->live_count = 5;
  c->peak_live_bytes = 290 * MiB;
  c->reserved_bytes = (64 + 2 + 256) * MiB;
  c->peak_reserved_bytes = 340 * MiB;
  c->requests = 120000;
  c->served_from_cache = 119800;
  vs_dump_card_add_call(c, "cuMemAddressReserve", 3);
  vs_dump_card_add_call(c, "cuMemCreate", 161);
  vs_dump_card_add_call(c, "cuMemMap", 161);
  vs_dump_card_add_call(c, "cuMemAlloc", 2);
  vs_dump_card_add_call(c, "cuCtxSynchronize", 14);
  vs_dump_card_add_class(c, 512 * KiB, 2, 4);
  vs_dump_card_add_class(c, 64 * KiB, 0, 0);
  c->tenant = (vs_dump_tenant_use){1, 16ull << 30, 20ull << 30, 322 * MiB, 0, 0, 0};
  /* A slow drift: live flat with noise, reserved creeping up, the largest
   * free extent shrinking as gaps fragment. */
  if (samples) {
    vs_dump_sample *v = calloc(samples, sizeof *v);
    for (size_t i = 0; i < samples; i++) {
      v[i].t_ms = d->time_unix_ms - (samples - i) * 10000;
      v[i].live = 250 * MiB + (i * 7919 % 40) * MiB;
      v[i].reserved = 280 * MiB + i * 42 * MiB / samples;
      v[i].largest_free = 96 * MiB - i * 64 * MiB / samples;
    }
    vs_dump_card_set_samples(c, v, samples);
    free(v);
  }
}

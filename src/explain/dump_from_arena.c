/* The one place the explain library calls into the arena. Kept in its own
 * object so tools and tests that only read dumps do not pull arena symbols. */
#include "dump_build.h"
#include "stats.h"
#include <stdio.h>

int vs_dump_card_from_arena(vs_dump_card *c, vs_arena *a, const char *mode_name) {
  vs_arena_stats st;
  vs_arena_get_stats(a, &st);
  snprintf(c->arena, sizeof c->arena, "%s", mode_name ? mode_name : "chunks");
  vs_dump_card_set_arena_stats(c, &st);
  vs_dump_walker dw;
  vs_dump_walker_init(&dw, c);
  vs_arena_walk(a, &dw.w);
  return vs_dump_walker_status(&dw);
}

int vs_dump_add_card_from(vs_dump *d, const vs_dump_card_source *src) {
  vs_dump_card *c = vs_dump_add_card(d, src->index);
  if (!c) return -1;
  c->capacity = src->capacity;
  int rc = src->arena ? vs_dump_card_from_arena(c, src->arena, src->arena_mode)
                      : vs_dump_card_from_allocations(c, src->allocs, src->nallocs);
  /* arena = off: the allocation list is the truth for what is live now;
   * the counters add the peaks and request count. */
  uint64_t live = c->live_bytes, count = c->live_count, reserved = c->reserved_bytes;
  if (src->stats && vs_stats_fill_card(src->stats, c, src->arena == NULL)) rc = -1;
  if (!src->arena) {
    c->live_bytes = live;
    c->live_count = count;
    c->reserved_bytes = reserved;
    if (c->peak_live_bytes < live) c->peak_live_bytes = live;
    if (c->peak_reserved_bytes < reserved) c->peak_reserved_bytes = reserved;
  }
  if (src->tenant) c->tenant = *src->tenant;
  return rc;
}

void vs_stats_sample_arena(vs_card_stats *st, vs_arena *a) {
  vs_arena_stats s;
  vs_arena_get_stats(a, &s);
  vs_timeline_sample(st, vs_now_unix_ms(), s.live_bytes, s.reserved_bytes, s.largest_free);
}

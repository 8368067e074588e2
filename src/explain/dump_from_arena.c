/* The one place the explain library calls into the arena. Kept in its own
 * object so tools and tests that only read dumps do not pull arena symbols. */
#include "dump_build.h"
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

/* A known memory layout for the explain tests, with its hand-computed
 * figures, fed through the same walker callbacks vs_arena_walk drives.
 *
 * card 0, three regions (MiB = 1 << 20):
 *   chunk     0x10000000  64 MiB: live 8 | free 4 | pending 4 | live 16 | free 1 | free 31
 *   slab      0x20000000   2 MiB (class 512 KiB): live | free | live | free  (512 KiB each)
 *   vmm_range 0x40000000 256 MiB: live 253 | free 3
 * Free extents (adjacent free blocks merge; pending ones are no extent):
 *   4 MiB, 32 MiB, 512 KiB x2, 3 MiB.
 *   histogram: log2 19: 2 / 1 MiB; 21: 1 / 3 MiB; 22: 1 / 4 MiB; 25: 1 / 32 MiB
 *   free 44 MiB (pending included), pending 4 MiB, largest free 32 MiB,
 *   fragmentation 1 - 32/44 */
#ifndef EXPLAIN_LAYOUT_H
#define EXPLAIN_LAYOUT_H

#include "dump_build.h"
#include "dump_model.h"

#define MiB (1ull << 20)
#define KiB (1ull << 10)
#define LAYOUT_BLOCKS 12
#define LAYOUT_LIVE_BLOCKS 5
#define LAYOUT_FREE_BLOCKS 6
#define LAYOUT_PENDING_BLOCKS 1

/* Fills card c with the layout (map only), through the walker. */
void layout_walk(vs_dump_card *c);
/* A whole dump: the layout plus figures, classes, calls, tenant and a
 * drifting timeline of n samples (a realistic state for the sample). */
void layout_dump(vs_dump *d, size_t samples);

#endif

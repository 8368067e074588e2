/* Views of a dump for people: the text report, the SVG picture, and the
 * diff of two dumps. They read only the dump model, so they work the same
 * on a file and on a live process's fresh dump. */
#ifndef VS_RENDER_H
#define VS_RENDER_H

#include <stddef.h>
#include <stdio.h>

#include "dump_model.h"

#define VS_MAP_WIDTH 100   /* characters per region line, at most */

/* Summary figures, the free-extent histogram as bars, size classes, one
 * line per region (one character per cell; the cell size is shown) and a
 * timeline summary. 0, or -1 on a write error. */
int vs_render_text(FILE *out, const vs_dump *d);
/* One region's map line into buf (at least VS_MAP_WIDTH + 1 bytes):
 * '#' cell at least half live, '+' partly live, '~' pending (nothing live),
 * '.' free, ' ' not covered by any block. Returns the cell size in bytes. */
uint64_t vs_render_map_line(const vs_dump_region *r, char *buf, size_t width);

/* The SVG document (malloc'd, NUL-terminated), NULL on out of memory.
 * Memory map: one row per region, every block a <rect class="blk STATE">;
 * legend; timeline plot per card with human-unit axes. */
char *vs_render_svg(const vs_dump *d, size_t *len);

/* What changed from a to b: figures per card, histogram buckets, size
 * classes, driver calls. 0, or -1 on a write error. */
int vs_render_diff(FILE *out, const vs_dump *a, const vs_dump *b);

/* "1.5 GiB" with up to 3 significant digits, for labels. */
const char *vs_fmt_short(uint64_t bytes, char *buf, size_t len);

#endif

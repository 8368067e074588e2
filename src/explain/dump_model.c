/* The dump model: lifetime, filling, derived free-space figures, checks. */
#include "dump_model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plat_types.h" /* VS_PRINTF */

static const char *const kind_names[] = {NULL, "slab", "chunk", "vmm_range", "dedicated", "allocation"};
static const char *const state_names[] = {"free", "live", "pending"};

/* Grows *p (of *cap elements of `size`) to hold n+1; 0 or -1. */
static int grow(void **p, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 8;
  if (nc > SIZE_MAX / size) return -1;
  void *q = realloc(*p, nc * size);
  if (!q) return -1;
  *p = q;
  *cap = nc;
  return 0;
}

static void copy_str(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

void vs_dump_init(vs_dump *d, int64_t pid, const char *exe, const char *tenant, const char *reason,
                  uint64_t time_unix_ms) {
  memset(d, 0, sizeof *d);
  d->schema_major = VS_DUMP_SCHEMA_MAJOR;
  d->schema_minor = VS_DUMP_SCHEMA_MINOR;
  d->pid = pid;
  copy_str(d->exe, sizeof d->exe, exe);
  copy_str(d->tenant, sizeof d->tenant, tenant);
  copy_str(d->reason, sizeof d->reason, reason ? reason : "manual");
  d->time_unix_ms = time_unix_ms;
}

vs_dump_card *vs_dump_add_card(vs_dump *d, int index) {
  vs_dump_card *cards = realloc(d->cards, (d->ncards + 1) * sizeof *cards);
  if (!cards) return NULL;
  d->cards = cards;
  vs_dump_card *c = &cards[d->ncards++];
  memset(c, 0, sizeof *c);
  c->index = index;
  copy_str(c->arena, sizeof c->arena, "off");
  return c;
}

static void card_free(vs_dump_card *c) {
  for (size_t i = 0; i < c->nregions; i++) free(c->regions[i].blocks);
  free(c->regions);
  free(c->calls);
  free(c->classes);
  free(c->samples);
}

void vs_dump_free(vs_dump *d) {
  for (size_t i = 0; i < d->ncards; i++) card_free(&d->cards[i]);
  free(d->cards);
  d->cards = NULL;
  d->ncards = 0;
}

vs_dump_region *vs_dump_card_add_region(vs_dump_card *c, uint64_t base, uint64_t size, vs_dump_region_kind kind,
                                        uint64_t class_size) {
  if (grow((void **)&c->regions, &c->cap_regions, c->nregions, sizeof *c->regions)) return NULL;
  vs_dump_region *r = &c->regions[c->nregions++];
  memset(r, 0, sizeof *r);
  r->base = base;
  r->size = size;
  r->kind = kind;
  r->class_size = class_size;
  return r;
}

int vs_dump_region_add_block(vs_dump_region *r, uint64_t offset, uint64_t size, vs_dump_block_state state) {
  if (grow((void **)&r->blocks, &r->cap_blocks, r->nblocks, sizeof *r->blocks)) return -1;
  r->blocks[r->nblocks++] = (vs_dump_block){offset, size, state};
  return 0;
}

int vs_dump_card_add_call(vs_dump_card *c, const char *name, uint64_t count) {
  if (grow((void **)&c->calls, &c->cap_calls, c->ncalls, sizeof *c->calls)) return -1;
  vs_dump_counter *p = &c->calls[c->ncalls++];
  copy_str(p->name, sizeof p->name, name);
  p->count = count;
  return 0;
}

int vs_dump_card_add_class(vs_dump_card *c, uint64_t size, uint64_t live, uint64_t slots) {
  if (grow((void **)&c->classes, &c->cap_classes, c->nclasses, sizeof *c->classes)) return -1;
  c->classes[c->nclasses++] = (vs_dump_class){size, live, slots};
  return 0;
}

int vs_dump_card_set_samples(vs_dump_card *c, const vs_dump_sample *s, size_t n) {
  vs_dump_sample *p = NULL;
  if (n) {
    p = malloc(n * sizeof *p);
    if (!p) return -1;
    memcpy(p, s, n * sizeof *p);
  }
  free(c->samples);
  c->samples = p;
  c->nsamples = n;
  return 0;
}

unsigned vs_dump_bucket(uint64_t size) {
  if (size == 0) return 0;
  unsigned b = 63u - (unsigned)__builtin_clzll(size);
  return b < VS_DUMP_HIST_BUCKETS ? b : VS_DUMP_HIST_BUCKETS - 1;
}

double vs_dump_fragmentation(uint64_t largest_free, uint64_t free_bytes) {
  if (free_bytes == 0) return 0.0;
  if (largest_free >= free_bytes) return 0.0;
  return 1.0 - (double)largest_free / (double)free_bytes;
}

static void add_extent(vs_dump_card *c, uint64_t size) {
  if (!size) return;
  unsigned b = vs_dump_bucket(size);
  c->hist_count[b]++;
  c->hist_bytes[b] += size;
}

void vs_dump_card_derive_free(vs_dump_card *c) {
  memset(c->hist_count, 0, sizeof c->hist_count);
  memset(c->hist_bytes, 0, sizeof c->hist_bytes);
  c->free_bytes = c->pending_bytes = c->largest_free = 0;
  for (size_t i = 0; i < c->nregions; i++) {
    const vs_dump_region *r = &c->regions[i];
    /* An extent is a run of adjacent non-live blocks; a gap between blocks
     * (offsets not contiguous) ends it, since nothing says what is there. */
    uint64_t extent = 0, end = 0;
    for (size_t j = 0; j < r->nblocks; j++) {
      const vs_dump_block *b = &r->blocks[j];
      if (b->offset != end || b->state != VS_DUMP_FREE) {
        add_extent(c, extent);
        extent = 0;
      }
      if (b->state == VS_DUMP_FREE) {
        extent += b->size;
        if (extent > c->largest_free) c->largest_free = extent;
      }
      if (b->state != VS_DUMP_LIVE) c->free_bytes += b->size;
      if (b->state == VS_DUMP_PENDING) c->pending_bytes += b->size;
      end = b->offset + b->size;
    }
    add_extent(c, extent);
  }
  c->external_fragmentation = vs_dump_fragmentation(c->largest_free, c->free_bytes);
}

const char *vs_dump_region_kind_name(vs_dump_region_kind k) {
  return (k >= VS_DUMP_REGION_SLAB && k <= VS_DUMP_REGION_ALLOCATION) ? kind_names[k] : "unknown";
}

int vs_dump_region_kind_parse(const char *s, vs_dump_region_kind *out) {
  for (int k = VS_DUMP_REGION_SLAB; k <= VS_DUMP_REGION_ALLOCATION; k++)
    if (!strcmp(s, kind_names[k])) {
      *out = (vs_dump_region_kind)k;
      return 0;
    }
  return -1;
}

const char *vs_dump_block_state_name(vs_dump_block_state s) {
  return (unsigned)s <= VS_DUMP_PENDING ? state_names[s] : "unknown";
}

int vs_dump_block_state_parse(const char *s, vs_dump_block_state *out) {
  for (int k = 0; k <= VS_DUMP_PENDING; k++)
    if (!strcmp(s, state_names[k])) {
      *out = (vs_dump_block_state)k;
      return 0;
    }
  return -1;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) VS_PRINTF(3, 4);
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

/* By base; at equal bases the larger first, so an outer region precedes
 * what is nested in it. */
static int cmp_region_base(const void *a, const void *b) {
  const vs_dump_region *x = *(vs_dump_region *const *)a, *y = *(vs_dump_region *const *)b;
  if (x->base != y->base) return x->base < y->base ? -1 : 1;
  return x->size > y->size ? -1 : x->size < y->size;
}

/* Is [base, base+size) inside one live block of r? */
static int inside_live_block(const vs_dump_region *r, uint64_t base, uint64_t size) {
  size_t lo = 0, hi = r->nblocks;
  uint64_t off = base - r->base;
  while (lo < hi) {   /* the last block with offset <= off */
    size_t mid = (lo + hi) / 2;
    if (r->blocks[mid].offset <= off) lo = mid + 1;
    else hi = mid;
  }
  if (!lo) return 0;
  const vs_dump_block *b = &r->blocks[lo - 1];
  return b->state == VS_DUMP_LIVE && off - b->offset <= b->size && size <= b->size - (off - b->offset);
}

/* Regions do not overlap, except that a region may lie inside one live
 * block of another (a slab carved from the heap); such nested regions do
 * not overlap each other. */
static int check_regions(const vs_dump_card *c, char *err, size_t errlen) {
  const vs_dump_region **v = malloc(c->nregions * sizeof *v);
  if (!v) return fail(err, errlen, "out of memory");
  for (size_t i = 0; i < c->nregions; i++) v[i] = &c->regions[i];
  qsort(v, c->nregions, sizeof *v, cmp_region_base);
  const vs_dump_region *outer = v[0], *nested = NULL;
  int rc = 0;
  for (size_t i = 1; i < c->nregions && !rc; i++) {
    const vs_dump_region *r = v[i];
    if (r->base >= outer->base + outer->size) {
      outer = r;
      nested = NULL;
      continue;
    }
    if (r->base + r->size <= outer->base + outer->size && inside_live_block(outer, r->base, r->size) &&
        (!nested || nested->base + nested->size <= r->base)) {
      nested = r;
      continue;
    }
    rc = fail(err, errlen, "card %d: regions at 0x%llx and 0x%llx overlap", c->index, (unsigned long long)outer->base,
              (unsigned long long)r->base);
  }
  free(v);
  return rc;
}

int vs_dump_check(const vs_dump *d, char *err, size_t errlen) {
  for (size_t ci = 0; ci < d->ncards; ci++) {
    const vs_dump_card *c = &d->cards[ci];
    for (size_t cj = 0; cj < ci; cj++)
      if (d->cards[cj].index == c->index) return fail(err, errlen, "card %d appears twice", c->index);
    for (size_t i = 0; i < c->nregions; i++) {
      const vs_dump_region *r = &c->regions[i];
      if (r->size == 0) return fail(err, errlen, "card %d region %zu: size 0", c->index, i);
      if (r->base + r->size < r->base) return fail(err, errlen, "card %d region %zu: base + size overflows", c->index, i);
      uint64_t end = 0;
      for (size_t j = 0; j < r->nblocks; j++) {
        const vs_dump_block *b = &r->blocks[j];
        if (b->size == 0) return fail(err, errlen, "card %d region %zu block %zu: size 0", c->index, i, j);
        if (b->offset < end)
          return fail(err, errlen, "card %d region %zu block %zu: overlaps the block before it or is out of order",
                      c->index, i, j);
        if (b->offset > r->size || b->size > r->size - b->offset)
          return fail(err, errlen, "card %d region %zu block %zu: ends past the region", c->index, i, j);
        end = b->offset + b->size;
      }
    }
    if (c->nregions > 1 && check_regions(c, err, errlen)) return -1;
  }
  return 0;
}

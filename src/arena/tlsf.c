/* Two-level segregated fit: see tlsf.h for the invariants. */

/* The used table's key is a block's address (a multiple of VS_TLSF_ALIGN):
 * hashed as one integer (a multiply; uthash takes the bucket from the low
 * bits, so the product's high half) and compared as one, instead of
 * uthash's byte-wise Jenkins hash and memcmp: they were ~200 of the ~950
 * instructions of a heap allocation and its free. Defined before uthash.h
 * is first included (through tlsf.h), so only this file's table uses them. */
#include <stdint.h>
static inline unsigned addr_hash(const void *key) {
  return (unsigned)((*(const uint64_t *)key * 0x9e3779b97f4a7c15ull) >> 32);
}
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = addr_hash(keyptr))
#define HASH_KEYCMP(a, b, len) (*(const uint64_t *)(a) != *(const uint64_t *)(b))
#include "tlsf.h"

#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Class of a block of `size` bytes (size >= VS_TLSF_ALIGN). */
static void mapping(uint64_t size, int *fl, int *sl) {
  int f = vs_msb64(size);
  *fl = f;
  *sl = (int)((size >> (f - VS_TLSF_SL_LOG2)) & (VS_TLSF_SL - 1));
}

static vs_tblock *desc_new(vs_tlsf *t) {
  vs_tblock *b = t->spare;
  if (b) t->spare = b->next;
  else b = malloc(sizeof *b);
  return b;   /* uninitialised: every caller assigns the whole descriptor */
}
static void desc_put(vs_tlsf *t, vs_tblock *b) { b->next = t->spare; t->spare = b; }

/* Every field but the used table's handle, which HASH_ADD fills when the
 * block goes into the table and nothing reads before. Field by field: a
 * compound literal zeroes the whole descriptor first (a `rep stos` of its
 * 136 bytes, ~35 % of take_at's time on a heap allocation). */
static void desc_fill(vs_tblock *d, uint64_t addr, uint64_t size, vs_tblock *prev, vs_tblock *next,
                      vs_tregion *region, int state) {
  d->addr = addr;
  d->size = size;
  d->prev = prev;
  d->next = next;
  d->fprev = d->fnext = NULL;
  d->region = region;
  d->stamp = 0;
  d->req = 0;
  d->state = state;
}

static void list_insert(vs_tlsf *t, vs_tblock *b) {
  int fl, sl;
  t->gen++;
  mapping(b->size, &fl, &sl);
  b->fprev = NULL;
  b->fnext = t->lists[fl][sl];
  if (b->fnext) b->fnext->fprev = b;
  t->lists[fl][sl] = b;
  t->fl_bitmap |= 1ull << fl;
  t->sl_bitmap[fl] |= 1u << sl;
  t->free_bytes += b->size;
}

/* b leaves the list of the class of `size` (its size when it was listed). */
static void list_remove_as(vs_tlsf *t, vs_tblock *b, uint64_t size) {
  int fl, sl;
  t->gen++;
  mapping(size, &fl, &sl);
  if (b->fprev) b->fprev->fnext = b->fnext;
  else t->lists[fl][sl] = b->fnext;
  if (b->fnext) b->fnext->fprev = b->fprev;
  b->fprev = b->fnext = NULL;
  if (!t->lists[fl][sl]) {
    t->sl_bitmap[fl] &= ~(1u << sl);
    if (!t->sl_bitmap[fl]) t->fl_bitmap &= ~(1ull << fl);
  }
  t->free_bytes -= size;
}
static void list_remove(vs_tlsf *t, vs_tblock *b) { list_remove_as(t, b, b->size); }

/* b, listed at old_size, now has b->size: where list_remove_as and
 * list_insert would leave it (the head of its new class's list), without
 * their class and bitmap work when the class is the same. */
static void list_relist(vs_tlsf *t, vs_tblock *b, uint64_t old_size) {
  int fl, sl, nfl, nsl;
  t->gen++;
  mapping(old_size, &fl, &sl);
  mapping(b->size, &nfl, &nsl);
  if (fl != nfl || sl != nsl) {
    list_remove_as(t, b, old_size);
    list_insert(t, b);
    return;
  }
  t->free_bytes += b->size - old_size;
  if (!b->fprev) return;   /* the head already */
  b->fprev->fnext = b->fnext;
  if (b->fnext) b->fnext->fprev = b->fprev;
  b->fprev = NULL;
  b->fnext = t->lists[fl][sl];
  b->fnext->fprev = b;
  t->lists[fl][sl] = b;
}

void vs_tlsf_init(vs_tlsf *t) {
  memset(t, 0, sizeof *t);
  t->anchor.addr = UINT64_MAX;
  HASH_ADD(hh, t->used, addr, sizeof(uint64_t), &t->anchor);
}

void vs_tlsf_fini(vs_tlsf *t) {
  HASH_CLEAR(hh, t->used);
  for (vs_tregion *r = t->regions; r; r = r->rnext) {
    vs_tblock *b = r->first;
    while (b) { vs_tblock *n = b->next; free(b); b = n; }
    r->first = NULL;
  }
  while (t->spare) { vs_tblock *n = t->spare->next; free(t->spare); t->spare = n; }
  memset(t, 0, sizeof *t);
}

int vs_tlsf_add_region(vs_tlsf *t, vs_tregion *r) {
  vs_tblock *b = desc_new(t);
  if (!b) return -1;
  desc_fill(b, r->base, r->size, NULL, NULL, r, VS_TB_FREE);
  r->first = b;
  r->used = 0;
  r->ord = t->next_ord++;
  r->rprev = NULL;
  r->rnext = t->regions;
  if (t->regions) t->regions->rprev = r;
  t->regions = r;
  list_insert(t, b);
  return 0;
}

void vs_tlsf_remove_region(vs_tlsf *t, vs_tregion *r) {
  vs_tblock *b = r->first;
  list_remove(t, b);
  desc_put(t, b);
  r->first = NULL;
  if (r->rprev) r->rprev->rnext = r->rnext;
  else t->regions = r->rnext;
  if (r->rnext) r->rnext->rprev = r->rprev;
}

/* Compares how full the regions of a and b are: >0 when a's is fuller. */
static int fuller(const vs_tlsf *t, const vs_tblock *a, const vs_tblock *b) {
  if (t->fuller) return t->fuller(t->fuller_ctx, a, b);
  if (a->region == b->region) return 0;
  return vs_tlsf_cmp_share(a->region->used, a->region->size, b->region->used, b->region->size);
}

/* Best block >= size in one list: the smallest; among blocks of that size
 * the one in the fullest region (or as the owner ranks them), so that
 * sparse chunks drain and can go back whole; then the first place in the
 * heap's order (vs_tregion_before). */
static vs_tblock *scan_list(const vs_tlsf *t, vs_tblock *b, uint64_t size, int (*accept)(const vs_tblock *)) {
  vs_tblock *best = NULL;
  for (int n = 0; b && n < VS_TLSF_SCAN; b = b->fnext, n++) {
    if (b->size < size || (accept && !accept(b))) continue;
    if (!best || b->size < best->size) { best = b; continue; }
    if (b->size > best->size) continue;
    int f = fuller(t, b, best);
    if (f > 0 || (f == 0 && vs_tregion_before(b->region, b->addr, best->region, best->addr))) best = b;
  }
  return best;
}

vs_tblock *vs_tlsf_find(vs_tlsf *t, uint64_t size) { return vs_tlsf_find_if(t, size, NULL); }

/* A class's rank in the order vs_tlsf_find_if examines the classes. */
static int class_rank(uint64_t size) {
  int fl, sl;
  mapping(size, &fl, &sl);
  return fl * (int)VS_TLSF_SL + sl;
}

/* The rank of the first non-empty class after rank c, or INT_MAX. */
static int next_rank(const vs_tlsf *t, int c) {
  int fl = c / (int)VS_TLSF_SL, sl = c % (int)VS_TLSF_SL;
  uint32_t slmap = sl + 1 < (int)VS_TLSF_SL ? t->sl_bitmap[fl] & (~0u << (sl + 1)) : 0;
  if (slmap) return fl * (int)VS_TLSF_SL + __builtin_ctz(slmap);
  uint64_t flmap = fl + 1 < VS_TLSF_FL ? t->fl_bitmap & (~0ull << (fl + 1)) : 0;
  if (!flmap) return INT_MAX;
  int f = __builtin_ctzll(flmap);
  return f * (int)VS_TLSF_SL + __builtin_ctz(t->sl_bitmap[f]);
}

/* The case analysis, with S the FREE blocks now and S' = S without `gone`
 * and with a block of hsize bytes (H) at the head of its class's list:
 * find(S') examines the classes in rank order and answers from the first
 * one whose scanned entries hold a fit; H always fits. `gone` alone in its
 * list leaves every other list's scan window as it was. Then with
 * b = find(S): no b, or b in a class above H's: no class up to H's holds
 * a scanned fit in S' but H, which is alone among fits at its list's head.
 * b == gone: the classes before gone's held no fit; gone's class empties;
 * if no class from there up to H's holds blocks, H is alone in S' up to
 * its own. Anything else: b (or a block ranked against H) may win. */
int vs_tlsf_find_would_take(vs_tlsf *t, uint64_t size, uint64_t hsize, const vs_tblock *gone) {
  if (gone && (gone->fprev || gone->fnext)) return 0;
  int ch = class_rank(hsize);
  vs_tblock *b = vs_tlsf_find(t, size);
  if (!b) return 1;
  if (b == gone) {
    int cg = class_rank(gone->size);
    return cg == ch || next_rank(t, cg) > ch;
  }
  return class_rank(b->size) > ch;
}

/* Its own class first (blocks of the same size are the common reuse), then
 * each non-empty class above it in turn: without `accept` the first of
 * those answers, since every block there is large enough. */
vs_tblock *vs_tlsf_find_if(vs_tlsf *t, uint64_t size, int (*accept)(const vs_tblock *)) {
  int fl, sl;
  mapping(size, &fl, &sl);
  for (uint64_t flmap = t->fl_bitmap & (~0ull << fl); flmap; flmap &= flmap - 1) {
    int f = __builtin_ctzll(flmap);
    for (uint32_t slmap = t->sl_bitmap[f] & (f == fl ? ~0u << sl : ~0u); slmap; slmap &= slmap - 1) {
      vs_tblock *b = scan_list(t, t->lists[f][__builtin_ctz(slmap)], size, accept);
      if (b) return b;
    }
  }
  return NULL;
}

/* The live block at the front of free block b, whose rest stays FREE under
 * b's descriptor (the common case of take_at: no leading remainder): the
 * free lists end as take_within leaves them. */
static vs_tblock *take_front(vs_tlsf *t, vs_tblock *b, uint64_t size) {
  vs_tblock *u = desc_new(t);
  if (!u) return NULL;
  desc_fill(u, b->addr, size, b->prev, b, b->region, VS_TB_LIVE);
  if (b->prev) b->prev->next = u;
  else b->region->first = u;
  b->prev = u;
  uint64_t old = b->size;
  b->addr += size;
  b->size -= size;
  list_relist(t, b, old);
  return u;
}

/* The general case: b leaves its list and becomes the taken block; what
 * lies before addr and after addr + size stays FREE in blocks of its own. */
static vs_tblock *take_within(vs_tlsf *t, vs_tblock *b, uint64_t addr, uint64_t size) {
  list_remove(t, b);
  if (addr > b->addr) {          /* leading remainder stays FREE */
    vs_tblock *lead = desc_new(t);
    if (!lead) { list_insert(t, b); return NULL; }
    desc_fill(lead, b->addr, addr - b->addr, b->prev, b, b->region, VS_TB_FREE);
    if (b->prev) b->prev->next = lead;
    else b->region->first = lead;
    b->prev = lead;
    b->size -= lead->size;
    b->addr = addr;
    list_insert(t, lead);
  }
  if (b->size > size) {          /* trailing remainder stays FREE */
    vs_tblock *tail = desc_new(t);
    if (!tail) { list_insert(t, b); return NULL; }
    desc_fill(tail, addr + size, b->size - size, b, b->next, b->region, VS_TB_FREE);
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    list_insert(t, tail);
  }
  return b;
}

vs_tblock *vs_tlsf_take_at(vs_tlsf *t, vs_tblock *b, uint64_t addr, uint64_t size) {
  b = addr == b->addr && b->size > size ? take_front(t, b, size) : take_within(t, b, addr, size);
  if (!b) return NULL;
  b->state = VS_TB_LIVE;
  b->req = 0;
  HASH_ADD(hh, t->used, addr, sizeof(uint64_t), b);
  t->used_bytes += b->size;
  b->region->used += b->size;
  t->gen++;
  return b;
}

uint64_t vs_tlsf_largest_free(const vs_tlsf *t) {
  if (!t->fl_bitmap) return 0;
  int fl = 63 - __builtin_clzll(t->fl_bitmap);
  int sl = 31 - __builtin_clz(t->sl_bitmap[fl]);
  uint64_t most = 0;
  for (const vs_tblock *f = t->lists[fl][sl]; f; f = f->fnext)
    if (f->size > most) most = f->size;
  return most;
}

vs_tblock *vs_tlsf_used(vs_tlsf *t, uint64_t addr) {
  vs_tblock *b;
  HASH_FIND(hh, t->used, &addr, sizeof(uint64_t), b);
  return b;
}

void vs_tlsf_pend(vs_tlsf *t, vs_tblock *b, uint64_t stamp) {
  (void)t;
  b->state = VS_TB_PENDING;
  b->stamp = stamp;
}

vs_tblock *vs_tlsf_release(vs_tlsf *t, vs_tblock *b) {
  HASH_DELETE(hh, t->used, b);
  t->used_bytes -= b->size;
  b->region->used -= b->size;
  t->gen++;
  b->state = VS_TB_FREE;
  vs_tblock *p = b->prev, *n = b->next;
  int pf = p && p->state == VS_TB_FREE, nf = n && n->state == VS_TB_FREE;
  /* One free neighbour (the common case): it takes b in, keeping its
   * descriptor, and is listed where the general case below would list the
   * merged block. */
  if (pf != nf) {
    vs_tblock *m = pf ? p : n;
    uint64_t old = m->size;
    if (nf) {
      n->addr = b->addr;
      n->prev = b->prev;
      if (b->prev) b->prev->next = n;
      else b->region->first = n;
    } else {
      p->next = n;
      if (n) n->prev = p;
    }
    m->size += b->size;
    desc_put(t, b);
    list_relist(t, m, old);
    return m;
  }
  if (pf) {   /* both free: absorb b into p */
    list_remove(t, p);
    p->size += b->size;
    p->next = n;
    if (n) n->prev = p;
    desc_put(t, b);
    b = p;
  }
  if (nf) {   /* absorb n into b */
    list_remove(t, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    desc_put(t, n);
  }
  list_insert(t, b);
  return b;
}

#define FAIL(...) do { snprintf(err, len, __VA_ARGS__); return -1; } while (0)

int vs_tlsf_check(vs_tlsf *t, char *err, size_t len) {
  uint64_t free_sum = 0, used_sum = 0, nfree = 0, nused = 0;
  for (vs_tregion *r = t->regions; r; r = r->rnext) {
    uint64_t at = r->base, in_use = 0;
    vs_tblock *prev = NULL;
    for (vs_tblock *b = r->first; b; prev = b, b = b->next) {
      if (b->addr != at) FAIL("tlsf: block at 0x%llx, expected 0x%llx (gap or overlap)",
                              (unsigned long long)b->addr, (unsigned long long)at);
      if (b->prev != prev || b->region != r) FAIL("tlsf: broken links at 0x%llx", (unsigned long long)b->addr);
      if (!b->size || b->size % VS_TLSF_ALIGN || b->addr % VS_TLSF_ALIGN)
        FAIL("tlsf: block 0x%llx size %llu not aligned", (unsigned long long)b->addr, (unsigned long long)b->size);
      if (b->state == VS_TB_FREE) {
        if (prev && prev->state == VS_TB_FREE) FAIL("tlsf: adjacent free blocks at 0x%llx (coalescing incomplete)",
                                                    (unsigned long long)b->addr);
        int fl, sl, found = 0;
        mapping(b->size, &fl, &sl);
        for (vs_tblock *f = t->lists[fl][sl]; f; f = f->fnext) if (f == b) { found = 1; break; }
        if (!found) FAIL("tlsf: free block 0x%llx not in its list", (unsigned long long)b->addr);
        free_sum += b->size;
        nfree++;
      } else {
        if (vs_tlsf_used(t, b->addr) != b) FAIL("tlsf: used block 0x%llx not in the table", (unsigned long long)b->addr);
        used_sum += b->size;
        in_use += b->size;
        nused++;
      }
      at += b->size;
    }
    if (at != r->base + r->size) FAIL("tlsf: region 0x%llx not tiled", (unsigned long long)r->base);
    if (in_use != r->used) FAIL("tlsf: region 0x%llx counts %llu used bytes, its blocks %llu", (unsigned long long)r->base,
                                (unsigned long long)r->used, (unsigned long long)in_use);
  }
  uint64_t listed = 0;
  for (int fl = 0; fl < VS_TLSF_FL; fl++) {
    if (!!(t->fl_bitmap & (1ull << fl)) != !!t->sl_bitmap[fl]) FAIL("tlsf: first-level bit %d wrong", fl);
    for (int sl = 0; sl < (int)VS_TLSF_SL; sl++) {
      if (!!(t->sl_bitmap[fl] & (1u << sl)) != !!t->lists[fl][sl]) FAIL("tlsf: bitmap (%d,%d) disagrees with list", fl, sl);
      for (vs_tblock *f = t->lists[fl][sl]; f; f = f->fnext) {
        int a, c;
        mapping(f->size, &a, &c);
        if (f->state != VS_TB_FREE || a != fl || c != sl) FAIL("tlsf: list (%d,%d) holds a wrong block", fl, sl);
        listed++;
      }
    }
  }
  if (listed != nfree) FAIL("tlsf: %llu listed, %llu free blocks", (unsigned long long)listed, (unsigned long long)nfree);
  if (free_sum != t->free_bytes || used_sum != t->used_bytes) FAIL("tlsf: byte counters disagree with the blocks");
  if (HASH_COUNT(t->used) != nused + 1) FAIL("tlsf: used table has %u entries, blocks %llu and the anchor", HASH_COUNT(t->used), (unsigned long long)nused);
  return 0;
}

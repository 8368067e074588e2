/* Striped hash of live allocations (see tracker.h), on uthash. */
#include "tracker.h"

#include "spinlock.h"

#include <stdlib.h>

typedef struct key {
  uint64_t value;
  uint64_t space;   /* 64-bit so the key has no padding */
} key;

/* The key is two integers: mixed once by a multiply-xorshift finaliser
 * (device addresses share their low bits, handles are small integers),
 * whose top bits pick the stripe and low bits uthash's bucket, and
 * compared as two integers, instead of uthash's byte-wise Jenkins hash and
 * memcmp (the pair of an allocation and its free pays each twice). */
static inline uint64_t key_mix(const key *k) {
  uint64_t x = k->value ^ (k->space << 61);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}
static inline unsigned key_hash(const void *p) { return (unsigned)key_mix((const key *)p); }
static inline int key_cmp(const void *a, const void *b) {
  const key *x = (const key *)a, *y = (const key *)b;
  return !(x->value == y->value && x->space == y->space);
}

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (t_oom = 1)
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = key_hash(keyptr))
#define HASH_KEYCMP(a, b, len) key_cmp(a, b)
static __thread int t_oom __attribute__((tls_model("initial-exec")));
#include <uthash.h>

/* Power of two. May change: the fork handlers take every stripe's lock
 * (spin locks, which lock checkers do not follow as mutexes). */
#define VS_STRIPES 32
#define VS_STRIPE_BITS 5
_Static_assert((1 << VS_STRIPE_BITS) == VS_STRIPES, "stripe bits");

typedef struct rec {
  key k;
  vs_alloc_info info;
  UT_hash_handle hh;
} rec;

/* One cache line per stripe so two threads on two stripes do not share one.
 * Invariant: once a stripe has been used, its anchor (key space VS_SPACES,
 * which no caller asks for) stays in the table, so the table is never
 * emptied: uthash frees an empty table and rebuilds it on the next insert,
 * which would cost a bucket-array allocation on every alloc/free pair. */
typedef struct stripe {
  vs_spinlock lock;   /* held for a table operation only: see spinlock.h */
  rec *head;
  uint64_t count[VS_SPACES];
  /* One record kept from the last removal for the next insertion: an
   * allocation and its free then make no malloc/free of their own. At most
   * one per stripe, so the memory it keeps is bounded. */
  rec *spare;
  rec anchor;
} __attribute__((aligned(64))) stripe;

#define STRIPE_INIT {VS_SPINLOCK_INIT, NULL, {0}, NULL, {{0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 0}, {0}}}
#define S4 STRIPE_INIT, STRIPE_INIT, STRIPE_INIT, STRIPE_INIT
_Static_assert(VS_STRIPES == 32, "the initialiser spells out 32 stripes");
static stripe g_stripes[VS_STRIPES] = {S4, S4, S4, S4, S4, S4, S4, S4};

static stripe *stripe_of(uint64_t mix) { return &g_stripes[mix >> (64 - VS_STRIPE_BITS)]; }

int vs_tracker_insert(vs_space space, const vs_alloc_info *info, vs_alloc_info *stale) {
  key k = {info->key, (uint64_t)space};
  uint64_t mix = key_mix(&k);
  unsigned hv = (unsigned)mix;
  stripe *s = stripe_of(mix);
  int ret = 0;
  vs_spin_lock(&s->lock);
  rec *r = s->spare;
  s->spare = NULL;
  if (!r) {
    vs_spin_unlock(&s->lock);   /* malloc outside the stripe's lock */
    r = malloc(sizeof *r);
    if (!r) return -1;
    vs_spin_lock(&s->lock);
  }
  r->k = k;
  r->info = *info;
  if (!s->head) {
    s->anchor.k.value = 0;
    s->anchor.k.space = VS_SPACES;
    t_oom = 0;
    HASH_ADD(hh, s->head, k, sizeof(key), &s->anchor);
    if (t_oom) s->head = NULL;   /* no table: the record below gets the same chance */
  }
  rec *old = NULL;
  HASH_FIND_BYHASHVALUE(hh, s->head, &r->k, sizeof(key), hv, old);
  if (old) {
    HASH_DEL(s->head, old);
    s->count[space]--;
    if (stale) *stale = old->info;
    ret = 1;
  }
  t_oom = 0;
  HASH_ADD_BYHASHVALUE(hh, s->head, k, sizeof(key), hv, r);
  if (t_oom) ret = -1;
  else s->count[space]++;
  vs_spin_unlock(&s->lock);
  if (ret == -1) free(r);   /* uthash did not link it */
  free(old);
  return ret;
}

int vs_tracker_remove(vs_space space, uint64_t value, unsigned kind_mask, vs_alloc_info *out) {
  key k = {value, (uint64_t)space};
  uint64_t mix = key_mix(&k);
  stripe *s = stripe_of(mix);
  rec *r = NULL;
  vs_spin_lock(&s->lock);
  HASH_FIND_BYHASHVALUE(hh, s->head, &k, sizeof(key), (unsigned)mix, r);
  if (r && (kind_mask & (1u << r->info.kind))) {
    HASH_DEL(s->head, r);
    s->count[space]--;
  } else {
    r = NULL;
  }
  if (r && !s->spare) {
    if (out) *out = r->info;
    s->spare = r;
    vs_spin_unlock(&s->lock);
    return 0;
  }
  vs_spin_unlock(&s->lock);
  if (!r) return -1;
  if (out) *out = r->info;
  free(r);
  return 0;
}

int vs_tracker_find(vs_space space, uint64_t value, vs_alloc_info *out) {
  key k = {value, (uint64_t)space};
  uint64_t mix = key_mix(&k);
  stripe *s = stripe_of(mix);
  rec *r = NULL;
  vs_spin_lock(&s->lock);
  HASH_FIND_BYHASHVALUE(hh, s->head, &k, sizeof(key), (unsigned)mix, r);
  if (r && out) *out = r->info;
  vs_spin_unlock(&s->lock);
  return r ? 0 : -1;
}

uint64_t vs_tracker_count(vs_space space) {
  uint64_t n = 0;
  for (int i = 0; i < VS_STRIPES; i++) {
    vs_spin_lock(&g_stripes[i].lock);
    n += g_stripes[i].count[space];
    vs_spin_unlock(&g_stripes[i].lock);
  }
  return n;
}

size_t vs_tracker_take_ctx(vs_space space, uint64_t ctx_id, unsigned kind_mask, vs_alloc_info **out) {
  vs_alloc_info *v = NULL;
  size_t n = 0, cap = 0;
  int full = 0;
  for (int i = 0; i < VS_STRIPES && !full; i++) {
    stripe *s = &g_stripes[i];
    rec *r, *tmp;
    vs_spin_lock(&s->lock);
    HASH_ITER(hh, s->head, r, tmp) {
      if (r == &s->anchor || r->k.space != (uint64_t)space || r->info.ctx_id != ctx_id ||
          !(kind_mask & (1u << r->info.kind)))
        continue;
      if (n == cap) {
        size_t nc = cap ? cap * 2 : 16;
        vs_alloc_info *nv = realloc(v, nc * sizeof *nv);
        if (!nv) {
          full = 1;
          break;
        }
        v = nv;
        cap = nc;
      }
      v[n++] = r->info;
      HASH_DEL(s->head, r);
      s->count[space]--;
      free(r);
    }
    vs_spin_unlock(&s->lock);
  }
  *out = v;
  return n;
}

void vs_tracker_atfork_prepare(void) {
  for (int i = 0; i < VS_STRIPES; i++) vs_spin_lock(&g_stripes[i].lock);
}

void vs_tracker_atfork_parent(void) {
  for (int i = VS_STRIPES - 1; i >= 0; i--) vs_spin_unlock(&g_stripes[i].lock);
}

void vs_tracker_atfork_child(void) {
  for (int i = 0; i < VS_STRIPES; i++) {
    stripe *s = &g_stripes[i];
    rec *r, *tmp;
    HASH_ITER(hh, s->head, r, tmp) {
      HASH_DEL(s->head, r);
      if (r != &s->anchor) free(r);
    }
    s->head = NULL;
    free(s->spare);
    s->spare = NULL;
    for (int sp = 0; sp < VS_SPACES; sp++) s->count[sp] = 0;
    /* Held since prepare by the thread that forked, the only one here. */
    vs_spin_unlock(&s->lock);
  }
}

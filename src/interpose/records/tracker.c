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
  /* The last record removed stays linked, dead (no lookup sees it), so the
   * next insertion of its key revives it in place: a program that frees a
   * block and gets the same address back (a slab slot, the heap's parked
   * block) makes no table insertion or deletion. Removing another record
   * unlinks the dead one first, so at most one is dead per stripe. */
  rec *dead;
  /* One unlinked record kept for the next insertion of another key: an
   * allocation and its free then make no malloc/free of their own. At most
   * one per stripe, so the memory the two keep is bounded. */
  rec *spare;
  rec anchor;
} __attribute__((aligned(64))) stripe;

#define STRIPE_INIT {VS_SPINLOCK_INIT, NULL, {0}, NULL, NULL, {{0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {0}}}
#define S4 STRIPE_INIT, STRIPE_INIT, STRIPE_INIT, STRIPE_INIT
_Static_assert(VS_STRIPES == 32, "the initialiser spells out 32 stripes");
static stripe g_stripes[VS_STRIPES] = {S4, S4, S4, S4, S4, S4, S4, S4};

static stripe *stripe_of(uint64_t mix) { return &g_stripes[mix >> (64 - VS_STRIPE_BITS)]; }

/* The anchor is linked before the first record: see stripe. */
static void ensure_anchor(stripe *s) {
  if (s->head) return;
  s->anchor.k.value = 0;
  s->anchor.k.space = VS_SPACES;
  t_oom = 0;
  HASH_ADD(hh, s->head, k, sizeof(key), &s->anchor);
  if (t_oom) s->head = NULL;   /* no table: the record gets the same chance */
}

int vs_tracker_insert(vs_space space, const vs_alloc_info *info, vs_alloc_info *stale) {
  key k = {info->key, (uint64_t)space};
  uint64_t mix = key_mix(&k);
  unsigned hv = (unsigned)mix;
  stripe *s = stripe_of(mix);
  int ret = 0;
  rec *r = NULL, *old = NULL;
  vs_spin_lock(&s->lock);
  for (;;) {
    HASH_FIND_BYHASHVALUE(hh, s->head, &k, sizeof(key), hv, old);
    if (old && old == s->dead) {   /* its own key's dead record: revived */
      s->dead = NULL;
      old->info = *info;
      s->count[space]++;
      if (r && !s->spare) {
        s->spare = r;
        r = NULL;
      }
      vs_spin_unlock(&s->lock);
      if (r) free(r);   /* free(NULL) is a call too, on the hot path */
      return 0;
    }
    if (!r) {
      r = s->spare;
      s->spare = NULL;
    }
    if (!r && s->dead) {
      r = s->dead;
      s->dead = NULL;
      HASH_DEL(s->head, r);
    }
    if (r) break;
    vs_spin_unlock(&s->lock);   /* malloc outside the stripe's lock, then look again */
    r = malloc(sizeof *r);
    if (!r) return -1;
    vs_spin_lock(&s->lock);
  }
  r->k = k;
  r->info = *info;
  ensure_anchor(s);
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
  if (old) free(old);   /* a new key has none: no call to free(NULL) */
  return ret;
}

int vs_tracker_remove(vs_space space, uint64_t value, unsigned kind_mask, vs_alloc_info *out) {
  key k = {value, (uint64_t)space};
  uint64_t mix = key_mix(&k);
  stripe *s = stripe_of(mix);
  rec *r = NULL;
  vs_spin_lock(&s->lock);
  HASH_FIND_BYHASHVALUE(hh, s->head, &k, sizeof(key), (unsigned)mix, r);
  if (!r || r == s->dead || !(kind_mask & (1u << r->info.kind))) {
    vs_spin_unlock(&s->lock);
    return -1;
  }
  s->count[space]--;
  if (out) *out = r->info;
  rec *gone = s->dead;   /* the previous dead record is unlinked: one per stripe */
  s->dead = r;
  if (gone) {
    HASH_DEL(s->head, gone);
    if (!s->spare) {
      s->spare = gone;
      gone = NULL;
    }
  }
  vs_spin_unlock(&s->lock);
  if (gone) free(gone);
  return 0;
}

/* The live record of (space, value) in *r (NULL if none), with its
 * stripe's lock taken; the caller gives it back. */
static stripe *find_locked(vs_space space, uint64_t value, rec **r) {
  key k = {value, (uint64_t)space};
  uint64_t mix = key_mix(&k);
  stripe *s = stripe_of(mix);
  vs_spin_lock(&s->lock);
  HASH_FIND_BYHASHVALUE(hh, s->head, &k, sizeof(key), (unsigned)mix, *r);
  if (*r == s->dead) *r = NULL;
  return s;
}

int vs_tracker_find(vs_space space, uint64_t value, vs_alloc_info *out) {
  rec *r = NULL;
  stripe *s = find_locked(space, value, &r);
  if (r && out) *out = r->info;
  vs_spin_unlock(&s->lock);
  return r ? 0 : -1;
}

int vs_tracker_set_sync_memops(vs_space space, uint64_t value, int on) {
  rec *r = NULL;
  stripe *s = find_locked(space, value, &r);
  if (r) r->info.sync_memops = on != 0;
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
      if (r == &s->anchor || r == s->dead || r->k.space != (uint64_t)space || r->info.ctx_id != ctx_id ||
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
    s->dead = NULL;   /* freed with the table above */
    free(s->spare);
    s->spare = NULL;
    for (int sp = 0; sp < VS_SPACES; sp++) s->count[sp] = 0;
    /* Held since prepare by the thread that forked, the only one here. */
    vs_spin_unlock(&s->lock);
  }
}

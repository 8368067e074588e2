/* Striped hash of live allocations (see tracker.h), on uthash. */
#include "tracker.h"

#include "log.h"

#include <pthread.h>
#include <stdlib.h>

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (g_oom = 1)
static __thread int g_oom __attribute__((tls_model("initial-exec")));
#include <uthash.h>

#define VS_STRIPES 64   /* power of two; may change */

typedef struct rec {
  vs_alloc_info info;
  UT_hash_handle hh;
} rec;

/* One cache line per stripe so two threads on two stripes do not share one. */
typedef struct stripe {
  pthread_mutex_t lock;
  rec *head;
  uint64_t count;
} __attribute__((aligned(64))) stripe;

struct vs_tracker {
  stripe s[VS_STRIPES];
};

#define STRIPE_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0}
#define S4 STRIPE_INIT, STRIPE_INIT, STRIPE_INIT, STRIPE_INIT
#define S16 S4, S4, S4, S4
#define TRACKER_INIT {{S16, S16, S16, S16}}
_Static_assert(VS_STRIPES == 64, "TRACKER_INIT spells out 64 stripes");

vs_tracker vs_track_devptr = TRACKER_INIT;
vs_tracker vs_track_handle = TRACKER_INIT;
vs_tracker vs_track_va = TRACKER_INIT;

static stripe *stripe_of(vs_tracker *t, uint64_t key) {
  /* Device addresses share their low bits (alignment) and handles are
   * small integers: mix all bits before taking the top ones. */
  uint64_t x = key;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return &t->s[x >> (64 - 6)];
}

int vs_tracker_insert(vs_tracker *t, const vs_alloc_info *info, vs_alloc_info *stale) {
  rec *r = malloc(sizeof *r);
  if (!r) return -1;
  r->info = *info;
  stripe *s = stripe_of(t, info->key);
  int ret = 0;
  pthread_mutex_lock(&s->lock);
  rec *old = NULL;
  HASH_FIND(hh, s->head, &info->key, sizeof(uint64_t), old);
  if (old) {
    HASH_DEL(s->head, old);
    s->count--;
    if (stale) *stale = old->info;
    ret = 1;
  }
  g_oom = 0;
  HASH_ADD(hh, s->head, info.key, sizeof(uint64_t), r);
  if (g_oom) {
    ret = -1;
  } else {
    s->count++;
  }
  pthread_mutex_unlock(&s->lock);
  if (ret == -1) free(r);   /* uthash did not link it */
  free(old);
  return ret;
}

int vs_tracker_remove(vs_tracker *t, uint64_t key, unsigned kind_mask, vs_alloc_info *out) {
  stripe *s = stripe_of(t, key);
  rec *r = NULL;
  pthread_mutex_lock(&s->lock);
  HASH_FIND(hh, s->head, &key, sizeof(uint64_t), r);
  if (r && (kind_mask & (1u << r->info.kind))) {
    HASH_DEL(s->head, r);
    s->count--;
  } else {
    r = NULL;
  }
  pthread_mutex_unlock(&s->lock);
  if (!r) return -1;
  if (out) *out = r->info;
  free(r);
  return 0;
}

int vs_tracker_find(vs_tracker *t, uint64_t key, vs_alloc_info *out) {
  stripe *s = stripe_of(t, key);
  rec *r = NULL;
  pthread_mutex_lock(&s->lock);
  HASH_FIND(hh, s->head, &key, sizeof(uint64_t), r);
  if (r && out) *out = r->info;
  pthread_mutex_unlock(&s->lock);
  return r ? 0 : -1;
}

uint64_t vs_tracker_count(vs_tracker *t) {
  uint64_t n = 0;
  for (int i = 0; i < VS_STRIPES; i++) {
    pthread_mutex_lock(&t->s[i].lock);
    n += t->s[i].count;
    pthread_mutex_unlock(&t->s[i].lock);
  }
  return n;
}

void vs_tracker_atfork_prepare(vs_tracker *t) {
  for (int i = 0; i < VS_STRIPES; i++) pthread_mutex_lock(&t->s[i].lock);
}

void vs_tracker_atfork_parent(vs_tracker *t) {
  for (int i = VS_STRIPES - 1; i >= 0; i--) pthread_mutex_unlock(&t->s[i].lock);
}

void vs_tracker_atfork_child(vs_tracker *t) {
  for (int i = 0; i < VS_STRIPES; i++) {
    stripe *s = &t->s[i];
    rec *r, *tmp;
    HASH_ITER(hh, s->head, r, tmp) {
      HASH_DEL(s->head, r);
      free(r);
    }
    s->head = NULL;
    s->count = 0;
    pthread_mutex_init(&s->lock, NULL);
  }
}

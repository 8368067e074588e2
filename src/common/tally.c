/* Per-thread counters summed on read (see tally.h).
 *
 * Invariants, under each set's lock: every count ever added is in exactly
 * one place, the retired block or one block on the list; a block is on the
 * list exactly while a thread's table points at it (or that thread is gone
 * without its exit handler running: then it stays on the list, its counts
 * still summed, and only its memory is kept). The owner writes its block
 * without the lock; only the owner, the owner's exit handler and a fork
 * child (one thread) write it. */
#include "tally.h"

#include <stdlib.h>

__thread vs_tally_block *vs_tally_mine_[VS_TALLY_SETS + 1] __attribute__((tls_model("initial-exec")));

static pthread_mutex_t g_sets_mu = PTHREAD_MUTEX_INITIALIZER;
static vs_tally *g_sets[VS_TALLY_SETS];
static _Atomic int g_nsets;

static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static int g_key_ok;

/* Under t->mu: b's counts into the retired block, b zeroed and spare. */
static void retire_locked(vs_tally *t, vs_tally_block *b) {
  for (vs_tally_block **p = &t->blocks; *p; p = &(*p)->next)
    if (*p == b) {
      *p = b->next;
      break;
    }
  for (uint32_t i = 0; i < t->n; i++) {
    uint64_t v = atomic_load_explicit(&b->v[i], memory_order_relaxed);
    if (v) atomic_fetch_add_explicit(&t->retired[i], v, memory_order_relaxed);
    atomic_store_explicit(&b->v[i], 0, memory_order_relaxed);
  }
  b->next = t->spare;
  t->spare = b;
}

/* The thread-exit handler (the key's value only makes it run). A count
 * made after it, by another exit handler of the same thread, attaches a
 * block again; if no further round of handlers comes, that block stays on
 * the list (counted, not reused). */
static void thread_exit(void *unused) {
  (void)unused;
  int n = atomic_load_explicit(&g_nsets, memory_order_acquire);
  for (int s = 0; s < n; s++) {
    vs_tally_block *b = vs_tally_mine_[s];
    if (!b) continue;
    vs_tally *t = g_sets[s];
    pthread_mutex_lock(&t->mu);
    retire_locked(t, b);
    pthread_mutex_unlock(&t->mu);
    vs_tally_mine_[s] = NULL;
  }
}

static void make_key(void) { g_key_ok = pthread_key_create(&g_key, thread_exit) == 0; }

/* The set's slot, given on its first use; -1 past VS_TALLY_SETS sets. */
static int slot_of(vs_tally *t) {
  unsigned s = atomic_load_explicit(&t->slot, memory_order_acquire);
  if (s < VS_TALLY_SETS) return (int)s;
  pthread_mutex_lock(&g_sets_mu);
  s = atomic_load_explicit(&t->slot, memory_order_relaxed);
  if (s >= VS_TALLY_SETS) {
    int n = atomic_load_explicit(&g_nsets, memory_order_relaxed);
    if (n < VS_TALLY_SETS) {
      g_sets[n] = t;
      atomic_store_explicit(&g_nsets, n + 1, memory_order_release);
      atomic_store_explicit(&t->slot, (unsigned)n, memory_order_release);
      s = (unsigned)n;
    }
  }
  pthread_mutex_unlock(&g_sets_mu);
  return s < VS_TALLY_SETS ? (int)s : -1;
}

static vs_tally_block *attach(vs_tally *t) {
  int s = slot_of(t);
  if (s < 0) return NULL;
  if (vs_tally_mine_[s]) return vs_tally_mine_[s];
  pthread_once(&g_key_once, make_key);
  pthread_mutex_lock(&t->mu);
  vs_tally_block *b = t->spare;
  if (b) t->spare = b->next;
  else b = calloc(1, sizeof *b + (size_t)t->n * sizeof(_Atomic uint64_t));
  if (b) {
    b->next = t->blocks;
    t->blocks = b;
  }
  pthread_mutex_unlock(&t->mu);
  if (!b) return NULL;
  vs_tally_mine_[s] = b;
  if (g_key_ok) pthread_setspecific(g_key, b);
  return b;
}

void vs_tally_add_first(vs_tally *t, uint32_t i, uint64_t d) {
  vs_tally_block *b = attach(t);
  if (b) vs_tally_bump(b, i, d);
  else atomic_fetch_add_explicit(&t->retired[i], d, memory_order_relaxed);
}

/* The retired block is read under the lock too: an exit folding a block
 * between a read of it and the walk would be missed by both. */
void vs_tally_sums(vs_tally *t, uint32_t first, uint32_t n, uint64_t *out) {
  pthread_mutex_lock(&t->mu);
  for (uint32_t k = 0; k < n; k++) out[k] = atomic_load_explicit(&t->retired[first + k], memory_order_relaxed);
  for (vs_tally_block *b = t->blocks; b; b = b->next)
    for (uint32_t k = 0; k < n; k++) out[k] += atomic_load_explicit(&b->v[first + k], memory_order_relaxed);
  pthread_mutex_unlock(&t->mu);
}

uint64_t vs_tally_sum(vs_tally *t, uint32_t i) {
  uint64_t v;
  vs_tally_sums(t, i, 1, &v);
  return v;
}

void vs_tally_reset(vs_tally *t) {
  pthread_mutex_lock(&t->mu);
  for (uint32_t i = 0; i < t->n; i++) atomic_store_explicit(&t->retired[i], 0, memory_order_relaxed);
  for (vs_tally_block *b = t->blocks; b; b = b->next)
    for (uint32_t i = 0; i < t->n; i++) atomic_store_explicit(&b->v[i], 0, memory_order_relaxed);
  pthread_mutex_unlock(&t->mu);
}

/* Lock order: g_sets_mu, then the sets in slot order; a set's lock is the
 * last any path takes (counting happens under others' locks, never the
 * other way round), so the fork handlers take them after everyone else's. */
void vs_tally_atfork_prepare(void) {
  pthread_mutex_lock(&g_sets_mu);
  int n = atomic_load_explicit(&g_nsets, memory_order_relaxed);
  for (int s = 0; s < n; s++) pthread_mutex_lock(&g_sets[s]->mu);
}

void vs_tally_atfork_parent(void) {
  int n = atomic_load_explicit(&g_nsets, memory_order_relaxed);
  for (int s = n - 1; s >= 0; s--) pthread_mutex_unlock(&g_sets[s]->mu);
  pthread_mutex_unlock(&g_sets_mu);
}

void vs_tally_atfork_child(void) {
  int n = atomic_load_explicit(&g_nsets, memory_order_relaxed);
  for (int s = n - 1; s >= 0; s--) {
    vs_tally *t = g_sets[s];
    vs_tally_block *b = t->blocks;
    while (b) {
      vs_tally_block *next = b->next;
      if (b != vs_tally_mine_[s]) retire_locked(t, b);
      b = next;
    }
    pthread_mutex_unlock(&t->mu);
  }
  pthread_mutex_unlock(&g_sets_mu);
}

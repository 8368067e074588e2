/* The observation's per-card state (observe_cards.h): created on first
 * use, published with a release store; the live list of a card without an
 * arena. */
#include "observe_cards.h"

#include "log.h"

#include <stdlib.h>
#include <uthash.h>

struct obs_alloc {
  uint64_t addr, size;
  UT_hash_handle hh;
};

_Atomic(obs_card *) vs_obs_cards[VRAMSHIM_MAX_CARDS];
static pthread_mutex_t g_create_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *g_trace_pattern;   /* $VRAMSHIM_TRACE at start-up */

obs_card *vs_obs_card_peek(int card) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return NULL;
  return atomic_load_explicit(&vs_obs_cards[card], memory_order_acquire);
}

obs_card *vs_obs_card_create(int card) {
  pthread_mutex_lock(&g_create_lock);
  obs_card *c = atomic_load(&vs_obs_cards[card]);
  if (!c) {
    c = calloc(1, sizeof *c);
    if (c && vs_card_stats_init(&c->stats, 0)) {
      free(c);
      c = NULL;
    }
    if (c) {
      c->index = card;
      pthread_mutex_init(&c->list_lock, NULL);
      if (g_trace_pattern && *g_trace_pattern) {
        char err[256];
        c->trace = vs_trace_create(g_trace_pattern, card, err, sizeof err);
        if (!c->trace) VS_WARN("card %d: trace recording off: %s", card, err);
      }
      atomic_store_explicit(&vs_obs_cards[card], c, memory_order_release);
    } else {
      VS_ERROR("card %d: out of host memory for its stats; not observed", card);
    }
  }
  pthread_mutex_unlock(&g_create_lock);
  return c;
}

void vs_obs_cards_set_trace(const char *pattern) { g_trace_pattern = pattern; }

void vs_obs_list_add(obs_card *c, uint64_t ptr, uint64_t size) {
  obs_alloc *a = malloc(sizeof *a);
  if (!a) return;   /* the map misses it; the counters have it */
  a->addr = ptr;
  a->size = size;
  pthread_mutex_lock(&c->list_lock);
  obs_alloc *old = NULL;
  HASH_REPLACE(hh, c->list, addr, sizeof a->addr, a, old);
  if (!old) atomic_fetch_add_explicit(&c->nlist, 1, memory_order_relaxed);
  pthread_mutex_unlock(&c->list_lock);
  free(old);
}

int vs_obs_list_remove(obs_card *c, uint64_t ptr, uint64_t *size) {
  obs_alloc *a = NULL;
  pthread_mutex_lock(&c->list_lock);
  HASH_FIND(hh, c->list, &ptr, sizeof ptr, a);
  if (a) {
    HASH_DEL(c->list, a);
    atomic_fetch_sub_explicit(&c->nlist, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&c->list_lock);
  if (!a) return 0;
  *size = a->size;
  free(a);
  return 1;
}

/* Collects the live list of a card (for a dump) into a new array. */
int vs_obs_card_allocs(obs_card *c, vs_dump_alloc **out, size_t *n) {
  pthread_mutex_lock(&c->list_lock);
  size_t cnt = HASH_COUNT(c->list), i = 0;
  vs_dump_alloc *v = cnt ? malloc(cnt * sizeof *v) : NULL;
  if (cnt && !v) {
    pthread_mutex_unlock(&c->list_lock);
    return -1;
  }
  for (obs_alloc *a = c->list; a; a = a->hh.next) v[i++] = (vs_dump_alloc){a->addr, a->size};
  pthread_mutex_unlock(&c->list_lock);
  *out = v;
  *n = cnt;
  return 0;
}

void vs_obs_cards_atfork_child(void) {
  /* The child starts clean: no live allocations, zero counters, no thread.
   * Its list entries were the parent's; they are dropped (not freed: a
   * parent thread may have been inside the list at the fork), kept
   * reachable for leak checkers. Trace
   * recorders handle fork themselves (the child starts its own file). */
  for (int i = 0; i < VRAMSHIM_MAX_CARDS; i++) {
    obs_card *c = atomic_load(&vs_obs_cards[i]);
    if (!c) continue;
    vs_card_stats_reset(&c->stats);
    pthread_mutex_init(&c->list_lock, NULL);
    if (c->list) c->orphans = c->list;
    c->list = NULL;
    atomic_store(&c->nlist, 0);
  }
  pthread_mutex_init(&g_create_lock, NULL);
}

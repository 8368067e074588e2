/* Observation, the hot path (see observe.h): per-card stats, the live list
 * of cards without an arena, trace recording; the background thread and
 * the dumps are in observe_thread.c and observe_dump.c.
 *
 * Cost with an arena: one pointer load and a test per event (the arena
 * keeps its own figures), plus the trace recorder's buffered store when
 * $VRAMSHIM_TRACE is set. Without an arena the event also moves relaxed
 * atomics and the live list (the call went to the driver anyway). */
#include "observe.h"

#include "arena_glue.h"
#include "interpose.h"
#include "log.h"
#include "observe_internal.h"
#include "procenv.h"
#include "quota.h"
#include "settings.h"

#include <stdlib.h>
#include <uthash.h>

struct obs_alloc {
  uint64_t addr, size;
  UT_hash_handle hh;
};

static _Atomic(obs_card *) g_cards[VRAMSHIM_MAX_CARDS];
static pthread_mutex_t g_create_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *g_trace_pattern;   /* $VRAMSHIM_TRACE at start-up */

obs_card *vs_obs_card_peek(int card) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return NULL;
  return atomic_load_explicit(&g_cards[card], memory_order_acquire);
}

static obs_card *card_create(int card) {
  pthread_mutex_lock(&g_create_lock);
  obs_card *c = atomic_load(&g_cards[card]);
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
      atomic_store_explicit(&g_cards[card], c, memory_order_release);
    } else {
      VS_ERROR("card %d: out of host memory for its stats; not observed", card);
    }
  }
  pthread_mutex_unlock(&g_create_lock);
  return c;
}

static inline obs_card *card_get(int card) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return NULL;
  obs_card *c = atomic_load_explicit(&g_cards[card], memory_order_acquire);
  if (__builtin_expect(c != NULL, 1)) return c;
  return card_create(card);
}

void vs_observe_init(void) {
  /* The ledger's bridge tells warn_at and spilled blocks through this
   * (it lies below observation: quota.h). */
  static const vs_quota_observer observer = {vs_observe_warn, vs_observe_spill};
  vs_quota_set_observer(&observer);
  g_trace_pattern = vs_plat_getenv("VRAMSHIM_TRACE");
  /* The recorder's atexit flush must not wait on threads that are gone
   * (Windows: the DLL's handlers run after ExitProcess); vs_observe_exit
   * flushes before that, while they still run. */
  vs_trace_set_exit_guard(vs_plat_exit_work_ok);
  const vs_settings *s = vs_settings_get();
  /* A signal path needs the thread before any allocation: start it now. */
  if (s->config.dump_signal) {
    vs_obs_signal_install(s->config.dump_signal);
    vs_obs_thread_ensure();
  }
}

void vs_observe_alloc(int card, uint64_t ptr, uint64_t size) {
  obs_card *c = card_get(card);
  if (!c) return;
  vs_obs_thread_ensure();   /* one load once started; a fork child starts its own */
  if (c->trace) vs_trace_alloc(c->trace, ptr, size, 0);
  if (vs_arena_glue_on(card)) return;   /* the arena's own figures and map */
  vs_stats_on_reserve(&c->stats, size);
  vs_stats_on_alloc(&c->stats, size);
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

void vs_observe_free(int card, uint64_t ptr, uint64_t size) {
  obs_card *c = card_get(card);
  if (!c) return;
  if (c->trace) vs_trace_free(c->trace, ptr, size, 0);
  if (!atomic_load_explicit(&c->nlist, memory_order_relaxed)) return;
  obs_alloc *a = NULL;
  pthread_mutex_lock(&c->list_lock);
  HASH_FIND(hh, c->list, &ptr, sizeof ptr, a);
  if (a) {
    HASH_DEL(c->list, a);
    atomic_fetch_sub_explicit(&c->nlist, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&c->list_lock);
  if (a) {
    vs_stats_on_free(&c->stats, a->size);
    vs_stats_on_release(&c->stats, a->size);
    free(a);
  }
}

/* Spilled blocks are the program's allocations (the trace has them, as the
 * program made them) but not device memory: only the spilled figures move. */
void vs_observe_spill(int card, uint64_t ptr, uint64_t size, int sign) {
  obs_card *c = card_get(card);
  if (!c) return;
  vs_obs_thread_ensure();
  if (sign > 0) {
    if (c->trace) vs_trace_alloc(c->trace, ptr, size, 0);
    vs_stats_on_spill(&c->stats, size);
  } else {
    if (c->trace) vs_trace_free(c->trace, ptr, size, 0);
    vs_stats_on_unspill(&c->stats, size);
  }
}

void vs_observe_failed(int card, uint64_t size) {
  obs_card *c = card_get(card);
  if (c && c->trace) vs_trace_alloc_failed(c->trace, size, 0);
}

void vs_observe_refused(int card, uint64_t size) {
  obs_card *c = card_get(card);
  if (!c) return;
  vs_stats_on_refused(&c->stats);
  if (c->trace) vs_trace_alloc_failed(c->trace, size, 0);
  vs_obs_request_dump(VS_OBS_AUTO_REFUSED, card, size);
}

void vs_observe_warn(int card, uint64_t used) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return;
  vs_obs_request_dump(VS_OBS_AUTO_WARN, card, used);
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

void vs_observe_atfork_child(void) {
  /* The child starts clean: no live allocations, zero counters, no thread.
   * Its list entries were the parent's; they are dropped (not freed: a
   * parent thread may have been inside the list at the fork), kept
   * reachable for leak checkers. Trace
   * recorders handle fork themselves (the child starts its own file). */
  for (int i = 0; i < VRAMSHIM_MAX_CARDS; i++) {
    obs_card *c = atomic_load(&g_cards[i]);
    if (!c) continue;
    vs_card_stats_reset(&c->stats);
    pthread_mutex_init(&c->list_lock, NULL);
    if (c->list) c->orphans = c->list;
    c->list = NULL;
    atomic_store(&c->nlist, 0);
  }
  pthread_mutex_init(&g_create_lock, NULL);
  vs_obs_thread_atfork_child();
}

void vs_observe_exit(void) { vs_trace_exit(); }

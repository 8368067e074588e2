/* Inside the observation concern, at its bottom: the per-card state the
 * hot path (observe.c), the background thread (observe_thread.c) and the
 * dump builder (observe_dump.c) share. It calls none of them. */
#ifndef VS_OBSERVE_CARDS_H
#define VS_OBSERVE_CARDS_H

#include "dump_build.h"
#include "dump_model.h"
#include "stats.h"
#include "trace.h"
#include "vramshim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* A live allocation of a card without an arena (the dump's map). */
typedef struct obs_alloc obs_alloc;

typedef struct obs_card {
  int index;
  vs_card_stats stats;           /* arena = off: live/reserved; always: refusals, timeline */
  vs_trace *trace;               /* $VRAMSHIM_TRACE, else NULL */
  /* Allocations made while the card had no arena, by address. Only the
   * hot path of pass-through allocations (which make a driver call anyway)
   * takes this lock; nlist lets frees skip it when the list is empty. */
  pthread_mutex_t list_lock;
  obs_alloc *list;
  obs_alloc *orphans;            /* a fork child's inherited list: never touched */
  _Atomic uint64_t nlist;
} obs_card;

/* The card's state, or NULL when never used (or out of range). */
obs_card *vs_obs_card_peek(int card);

/* The live list of a card without an arena, copied (free *out). 0 or -1. */
int vs_obs_card_allocs(obs_card *c, vs_dump_alloc **out, size_t *n);

/* The card's state, created on first use (NULL out of range or out of
 * host memory). Inline: the hot path's one load. */
extern _Atomic(obs_card *) vs_obs_cards[VRAMSHIM_MAX_CARDS];
obs_card *vs_obs_card_create(int card);
static inline obs_card *vs_obs_card_get(int card) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return NULL;
  obs_card *c = atomic_load_explicit(&vs_obs_cards[card], memory_order_acquire);
  if (__builtin_expect(c != NULL, 1)) return c;
  return vs_obs_card_create(card);
}
/* $VRAMSHIM_TRACE (read once at start-up): each card's recorder is made
 * from it when the card's state is. */
void vs_obs_cards_set_trace(const char *pattern);
/* The live list of a card without an arena: add (replacing an entry of the
 * same address), remove (1 with the entry's size when found). */
void vs_obs_list_add(obs_card *c, uint64_t ptr, uint64_t size);
int vs_obs_list_remove(obs_card *c, uint64_t ptr, uint64_t *size);
/* fork child: counters zeroed, lists dropped (the parent's entries). */
void vs_obs_cards_atfork_child(void);

#endif

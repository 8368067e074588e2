/* Inside the observation concern: per-card state shared by the hot path
 * (observe.c), the background thread (observe_thread.c) and the dump
 * builder (observe_dump.c). */
#ifndef VS_OBSERVE_INTERNAL_H
#define VS_OBSERVE_INTERNAL_H

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

/* Thread ----------------------------------------------------------------- */
/* Starts the background thread once per process (a forked child again). */
extern _Atomic int vs_obs_thread_started;
void vs_obs_thread_start(void);
static inline void vs_obs_thread_ensure(void) {
  if (__builtin_expect(!atomic_load_explicit(&vs_obs_thread_started, memory_order_acquire), 0)) vs_obs_thread_start();
}
/* Asks the thread for an automatic dump of card (rate-limited per kind);
 * bytes: the refused request's size, or the tenant's usage past warn_at.
 * Never blocks. */
typedef enum vs_obs_auto { VS_OBS_AUTO_REFUSED = 0, VS_OBS_AUTO_WARN, VS_OBS_AUTO_KINDS } vs_obs_auto;
void vs_obs_request_dump(vs_obs_auto kind, int card, uint64_t bytes);
void vs_obs_thread_atfork_child(void);
void vs_obs_signal_install(int signo);

/* Dumps -------------------------------------------------------------------- */
/* A dump of every used card of this process. 0 or -1 (out of memory). The
 * tenant figures come from tenant_of(card) when it returns 1. */
typedef int (*vs_obs_tenant_fn)(int card, vs_dump_tenant_use *out);
int vs_obs_build_dump(vs_dump *d, const char *reason, vs_obs_tenant_fn tenant_of);

#endif

/* Observation, the hot path (see observe.h): per-card stats, the live list
 * of cards without an arena, trace recording. The cards' state is in
 * observe_cards.c, the background thread and the dumps in observe_thread.c
 * and observe_dump.c.
 *
 * Cost with an arena: one pointer load and a test per event (the arena
 * keeps its own figures), plus the trace recorder's buffered store when
 * $VRAMSHIM_TRACE is set. Without an arena the event also moves relaxed
 * atomics and the live list (the call went to the driver anyway). */
#include "observe.h"

#include "arena_glue.h"
#include "interpose.h"
#include "log.h"
#include "observe_cards.h"
#include "observe_thread.h"
#include "procenv.h"
#include "quota.h"
#include "settings.h"


void vs_observe_init(void) {
  /* The ledger's bridge tells warn_at and spilled blocks through this
   * (it lies below observation: quota.h). */
  static const vs_quota_observer observer = {vs_observe_warn, vs_observe_spill};
  vs_quota_set_observer(&observer);
  vs_obs_cards_set_trace(vs_plat_getenv("VRAMSHIM_TRACE"));
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
  obs_card *c = vs_obs_card_get(card);
  if (!c) return;
  vs_obs_thread_ensure();   /* one load once started; a fork child starts its own */
  if (c->trace) vs_trace_alloc(c->trace, ptr, size, 0);
  if (vs_arena_glue_on(card)) return;   /* the arena's own figures and map */
  vs_stats_on_reserve(&c->stats, size);
  vs_stats_on_alloc(&c->stats, size);
  vs_obs_list_add(c, ptr, size);
}

void vs_observe_free(int card, uint64_t ptr, uint64_t size) {
  obs_card *c = vs_obs_card_get(card);
  if (!c) return;
  if (c->trace) vs_trace_free(c->trace, ptr, size, 0);
  uint64_t was = 0;
  if (!atomic_load_explicit(&c->nlist, memory_order_relaxed) || !vs_obs_list_remove(c, ptr, &was)) return;
  vs_stats_on_free(&c->stats, was);
  vs_stats_on_release(&c->stats, was);
}

/* Spilled blocks are the program's allocations (the trace has them, as the
 * program made them) but not device memory: only the spilled figures move. */
void vs_observe_spill(int card, uint64_t ptr, uint64_t size, int sign) {
  obs_card *c = vs_obs_card_get(card);
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
  obs_card *c = vs_obs_card_get(card);
  if (c && c->trace) vs_trace_alloc_failed(c->trace, size, 0);
}

void vs_observe_refused(int card, uint64_t size) {
  obs_card *c = vs_obs_card_get(card);
  if (!c) return;
  vs_stats_on_refused(&c->stats);
  if (c->trace) vs_trace_alloc_failed(c->trace, size, 0);
  vs_obs_request_dump(VS_OBS_AUTO_REFUSED, card, size);
}

void vs_observe_warn(int card, uint64_t used) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return;
  vs_obs_request_dump(VS_OBS_AUTO_WARN, card, used);
}

void vs_observe_atfork_child(void) {
  vs_obs_cards_atfork_child();
  vs_obs_thread_atfork_child();
}

void vs_observe_exit(void) { vs_trace_exit(); }

/* Inside the observation concern: the background thread (observe_thread.c):
 * automatic and requested dumps, decay, the ledgers' upkeep. */
#ifndef VS_OBSERVE_THREAD_H
#define VS_OBSERVE_THREAD_H

#include <stdatomic.h>
#include <stdint.h>

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

#endif

/* Stream order (stream_order.h): the process-wide decision. The arenas
 * themselves are walked by arena_glue.c, through the callback it
 * registers; the hooks that are signs against stream order are
 * streams/stream_hooks.c. */
#include "stream_order.h"

#include "contexts.h"
#include "log.h"
#include "settings.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* -1: not decided yet (the environment is read on first use). */
static _Atomic int g_on = -1;
static _Atomic int g_settled;   /* left, and every arena has synced */
static pthread_mutex_t g_leave_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*_Atomic g_on_leave)(void);

void vs_stream_order_set_on_leave(void (*fn)(void)) { atomic_store(&g_on_leave, fn); }

int vs_stream_order_on(void) {
  int on = atomic_load_explicit(&g_on, memory_order_acquire);
  if (__builtin_expect(on >= 0, 1)) return on;
  int want = !vs_settings_env_off("VRAMSHIM_STREAM_ORDER");
  int expect = -1;
  atomic_compare_exchange_strong(&g_on, &expect, want);
  return atomic_load(&g_on);
}

void vs_stream_order_leave(const char *why) {
  if (atomic_load_explicit(&g_settled, memory_order_acquire)) return;
  pthread_mutex_lock(&g_leave_lock);
  if (!atomic_load(&g_settled)) {
    int was = vs_stream_order_on();
    /* Down first: an arena created from now on starts out of order (and
     * one created just before sees the flag down after it is published:
     * arena_glue.c). Then every arena syncs once. Later callers wait on
     * the lock until that is done, so no stream handle is returned to the
     * program before the memory freed in order is idle. */
    atomic_store(&g_on, 0);
    void (*on_leave)(void) = atomic_load(&g_on_leave);
    if (on_leave) on_leave();
    atomic_store_explicit(&g_settled, 1, memory_order_release);
    if (was) VS_INFO("%s: freed device memory is reused only after a synchronisation from now on", why);
  }
  pthread_mutex_unlock(&g_leave_lock);
}

static _Atomic int g_ptds;

void vs_stream_order_ptds(const char *why) {
  atomic_store(&g_ptds, 1);
  vs_stream_order_leave(why);
}

int vs_stream_order_ptds_used(void) { return atomic_load_explicit(&g_ptds, memory_order_acquire); }

void vs_stream_order_ctx_begun(void) {
  if (atomic_load_explicit(&g_settled, memory_order_acquire)) return;
  int n = 0;
  vs_ctx_read_lock();
  for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c)) n++;
  vs_ctx_read_unlock();
  if (n > 1) vs_stream_order_leave("a second CUDA context");
}

void vs_stream_order_atfork_child(void) {
  /* A parent thread may have held the lock across fork; the decision
   * itself is kept (the child's arenas are new, made by its own rules). */
  pthread_mutex_init(&g_leave_lock, NULL);
}

/* Lazy start-up and fork (the load-time start is the platform's: src/platform/interpose.h;
 * fork handlers through proc.h).
 *
 * Nothing here needs the constructor to have run: every structure the
 * hooks touch is statically initialised and the driver is loaded by the
 * first hook that needs it (driver_table.c). A forked child starts clean:
 * no live allocations, zero counters, every lock free; the driver handle
 * stays (the mapping is inherited) but CUDA itself does not survive fork,
 * so nothing the parent held is the child's. */
#include "init.h"

#include "accounting.h"
#include "arena_glue.h"
#include "driver_table.h"
#include "guard.h"
#include "hook_ids.h"
#include "log.h"
#include "memory_service.h"
#include "observe.h"
#include "proc.h"
#include "settings.h"
#include "stream_syncs.h"
#include "tally.h"
#include "nvml_cards.h"
#include "nvml_table.h"

#include <pthread.h>
#include <stdatomic.h>

_Atomic int vs_started;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void) {
  vs_driver_atfork_prepare();
  vs_nvml_atfork_prepare();
  vs_mem_atfork_prepare();
  vs_tally_atfork_prepare();   /* last: counting happens under the others' locks */
}

static void atfork_parent(void) {
  vs_tally_atfork_parent();
  vs_mem_atfork_parent();
  vs_nvml_atfork_release();
  vs_driver_atfork_release();
}

static void atfork_child(void) {
  vs_tally_atfork_child();
  vs_mem_atfork_child();
  vs_stream_syncs_atfork_child();
  vs_hook_counts_reset();
  vs_nvml_atfork_release();
  vs_nvml_cards_atfork_child();
  vs_driver_atfork_release();
  /* vs_guard_depth stays: the forking thread unwinds in the child exactly
   * as in the parent, leaving every hook it was inside. */
}

static void init_once(void) {
  vs_log_init();
  vs_plat_atfork(atfork_prepare, atfork_parent, atfork_child);
  /* The config is read at load: a bad file stops the program here (exit 78). */
  vs_settings_get();
  vs_observe_init();
  vs_arena_glue_offer();
  atomic_store_explicit(&vs_started, 1, memory_order_release);
}

/* Run by the platform as the shim is loaded where that is safe (POSIX's
 * constructor, src/platform/interpose.h) and by the first hook. */
void vs_init(void) { pthread_once(&g_once, init_once); }

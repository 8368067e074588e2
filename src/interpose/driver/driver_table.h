/* The real driver: loaded once, lazily, from $VRAMSHIM_DRIVER or
 * "libcuda.so.1", with the driver's own pointer for every hooked ABI
 * variant (and a few functions the shim calls for itself).
 *
 * Invariants: a pointer in the table is never one of the shim's own hooks
 * (a driver path that resolves back to the shim is refused, so a hook can
 * never call itself); once vs_driver() returned the table it never
 * changes, so readers need no lock. */
#ifndef VS_DRIVER_TABLE_H
#define VS_DRIVER_TABLE_H

#include "cuda_api.h"
#include "hook_list.h"

typedef struct vs_real_table {
#define X(name, params, args) CUresult (*name) params;
  VS_HOOKS(X)
  VS_DRIVER_EXTRAS(X)
#undef X
} vs_real_table;

/* The loaded table, loading the driver on first use; NULL when the driver
 * is missing (said once, clearly) or while this thread is itself loading it
 * (a driver constructor calling back into a hook). */
const vs_real_table *vs_driver(void);
/* The table if the driver is already loaded, else NULL; never loads. */
const vs_real_table *vs_driver_if_loaded(void);
/* What a hook returns when vs_driver() is NULL. */
CUresult vs_driver_missing_error(void);
/* The driver's pointer of hooked variant `id` (an vs_hook_id), NULL if the
 * driver lacks it or is not loaded. */
void *vs_driver_real(int id);
/* All of them by hook id (VS_HOOK_COUNT entries), NULL if not loaded. */
void *const *vs_driver_reals(void);
const char *vs_driver_loaded_path(void);
/* The card of the calling thread's current context, or -1 without one. */
int vs_driver_current_card(const vs_real_table *real);

/* fork: the loader lock is held across fork so a child never inherits it
 * locked by a thread that does not exist there. */
void vs_driver_atfork_prepare(void);
void vs_driver_atfork_release(void);   /* parent and child */

#endif

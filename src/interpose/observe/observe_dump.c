/* A dump of this process (dump_model.h): for each card it used, the arena's
 * figures and memory map when it has one, else the live allocations the
 * hot path listed; the driver calls the shim counted; the timeline; the
 * tenant's figures from the ledger. Runs on the background thread. */
#include "arena_glue.h"
#include "driver_table.h"
#include "file.h"
#include "graph_charge.h"
#include "guard.h"
#include "observe_cards.h"
#include "observe_dump.h"
#include "pool_charge.h"
#include "settings.h"

#include <stdlib.h>
#include <unistd.h>

/* Counted by the shim (accounting.h), named as in the driver's API. */
static const char *const call_names[VRAMSHIM_CALL_KINDS] = {
    [VRAMSHIM_CALL_MEM_ALLOC] = "cuMemAlloc",
    [VRAMSHIM_CALL_MEM_ALLOC_MANAGED] = "cuMemAllocManaged",
    [VRAMSHIM_CALL_MEM_FREE] = "cuMemFree",
    [VRAMSHIM_CALL_MEM_ALLOC_ASYNC] = "cuMemAllocAsync",
    [VRAMSHIM_CALL_MEM_FREE_ASYNC] = "cuMemFreeAsync",
    [VRAMSHIM_CALL_MEM_CREATE] = "cuMemCreate",
    [VRAMSHIM_CALL_MEM_RELEASE] = "cuMemRelease",
    [VRAMSHIM_CALL_MEM_MAP] = "cuMemMap",
    [VRAMSHIM_CALL_MEM_UNMAP] = "cuMemUnmap",
    [VRAMSHIM_CALL_ADDRESS_RESERVE] = "cuMemAddressReserve",
    [VRAMSHIM_CALL_ADDRESS_FREE] = "cuMemAddressFree",
    [VRAMSHIM_CALL_IPC_OPEN] = "cuIpcOpenMemHandle",
    [VRAMSHIM_CALL_IPC_CLOSE] = "cuIpcCloseMemHandle",
    [VRAMSHIM_CALL_SET_ACCESS] = "cuMemSetAccess",
    [VRAMSHIM_CALL_SYNC] = "cuCtxSynchronize",
    [VRAMSHIM_CALL_OTHER] = "queries (cuMemGetInfo...)",
};

/* The card's capacity, asked of the driver once. */
static uint64_t g_capacity[VRAMSHIM_MAX_CARDS];
static int g_asked[VRAMSHIM_MAX_CARDS];

static void ask_driver(int card) {
  if (g_asked[card]) return;
  const vs_real_table *real = vs_driver_if_loaded();
  if (!real) return;
  size_t total = 0;
  vs_guard_enter();
  if (real->cuDeviceTotalMem_v2 && real->cuDeviceTotalMem_v2(&total, card) == CUDA_SUCCESS)
    g_capacity[card] = total;
  vs_guard_leave();
  g_asked[card] = 1;
}

int vs_obs_build_dump(vs_dump *d, const char *reason, vs_obs_tenant_fn tenant_of) {
  char exe[256];
  if (vs_plat_self_exe(exe, sizeof exe)) exe[0] = 0;
  const vs_settings *s = vs_settings_get();
  vs_dump_init(d, (int64_t)getpid(), exe, s->tenant, reason, vs_now_unix_ms());
  int rc = 0;
  for (int card = 0; card < VRAMSHIM_MAX_CARDS; card++) {
    obs_card *oc = vs_obs_card_peek(card);
    if (!oc) continue;
    ask_driver(card);
    vs_dump_tenant_use tu = {0};
    vs_dump_card_source src = {.index = card, .capacity = g_capacity[card], .stats = &oc->stats};
    if (tenant_of && tenant_of(card, &tu)) src.tenant = &tu;
    vs_arena_glue_read_lock();   /* no arena goes (its context ends) while it is walked */
    src.arena = vs_arena_glue_get(card);
    src.arena_mode = vs_arena_glue_is_vmm(card) ? "vmm" : "chunks";
    vs_dump_alloc *allocs = NULL;
    size_t nallocs = 0;
    if (!src.arena && vs_obs_card_allocs(oc, &allocs, &nallocs)) rc = -1;
    src.allocs = allocs;
    src.nallocs = nallocs;
    if (vs_dump_add_card_from(d, &src)) rc = -1;
    vs_arena_glue_read_unlock();
    free(allocs);
    vs_dump_card *c = d->ncards ? &d->cards[d->ncards - 1] : NULL;
    if (!c || c->index != card) continue;
    c->pool_reserved_bytes = vs_pool_charged(card);
    c->graph_reserved_bytes = vs_graph_mem_charged(card);
    vramshim_card_stats vst;
    if (vramshim_stats(card, &vst) == 0)
      for (int k = 0; k < VRAMSHIM_CALL_KINDS; k++)
        if (vst.driver_calls[k] && vs_dump_card_add_call(c, call_names[k], vst.driver_calls[k])) rc = -1;
  }
  return rc;
}

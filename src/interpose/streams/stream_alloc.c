/* Stream-ordered allocation served by the arena (stream_alloc.h): the
 * routing, and the hooks that say a capture or a pool of the program's own
 * may be in use. */
#include "hook_enter.h"

#include "accounting.h"
#include "arena_glue.h"
#include "capture.h"
#include "contexts.h"
#include "log.h"
#include "settings.h"
#include "stream_alloc.h"
#include "stream_order.h"
#include "stream_syncs.h"

#include <stdatomic.h>
#include <stdint.h>

static _Atomic int g_off = -1;      /* VRAMSHIM_ARENA_ASYNC=off; -1 not read yet */
static _Atomic int g_own_pool;      /* the program set a device's current memory pool, or
                                       gave a pool's memory to other devices */

static int off(void) { return vs_settings_env_off_once(&g_off, "VRAMSHIM_ARENA_ASYNC"); }

static int is_legacy(CUstream h, int ptsz) { return !ptsz && (h == NULL || (uintptr_t)h == 0x1); }

/* 1 when h may be capturing a graph now. Only asked once a capture may
 * have begun: a _ptsz capture call leaves its mark through the per-thread
 * default stream, every other one through the hooks below. */
static int capturing(const vs_real_table *real, CUstream h) {
  if (!vs_capture_seen() && !vs_stream_order_ptds_used()) return 0;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!real->cuStreamIsCapturing) return 1;
  vs_guard_enter();
  CUresult r = real->cuStreamIsCapturing(h, &st);
  vs_guard_leave();
  return r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

int vs_stream_alloc_route(const vs_real_table *real, CUstream h, int ptsz) {
  if (off() || atomic_load_explicit(&g_own_pool, memory_order_acquire)) return VS_ROUTE_DRIVER;
  if (is_legacy(h, ptsz)) return VS_ROUTE_LANE;
  if (ptsz || (uintptr_t)h == 0x2) return VS_ROUTE_DRIVER;
  uint64_t id = vs_stream_syncs_ctx_of(h);
  if (!id) return VS_ROUTE_DRIVER;
  vs_ctx *cur = vs_ctx_acquire_current(real);
  int mine = cur && cur->id == id;
  vs_ctx_put(cur);
  /* (a capturing stream never gets here: vs_stream_alloc_captured sent it to the driver) */
  return mine ? VS_ROUTE_OFF_LANE : VS_ROUTE_DRIVER;
}

int vs_stream_alloc_captured(const vs_real_table *real, CUstream h, int ptsz) {
  return !is_legacy(h, ptsz) && vs_capture_seen() && capturing(real, h);
}

int vs_stream_free_route(const vs_real_table *real, CUstream h, int ptsz) {
  if (off()) return VS_ROUTE_OFF_LANE;   /* as cuMemFree: what the arena holds waits for a sync */
  if (is_legacy(h, ptsz)) return VS_ROUTE_LANE;
  return capturing(real, h) ? VS_ROUTE_CAPTURED : VS_ROUTE_OFF_LANE;
}

/* ---- Hooks: the driver's answer, unchanged; the mark comes first, so an
 * allocation racing with the call already asks. */
#define MARK_BODY(flag, name, args) \
  VS_HOOK_ENTER(name, args);        \
  atomic_store(&(flag), 1);         \
  VS_FORWARD(name, args)

CUresult vs_hook_cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  MARK_BODY(g_own_pool, cuDeviceSetMemPool, (dev, pool));
}
CUresult vs_hook_cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool) {
  MARK_BODY(g_own_pool, cuMemSetMemPool, (location, type, pool));
}

/* Access to a pool's memory from other devices is the driver's to give:
 * its pool's blocks then reach them. From the first cuMemPoolSetAccess on
 * (programs set it up before they allocate), stream-ordered allocations are
 * the driver's pool's. Blocks the arena served before from a device's
 * default pool: a VMM arena opens its mappings to the devices given access
 * (as for peer access, arena_glue.h); in a chunks arena they stay reachable
 * from their own device only, said once. */
static _Atomic int g_said_access;

/* The card whose default pool `pool` is, or -1. */
static int default_pool_card(const vs_real_table *real, CUmemoryPool pool) {
  if (!real->cuDeviceGetDefaultMemPool || !pool) return -1;
  for (int card = 0; card < VRAMSHIM_MAX_CARDS; card++) {
    CUmemoryPool def = NULL;
    if (real->cuDeviceGetDefaultMemPool(&def, (CUdevice)card) != CUDA_SUCCESS) return -1;
    if (def == pool) return card;
  }
  return -1;
}

CUresult vs_hook_cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count) {
  VS_HOOK_ENTER(cuMemPoolSetAccess, (pool, map, count));
  atomic_store(&g_own_pool, 1);
  vs_guard_enter();
  CUresult r = real->cuMemPoolSetAccess(pool, map, count);
  int card = r == CUDA_SUCCESS && map ? default_pool_card(real, pool) : -1;
  vs_guard_leave();
  int closed = 0;   /* a chunks arena on the card kept its blocks to itself */
  for (size_t i = 0; card >= 0 && i < count; i++)
    if (map[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE && map[i].location.id != card &&
        map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
      closed |= vs_arena_glue_open_card(card, map[i].location.id);
  uint64_t live = 0;
  if (card >= 0) vs_acct_pool_bytes(card, &live, NULL, NULL);
  if (closed && live && !atomic_exchange(&g_said_access, 1))
    VS_WARN("cuMemPoolSetAccess: from now on cuMemAllocAsync goes to the driver's pool; the %llu bytes of "
            "stream-ordered blocks the arena (chunks) served before on card %d stay reachable from their own "
            "device only (set VRAMSHIM_ARENA_ASYNC=off for this program if another device must reach them)",
            (unsigned long long)live, card);
  return r;
}

/* The device's default memory pool as the program sees it while the arena
 * serves stream-ordered allocations in its place (stream_alloc.h,
 * docs/arena.md "The lane"). Without the shim every cuMemAllocAsync block
 * would be the default pool's, so the pool's statistics count them:
 *   USED_MEM_CURRENT / RESERVED_MEM_CURRENT: the driver's answer plus the
 *     bytes of the stream-ordered blocks the arena serves on that device
 *     (the arena's other cached memory is shared with cuMemAlloc and not
 *     the pool's, so "reserved" grows by exactly what is used);
 *   USED_MEM_HIGH / RESERVED_MEM_HIGH: the driver's high plus the high of
 *     those bytes, exact when only one of the two serves (the usual case),
 *     else an upper bound; setting a high to 0 resets the arena's part of
 *     that high alone, as the driver keeps the two apart.
 * cuMemPoolTrimTo on a default pool trims that device's arenas as well,
 * each down to minBytesToKeep of cached memory. Every other pool, and
 * every other attribute, is the driver's alone: the driver is asked first
 * and its refusal returned as it is. */
#include "hook_enter.h"

#include "accounting.h"
#include "arena_glue.h"
#include "pool_charge.h"

/* The card whose default pool `pool` is, among the cards where want(card)
 * holds; -1 if none. One cuDeviceGetDefaultMemPool per such card. */
static int default_pool_card(const vs_real_table *real, CUmemoryPool pool, int (*want)(int card)) {
  if (!real->cuDeviceGetDefaultMemPool || !pool) return -1;
  for (int card = 0; card < VRAMSHIM_MAX_CARDS; card++) {
    if (!want(card)) continue;
    CUmemoryPool p = NULL;
    vs_guard_enter();
    CUresult r = real->cuDeviceGetDefaultMemPool(&p, (CUdevice)card);
    vs_guard_leave();
    if (r == CUDA_SUCCESS && p == pool) return card;
  }
  return -1;
}

static int has_pool_bytes(int card) {
  uint64_t live, used_high, reserved_high;
  vs_acct_pool_bytes(card, &live, &used_high, &reserved_high);
  return live || used_high || reserved_high;
}

static int is_high(CUmemPool_attribute attr) {
  return attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH || attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH;
}

static int is_byte_count(CUmemPool_attribute attr) {
  return is_high(attr) || attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT || attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT;
}

CUresult vs_hook_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  VS_HOOK_ENTER(cuMemPoolGetAttribute, (pool, attr, value));
  vs_guard_enter();
  CUresult r = real->cuMemPoolGetAttribute(pool, attr, value);
  vs_guard_leave();
  if (r != CUDA_SUCCESS || !value || !is_byte_count(attr)) return r;
  int card = default_pool_card(real, pool, has_pool_bytes);
  if (card < 0) return r;
  uint64_t live, used_high, reserved_high;
  vs_acct_pool_bytes(card, &live, &used_high, &reserved_high);
  *(cuuint64_t *)value += attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH       ? used_high
                          : attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH ? reserved_high
                                                                      : live;
  return r;
}

CUresult vs_hook_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  VS_HOOK_ENTER(cuMemPoolSetAttribute, (pool, attr, value));
  vs_guard_enter();
  CUresult r = real->cuMemPoolSetAttribute(pool, attr, value);
  vs_guard_leave();
  /* a release threshold lowered may give memory back: the pool's charge follows */
  if (r == CUDA_SUCCESS) vs_pool_changed(real, pool);
  /* The driver accepts only 0 for a high: a reset. */
  if (r != CUDA_SUCCESS || !is_high(attr)) return r;
  int card = default_pool_card(real, pool, has_pool_bytes);
  if (card >= 0) vs_acct_pool_reset_high(card, attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH);
  return r;
}

CUresult vs_hook_cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  VS_HOOK_ENTER(cuMemPoolTrimTo, (pool, minBytesToKeep));
  vs_guard_enter();
  CUresult r = real->cuMemPoolTrimTo(pool, minBytesToKeep);
  if (r == CUDA_SUCCESS) vs_pool_changed(real, pool);   /* what it gave back leaves the tenant's charge */
  if (r == CUDA_SUCCESS) {
    int card = default_pool_card(real, pool, vs_arena_glue_on);
    if (card >= 0) vs_arena_glue_trim_card(card, minBytesToKeep);
  }
  vs_guard_leave();
  return r;
}

/* Hooks of driver pool objects for their charge (pool_charge.h): the
 * driver's answer, unchanged; the pool's entry follows it. */
#include "hook_enter.h"

#include "pool_charge.h"

CUresult vs_hook_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
  VS_HOOK_ENTER(cuMemPoolCreate, (pool, poolProps));
  vs_guard_enter();
  CUresult r = real->cuMemPoolCreate(pool, poolProps);
  vs_guard_leave();
  if (r == CUDA_SUCCESS && pool) vs_pool_created(*pool, poolProps);
  return r;
}

/* Its cached memory goes back to the card with it; what blocks still
 * allocated from it use stays charged until they are freed. */
CUresult vs_hook_cuMemPoolDestroy(CUmemoryPool pool) {
  VS_HOOK_ENTER(cuMemPoolDestroy, (pool));
  vs_guard_enter();
  uint64_t used = 0;
  vs_pool_destroying(real, pool, &used);
  CUresult r = real->cuMemPoolDestroy(pool);
  vs_guard_leave();
  vs_pool_destroyed(pool, used, r);
  return r;
}

/* Another process's pool: its memory is charged there, never here. */
CUresult vs_hook_cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                    CUmemAllocationHandleType handleType, unsigned long long flags) {
  VS_HOOK_ENTER(cuMemPoolImportFromShareableHandle, (pool_out, handle, handleType, flags));
  vs_guard_enter();
  CUresult r = real->cuMemPoolImportFromShareableHandle(pool_out, handle, handleType, flags);
  vs_guard_leave();
  if (r == CUDA_SUCCESS && pool_out) vs_pool_imported(*pool_out);
  return r;
}

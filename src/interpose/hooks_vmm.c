/* Hooks of the virtual memory management API (physical handles, address
 * ranges, mappings). Inter-process memory: hooks_ipc.c. */
#include "hook_common.h"

/* ---- physical memory: cuMemCreate / cuMemRelease ------------------------ */
CUresult vs_hook_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags) {
  VS_HOOK_ENTER(cuMemCreate, (handle, size, prop, flags));
  if (!handle || !prop) VS_FORWARD(cuMemCreate, (handle, size, prop, flags));
  vs_guard_enter();
  int card = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : vs_driver_current_card(real);
  vs_mem_op op;
  CUresult r;
  if (vs_mem_alloc_begin(&op, VS_MEM_VMM_PHYS, card, size, VRAMSHIM_CALL_MEM_CREATE) == VS_MEM_DONE) {
    if (op.result == CUDA_SUCCESS) *handle = (CUmemGenericAllocationHandle)op.addr;
    r = op.result;
  } else {
    r = real->cuMemCreate(handle, size, prop, flags);
    r = vs_mem_alloc_end(&op, r, r == CUDA_SUCCESS ? (uint64_t)*handle : 0);
  }
  vs_guard_leave();
  return r;
}

CUresult vs_hook_cuMemRelease(CUmemGenericAllocationHandle handle) {
  VS_HOOK_ENTER(cuMemRelease, (handle));
  vs_guard_enter();
  vs_mem_op op;
  CUresult r;
  if (vs_mem_free_begin(&op, VS_SPACE_HANDLE, VS_FREE_RELEASE, (uint64_t)handle, VRAMSHIM_CALL_MEM_RELEASE) ==
      VS_MEM_DONE)
    r = op.result;
  else
    r = vs_mem_free_end(&op, real->cuMemRelease(handle));
  vs_guard_leave();
  return r;
}

/* ---- mappings: counted on the card of the physical memory --------------- */
CUresult vs_hook_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags) {
  VS_HOOK_ENTER(cuMemMap, (ptr, size, offset, handle, flags));
  vs_guard_enter();
  CUresult r = real->cuMemMap(ptr, size, offset, handle, flags);
  vs_alloc_info rec;
  vs_mem_count_call(vs_mem_lookup(VS_SPACE_HANDLE, (uint64_t)handle, &rec) == 0 ? rec.card
                                                                                 : vs_driver_current_card(real),
                    VRAMSHIM_CALL_MEM_MAP);
  vs_guard_leave();
  return r;
}

CUresult vs_hook_cuMemUnmap(CUdeviceptr ptr, size_t size) {
  VS_HOOK_ENTER(cuMemUnmap, (ptr, size));
  vs_guard_enter();
  CUresult r = real->cuMemUnmap(ptr, size);
  vs_mem_count_call(vs_driver_current_card(real), VRAMSHIM_CALL_MEM_UNMAP);
  vs_guard_leave();
  return r;
}

/* ---- virtual address ranges: no device memory, their own counter -------- */
CUresult vs_hook_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) {
  VS_HOOK_ENTER(cuMemAddressReserve, (ptr, size, alignment, addr, flags));
  if (!ptr) VS_FORWARD(cuMemAddressReserve, (ptr, size, alignment, addr, flags));
  vs_guard_enter();
  vs_mem_op op;
  CUresult r;
  if (vs_mem_alloc_begin(&op, VS_MEM_VA_RANGE, vs_driver_current_card(real), size,
                         VRAMSHIM_CALL_ADDRESS_RESERVE) == VS_MEM_DONE) {
    if (op.result == CUDA_SUCCESS) *ptr = (CUdeviceptr)op.addr;
    r = op.result;
  } else {
    r = real->cuMemAddressReserve(ptr, size, alignment, addr, flags);
    r = vs_mem_alloc_end(&op, r, r == CUDA_SUCCESS ? (uint64_t)*ptr : 0);
  }
  vs_guard_leave();
  return r;
}

CUresult vs_hook_cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  VS_HOOK_ENTER(cuMemAddressFree, (ptr, size));
  vs_guard_enter();
  vs_mem_op op;
  CUresult r;
  if (vs_mem_free_begin(&op, VS_SPACE_VA, VS_FREE_ADDRESS, (uint64_t)ptr, VRAMSHIM_CALL_ADDRESS_FREE) ==
      VS_MEM_DONE)
    r = op.result;
  else
    r = vs_mem_free_end(&op, real->cuMemAddressFree(ptr, size));
  vs_guard_leave();
  return r;
}

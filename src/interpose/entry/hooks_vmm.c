/* Hooks of the virtual memory management API (physical handles, address
 * ranges, mappings). Inter-process memory: hooks_ipc.c. */
#include "hook_common.h"

/* ---- physical memory: cuMemCreate / cuMemRelease ------------------------ */
CUresult vs_hook_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags) {
  VS_HOOK_ENTER(cuMemCreate, (handle, size, prop, flags));
  /* Only device memory is a card's: a host location (CU_MEM_LOCATION_TYPE_HOST,
   * HOST_NUMA, HOST_NUMA_CURRENT; drivers from CUDA 12.2, NCCL asks for it)
   * is host memory, never charged, never recorded: the driver's own answer,
   * as are the errors of any other location. */
  if (!handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    VS_FORWARD(cuMemCreate, (handle, size, prop, flags));
  vs_guard_enter();
  int card = prop->location.id;
  vs_mem_op op;
  CUresult r;
  if (vs_mem_alloc_begin(&op, VS_MEM_VMM_PHYS, card, size, VRAMSHIM_CALL_MEM_CREATE) == VS_MEM_DONE) {
    if (op.result == CUDA_SUCCESS) *handle = (CUmemGenericAllocationHandle)op.addr;
    r = op.result;
  } else {
    r = real->cuMemCreate(handle, size, prop, flags);
    if (vs_mem_retry_refused(&op, r)) r = real->cuMemCreate(handle, size, prop, flags);
    r = vs_mem_alloc_end(&op, r, r == CUDA_SUCCESS ? (uint64_t)*handle : 0);
  }
  vs_guard_leave();
  return r;
}

#define DRIVER_ARGS (handle)
CUresult vs_hook_cuMemRelease(CUmemGenericAllocationHandle handle) {
  FREE_BODY(cuMemRelease, VS_SPACE_HANDLE, VS_FREE_RELEASE, VRAMSHIM_CALL_MEM_RELEASE, (uint64_t)handle,
            real->cuMemRelease(handle));
}
#undef DRIVER_ARGS

/* ---- mappings: counted on the card of the physical memory --------------- */
CUresult vs_hook_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags) {
  VS_HOOK_ENTER(cuMemMap, (ptr, size, offset, handle, flags));
  vs_guard_enter();
  CUresult r = real->cuMemMap(ptr, size, offset, handle, flags);
  if (r == CUDA_SUCCESS) vs_mem_vmm_mapped((uint64_t)handle, (uint64_t)ptr, size);
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
  if (r == CUDA_SUCCESS) vs_mem_vmm_unmapped((uint64_t)ptr, size);   /* released memory may end here */
  vs_mem_count_call(vs_driver_current_card(real), VRAMSHIM_CALL_MEM_UNMAP);
  vs_guard_leave();
  return r;
}

/* An arena block is cuMemAlloc memory to the program (the pointer
 * attributes say so: no VMM handle types): the driver refuses the VMM
 * queries of such memory, and so does the shim for a block, whatever the
 * arena's mode. Else the program would get the arena's own handle, whose
 * memory holds other blocks, and treat the block as memory of its own VMM
 * (a library that exports "its" handle to a peer would map the wrong
 * bytes there). A pointer in arena memory outside every block is unknown. */
static int arena_memory(uint64_t p) {
  vs_mem_block b;
  return vs_mem_block_at(p, &b) != VS_AT_DRIVER;
}

/* One more reference to the handle under addr (the same handle value):
 * its memory then lives until that reference is released too. */
CUresult vs_hook_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
  VS_HOOK_ENTER(cuMemRetainAllocationHandle, (handle, addr));
  vs_guard_enter();
  if (arena_memory((uint64_t)(uintptr_t)addr)) {
    vs_guard_leave();
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r = real->cuMemRetainAllocationHandle(handle, addr);
  if (r == CUDA_SUCCESS && handle) vs_mem_vmm_retained((uint64_t)*handle);
  vs_guard_leave();
  return r;
}

CUresult vs_hook_cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr) {
  VS_HOOK_ENTER(cuMemGetAccess, (flags, location, ptr));
  vs_guard_enter();
  CUresult r = arena_memory((uint64_t)ptr) ? CUDA_ERROR_INVALID_VALUE : real->cuMemGetAccess(flags, location, ptr);
  vs_guard_leave();
  return r;
}

/* ---- virtual address ranges: no device memory, their own counter -------- */
#define DRIVER_ARGS (ptr, size, alignment, addr, flags)
CUresult vs_hook_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) {
  ALLOC_BODY(cuMemAddressReserve, VS_MEM_VA_RANGE, VRAMSHIM_CALL_ADDRESS_RESERVE, ptr, CUdeviceptr, size,
             vs_driver_current_card(real), real->cuMemAddressReserve(ptr, size, alignment, addr, flags));
}
#undef DRIVER_ARGS

#define DRIVER_ARGS (ptr, size)
CUresult vs_hook_cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  FREE_BODY(cuMemAddressFree, VS_SPACE_VA, VS_FREE_ADDRESS, VRAMSHIM_CALL_ADDRESS_FREE, (uint64_t)ptr,
            real->cuMemAddressFree(ptr, size));
}
#undef DRIVER_ARGS

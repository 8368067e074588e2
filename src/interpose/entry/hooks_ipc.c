/* Hooks of inter-process memory (legacy IPC handles).
 *
 * Peer memory is recorded (so its close is recognised) but is not this
 * process's device memory. An arena block is exported as the block, not as
 * the driver memory around it: a block inside a driver chunk through a shim
 * handle and its record (ipc_record.h), a block of the VMM arena through
 * a shim handle whose physical memory the exporter passes over a socket
 * (ipc_vmm.h). Memory the driver owns (arena off, pass-through) keeps the
 * driver's own handles. */
#include "hook_common.h"

#include "arena_glue.h"
#include "arena_backend.h"
#include "ipc_record.h"
#include "ipc_vmm.h"
#include "log.h"
#include "settings.h"
#include "spill.h"

#include <string.h>

/* A block spilled to host memory (on_limit = spill, spill.h): the driver's
 * answer for host memory, with a hint. */
static CUresult export_spilled(const vs_real_table *real, CUipcMemHandle *pHandle, CUdeviceptr dptr, int card,
                               uint64_t size) {
  CUresult r = real->cuIpcGetMemHandle(pHandle, dptr);
  char a[32];
  if (r != CUDA_SUCCESS)
    VS_WARN("card %d: cuIpcGetMemHandle on 0x%llx (%s) fails (error %d): the block was spilled to host memory "
            "(tenant '%s' at its limit, on_limit = spill), which legacy IPC cannot export; give the tenant a higher "
            "limit, or on_limit = fail or wait, if it shares memory over IPC",
            card, (unsigned long long)dptr, vs_fmt_bytes(size, a, sizeof a), (int)r, vs_settings_get()->tenant);
  return r;
}

static CUresult export_block(const vs_real_table *real, CUipcMemHandle *pHandle, CUdeviceptr dptr) {
  int card = 0, vmm = 0;
  uint64_t spill_size = 0;
  if (vs_spill_lookup((uint64_t)dptr, &card, &spill_size)) return export_spilled(real, pHandle, dptr, card, spill_size);
  uint64_t base = 0, size = 0, chunk = 0, offset = 0;
  if (vs_arena_glue_placement((uint64_t)dptr, &card, &base, &size, &chunk, &offset, &vmm) != 0)
    return real->cuIpcGetMemHandle(pHandle, dptr);   /* not an arena block: the driver's own */
  if (vmm) {
    if (!vs_backend_shareable(card)) {
      VS_ERROR("card %d: cuIpcGetMemHandle on 0x%llx fails: the block lies in the VMM arena and this card cannot "
               "export physical memory as a file descriptor; set `arena = chunks` for tenant %s", card,
               (unsigned long long)dptr, vs_settings_get()->tenant);
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    return vs_ipc_vmm_export(base, size, card, pHandle);
  }
  CUipcMemHandle drv;
  CUresult r = real->cuIpcGetMemHandle(&drv, (CUdeviceptr)chunk);
  if (r != CUDA_SUCCESS) return r;
  if (offset == 0) {
    *pHandle = drv;   /* the driver's own handle opens at the block */
    return CUDA_SUCCESS;
  }
  return vs_ipc_export(&drv, base, offset, size, card, pHandle) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}

CUresult vs_hook_cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
  VS_HOOK_ENTER(cuIpcGetMemHandle, (pHandle, dptr));
  if (!pHandle) VS_FORWARD(cuIpcGetMemHandle, (pHandle, dptr));
  vs_guard_enter();
  CUresult r = export_block(real, pHandle, dptr);
  vs_guard_leave();
  return r;
}

/* Opens a handle: a shim handle at its block's offset in the driver's
 * mapping, any other as the driver says. */
#define IPC_OPEN_BODY(name)                                                                       \
  VS_HOOK_ENTER(name, (pdptr, handle, Flags));                                                    \
  if (!pdptr) VS_FORWARD(name, (pdptr, handle, Flags));                                           \
  vs_guard_enter();                                                                               \
  vs_mem_op op;                                                                                   \
  CUresult r;                                                                                     \
  if (vs_mem_alloc_begin(&op, VS_MEM_IPC, vs_driver_current_card(real), 0, VRAMSHIM_CALL_IPC_OPEN) == \
      VS_MEM_DONE) {                                                                              \
    r = op.result;                                                                                \
  } else if (vs_ipc_vmm_is_handle(&handle)) {                                                     \
    uint64_t size = 0;                                                                            \
    r = vs_ipc_vmm_open(real, &handle, Flags, pdptr, &size);                                      \
    r = vs_mem_alloc_end_sized(&op, r, r == CUDA_SUCCESS ? (uint64_t)*pdptr : 0, size);           \
  } else {                                                                                        \
    CUipcMemHandle drv;                                                                           \
    uint64_t offset = 0, size = 0;                                                                \
    int shim = vs_ipc_resolve(&handle, &drv, &offset, &size);                                     \
    if (shim < 0) {                                                                               \
      /* the driver's words: a bad handle; a handle whose memory is gone */                      \
      r = shim == -2 ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;                      \
    } else {                                                                                      \
      r = real->name(pdptr, shim ? drv : handle, Flags);                                          \
      if (r == CUDA_SUCCESS && shim) {                                                            \
        vs_ipc_opened_add((uint64_t)*pdptr + offset, (uint64_t)*pdptr);                           \
        *pdptr += offset;                                                                         \
      } else if (r == CUDA_SUCCESS && real->cuMemGetAddressRange_v2) {                            \
        CUdeviceptr base = 0;                                                                     \
        size_t sz = 0;                                                                            \
        (void)real->cuMemGetAddressRange_v2(&base, &sz, *pdptr);                                  \
        size = sz;                                                                                \
      }                                                                                           \
    }                                                                                             \
    r = vs_mem_alloc_end_sized(&op, r, r == CUDA_SUCCESS ? (uint64_t)*pdptr : 0, size);           \
  }                                                                                               \
  vs_guard_leave();                                                                               \
  return r

CUresult vs_hook_cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
  IPC_OPEN_BODY(cuIpcOpenMemHandle_v2);
}
CUresult vs_hook_cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
  IPC_OPEN_BODY(cuIpcOpenMemHandle);
}

CUresult vs_hook_cuIpcCloseMemHandle(CUdeviceptr dptr) {
  VS_HOOK_ENTER(cuIpcCloseMemHandle, (dptr));
  vs_guard_enter();
  uint64_t drv_ptr = (uint64_t)dptr;
  int shim = vs_ipc_opened_find((uint64_t)dptr, &drv_ptr, 0) == 0;
  vs_mem_op op;
  CUresult r;
  if (vs_mem_free_begin(&op, VS_SPACE_DEVPTR, VS_FREE_IPC_CLOSE, (uint64_t)dptr, VRAMSHIM_CALL_IPC_CLOSE) ==
      VS_MEM_DONE) {
    r = op.result;
  } else if (!shim && vs_ipc_vmm_close(real, (uint64_t)dptr, &r)) {
    r = vs_mem_free_end(&op, r);
  } else {
    r = vs_mem_free_end(&op, real->cuIpcCloseMemHandle((CUdeviceptr)drv_ptr));
    if (r == CUDA_SUCCESS && shim) vs_ipc_opened_find((uint64_t)dptr, &drv_ptr, 1);
  }
  vs_guard_leave();
  return r;
}

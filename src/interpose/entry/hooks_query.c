/* Hooks of the queries whose answers the shim owns: free/total memory (the
 * tenant's view, when quotas answer), address ranges and pointer
 * attributes (an arena block's own range). Otherwise each passes through. */
#include "hook_common.h"

#include "spill.h"

/* A figure in the output's word: the legacy 32-bit variants saturate at
 * 4 GiB - 1, as the sim's do (a cast wrapped a 4 GiB view to 0 free and 0
 * total; what the real driver's legacy entry points answer above 4 GiB has
 * not been measured here). */
#define AS_WORD(word_t, v) ((uint64_t)(word_t)-1 < (v) ? (word_t)-1 : (word_t)(v))

/* ---- cuMemGetInfo ------------------------------------------------------- */
/* The driver's own function is asked first, with the program's outputs:
 * it decides what is valid (an output left NULL: OptiX asks for the total
 * alone, llama.cpp for the free memory alone; no context) and a legacy
 * variant reaches the legacy function. The tenant's view is then made from
 * its figures where it gave both in full (64 bits: a legacy variant's
 * saturate at 4 GiB - 1), else from the view's own driver call. */
#define INFO_BODY(name, word_t)                                                 \
  VS_HOOK_ENTER(name, (free, total));                                           \
  vs_guard_enter();                                                             \
  int card = vs_driver_current_card(real);                                      \
  uint64_t f = 0, t = 0;                                                        \
  CUresult r = real->name(free, total);                                         \
  vs_mem_count_call(card, VRAMSHIM_CALL_OTHER);                                 \
  int whole = free && total && sizeof(word_t) == sizeof(uint64_t);             \
  if (r == CUDA_SUCCESS && (whole ? vs_mem_info_driver(card, *free, *total, &f, &t) \
                                  : vs_mem_info(card, &f, &t)) == VS_MEM_DONE) { \
    if (free) *free = AS_WORD(word_t, f);                                       \
    if (total) *total = AS_WORD(word_t, t);                                     \
  }                                                                             \
  vs_guard_leave();                                                             \
  return r

CUresult vs_hook_cuMemGetInfo_v2(size_t *free, size_t *total) { INFO_BODY(cuMemGetInfo_v2, size_t); }
CUresult vs_hook_cuMemGetInfo(unsigned int *free, unsigned int *total) { INFO_BODY(cuMemGetInfo, unsigned int); }

/* ---- cuDeviceTotalMem --------------------------------------------------- */
#define TOTAL_BODY(name, word_t)                                                \
  VS_HOOK_ENTER(name, (bytes, dev));                                            \
  if (!bytes) VS_FORWARD(name, (bytes, dev));                                   \
  vs_guard_enter();                                                             \
  uint64_t t = 0;                                                               \
  CUresult r;                                                                   \
  if (vs_mem_info((int)dev, NULL, &t) == VS_MEM_DONE) {                         \
    *bytes = AS_WORD(word_t, t);                                                \
    r = CUDA_SUCCESS;                                                           \
  } else {                                                                      \
    r = real->name(bytes, dev);                                                 \
    vs_mem_count_call((int)dev, VRAMSHIM_CALL_OTHER);                           \
  }                                                                             \
  vs_guard_leave();                                                             \
  return r

CUresult vs_hook_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) { TOTAL_BODY(cuDeviceTotalMem_v2, size_t); }
CUresult vs_hook_cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) { TOTAL_BODY(cuDeviceTotalMem, unsigned int); }

/* ---- cuMemGetAddressRange ----------------------------------------------- */
/* An arena block answers its own range; a pointer in arena memory outside
 * every live block (one byte past a block, a freed block) is what the
 * driver calls an unknown pointer. Where the driver answers for a spilled
 * block served again from a larger kept one (spill.h), its range is the
 * request's, and past it the pointer is unknown. */
#define RANGE_BODY(name, ptr_t, word_t)                                         \
  VS_HOOK_ENTER(name, (pbase, psize, dptr));                                    \
  vs_guard_enter();                                                             \
  vs_mem_block blk;                                                             \
  CUresult r;                                                                   \
  int k = vs_mem_block_at((uint64_t)dptr, &blk);                                \
  /* The legacy 32-bit variant cannot name a block above 4 GiB: the driver's. */ \
  if (k == VS_AT_BLOCK && (uint64_t)(ptr_t)blk.base == blk.base && (uint64_t)(word_t)blk.size == blk.size) { \
    if (pbase) *pbase = (ptr_t)blk.base;                                        \
    if (psize) *psize = (word_t)blk.size;                                       \
    r = CUDA_SUCCESS;                                                           \
  } else if (k == VS_AT_GAP) {                                               \
    r = CUDA_ERROR_NOT_FOUND;                                                   \
  } else {                                                                      \
    r = real->name(pbase, psize, dptr);                                         \
    if (r == CUDA_SUCCESS && vs_spill_range((uint64_t)dptr, &blk.base, &blk.size)) { \
      if ((uint64_t)dptr - blk.base >= blk.size) r = CUDA_ERROR_NOT_FOUND;      \
      else if (psize) *psize = (word_t)blk.size;                                \
    }                                                                           \
  }                                                                             \
  vs_guard_leave();                                                             \
  return r

CUresult vs_hook_cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  RANGE_BODY(cuMemGetAddressRange_v2, CUdeviceptr, size_t);
}
CUresult vs_hook_cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr) {
  RANGE_BODY(cuMemGetAddressRange, CUdeviceptr_v1, unsigned int);
}

/* ---- pointer attributes -------------------------------------------------
 * An arena block is described as the driver describes a cuMemAlloc block
 * of its size: its own range, the context it was allocated in, its own
 * buffer id, device memory of its card, IPC-capable, no VMM handle types;
 * a block served for a cuMemAllocAsync as the driver describes one from the
 * device's default pool (that pool's handle, not legacy IPC-capable).
 * SYNC_MEMOPS is the block's own (below). The attributes that describe the
 * memory underneath rather than the allocation (access flags, RDMA, the
 * mapping, P2P tokens) are the driver's answer at the same address. A
 * pointer in arena memory outside every live block is unknown, as the
 * driver says of a freed one. */
enum { ATTR_DRIVER = 0, ATTR_SET };

/* ---- SYNC_MEMOPS of arena blocks ----------------------------------------
 * The one attribute a program may set (cuPointerSetAttribute), and it is the
 * allocation's: on cuMemAlloc memory it reads what was last set on that
 * allocation (0 until then). An arena block shares the driver's memory with
 * other blocks, so the shim keeps the block's own value (the record's
 * sync_memops) and answers it, and gives the memory underneath what the
 * value asks for:
 * - Set: on a chunk the driver takes it (it then covers the block's
 *   neighbours too, whose synchronous copies only synchronise more); on VMM
 *   memory the driver refuses it with CUDA_ERROR_NOT_SUPPORTED, where the
 *   program asked for cuMemAlloc memory and the driver would have said yes
 *   (UCX, libfabric and CUDA-aware MPI set it on every GPU buffer they
 *   register; libfabric's EFA provider fails the transfer when refused), so
 *   the block's context gets CU_CTX_SYNC_MEMOPS instead (cuCtxSetFlags, CUDA
 *   12.1: what UCX itself does for VMM memory): every synchronous memory
 *   operation of the context synchronises, which includes the block's.
 * - Cleared: the block reads 0 again, and the memory underneath keeps what
 *   it had: clearing a chunk's would take it from a neighbour that set it,
 *   and memory that synchronises more is never wrong. */

/* Adds CU_CTX_SYNC_MEMOPS to context ctx's flags (pushed for the call when
 * another is current). */
static CUresult ctx_sync_memops(const vs_real_table *real, uint64_t ctx) {
  if (!real->cuCtxGetFlags || !real->cuCtxSetFlags || !real->cuCtxGetCurrent || !real->cuCtxPushCurrent_v2 ||
      !real->cuCtxPopCurrent_v2)
    return CUDA_ERROR_NOT_SUPPORTED;
  CUcontext cur = NULL, popped;
  unsigned flags = 0;
  CUresult r = real->cuCtxGetCurrent(&cur);
  int push = r == CUDA_SUCCESS && (uint64_t)(uintptr_t)cur != ctx;
  if (push && (r = real->cuCtxPushCurrent_v2((CUcontext)(uintptr_t)ctx)) != CUDA_SUCCESS) return r;
  if (r == CUDA_SUCCESS) r = real->cuCtxGetFlags(&flags);
  if (r == CUDA_SUCCESS && !(flags & CU_CTX_SYNC_MEMOPS)) r = real->cuCtxSetFlags(flags | CU_CTX_SYNC_MEMOPS);
  if (push) (void)real->cuCtxPopCurrent_v2(&popped);
  return r;
}

/* SYNC_MEMOPS set (value non-zero) or cleared on arena block b. */
static CUresult block_sync_memops(const vs_real_table *real, const void *value, CUdeviceptr ptr,
                                  const vs_mem_block *b) {
  int on = *(const unsigned int *)value != 0;
  CUresult r = CUDA_SUCCESS;
  if (on) {
    r = real->cuPointerSetAttribute(value, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, ptr);
    if (r == CUDA_ERROR_NOT_SUPPORTED && ctx_sync_memops(real, b->ctx_handle) == CUDA_SUCCESS) r = CUDA_SUCCESS;
  }
  /* Freed meanwhile (the program's own race): what the driver says of a
   * pointer it does not know. */
  if (r == CUDA_SUCCESS && vs_mem_block_set_sync_memops(b->base, on) != 0) r = CUDA_ERROR_INVALID_VALUE;
  return r;
}

CUresult vs_hook_cuPointerSetAttribute(const void *value, CUpointer_attribute attribute, CUdeviceptr ptr) {
  VS_HOOK_ENTER(cuPointerSetAttribute, (value, attribute, ptr));
  vs_guard_enter();
  vs_mem_block b;
  int k = vs_mem_block_at((uint64_t)ptr, &b);
  CUresult r;
  if (k == VS_AT_GAP) {
    r = CUDA_ERROR_INVALID_VALUE;   /* a pointer the driver would not know */
  } else if (k == VS_AT_BLOCK && value && attribute == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) {
    r = block_sync_memops(real, value, ptr, &b);
  } else {
    r = real->cuPointerSetAttribute(value, attribute, ptr);
  }
  vs_guard_leave();
  return r;
}

static int block_attr(const vs_real_table *real, CUpointer_attribute a, void *data, CUdeviceptr ptr,
                      const vs_mem_block *b, CUresult *err) {
  *err = CUDA_SUCCESS;
  if (b->stream_ordered && a == CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE) {
    CUmemoryPool pool = NULL;
    if (!real->cuDeviceGetDefaultMemPool || real->cuDeviceGetDefaultMemPool(&pool, (CUdevice)b->card) != CUDA_SUCCESS)
      return ATTR_DRIVER;
    *(CUmemoryPool *)data = pool;
    return ATTR_SET;
  }
  if (b->stream_ordered && a == CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE) {
    *(unsigned char *)data = 0;
    return ATTR_SET;
  }
  switch (a) {
  case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = (CUcontext)(uintptr_t)b->ctx_handle; break;
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned int *)data = CU_MEMORYTYPE_DEVICE; break;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = ptr; break;
  case CU_POINTER_ATTRIBUTE_HOST_POINTER: *err = CUDA_ERROR_INVALID_VALUE; break;   /* device memory has none */
  case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned char *)data = 1; break;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned char *)data = 0; break;
  case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *(unsigned char *)data = 1; break;
  case CU_POINTER_ATTRIBUTE_BUFFER_ID:
  case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: *(unsigned long long *)data = b->buffer_id; break;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = b->card; break;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = (CUdeviceptr)b->base; break;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = (size_t)b->size; break;
  case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: *(unsigned long long *)data = 0; break;
  case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(CUmemoryPool *)data = NULL; break;
  case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(unsigned char *)data = (unsigned char)b->sync_memops; break;   /* a bool */
  default: return ATTR_DRIVER;
  }
  return ATTR_SET;
}

/* A range attribute of a spilled block served from a larger kept one
 * (spill.h), after the driver answered with the host allocation's: the
 * request's range, and a pointer past it unknown, as past an arena block. */
static CUresult spill_range_attr(CUpointer_attribute a, void *data, CUdeviceptr ptr) {
  uint64_t base, size;
  if ((a != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR && a != CU_POINTER_ATTRIBUTE_RANGE_SIZE) ||
      !vs_spill_range((uint64_t)ptr, &base, &size))
    return CUDA_SUCCESS;
  if ((uint64_t)ptr - base >= size) return CUDA_ERROR_INVALID_VALUE;
  if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) *(CUdeviceptr *)data = (CUdeviceptr)base;
  else *(size_t *)data = (size_t)size;
  return CUDA_SUCCESS;
}

CUresult vs_hook_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  VS_HOOK_ENTER(cuPointerGetAttribute, (data, attribute, ptr));
  if (!data) VS_FORWARD(cuPointerGetAttribute, (data, attribute, ptr));
  vs_guard_enter();
  vs_mem_block b;
  CUresult r;
  int k = vs_mem_block_at((uint64_t)ptr, &b);
  if (k == VS_AT_BLOCK && block_attr(real, attribute, data, ptr, &b, &r) == ATTR_SET) {
    /* r: the block's answer */
  } else if (k == VS_AT_GAP) {
    r = CUDA_ERROR_INVALID_VALUE;   /* the driver's word for a pointer it does not know */
  } else {
    r = real->cuPointerGetAttribute(data, attribute, ptr);
    if (r == CUDA_SUCCESS) r = spill_range_attr(attribute, data, ptr);
  }
  vs_guard_leave();
  return r;
}

CUresult vs_hook_cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                        CUdeviceptr ptr) {
  VS_HOOK_ENTER(cuPointerGetAttributes, (numAttributes, attributes, data, ptr));
  vs_guard_enter();
  vs_mem_block b;
  int k = numAttributes && attributes && data ? vs_mem_block_at((uint64_t)ptr, &b) : VS_AT_DRIVER;
  /* Unknown to the driver, the plural call reads every attribute as its
   * zero value: what it says of a pointer it never allocated (0). */
  CUresult r = real->cuPointerGetAttributes(numAttributes, attributes, data, k == VS_AT_GAP ? 0 : ptr);
  if (r == CUDA_SUCCESS && k == VS_AT_BLOCK) {
    for (unsigned i = 0; i < numAttributes && r == CUDA_SUCCESS; i++) {
      CUresult e;
      /* The memory type stays the plural call's own answer at the address:
       * the real driver's differs from its singular call's (an H200, driver
       * 580.159.04, reads 0 here for a cuMemAlloc block, 2 from
       * cuPointerGetAttribute; docs/gpu-validation.md), and the arena's
       * memory underneath is device memory of the same card either way. */
      if (attributes[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) continue;
      if (data[i] && block_attr(real, attributes[i], data[i], ptr, &b, &e) == ATTR_SET) r = e;
    }
  } else if (r == CUDA_SUCCESS && k == VS_AT_DRIVER) {
    for (unsigned i = 0; i < numAttributes && r == CUDA_SUCCESS; i++)
      if (data[i]) r = spill_range_attr(attributes[i], data[i], ptr);
  }
  vs_guard_leave();
  return r;
}

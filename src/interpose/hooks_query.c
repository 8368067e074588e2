/* Hooks of the queries whose answers the shim owns: free/total memory (the
 * tenant's view, when quotas answer), address ranges and pointer
 * attributes (an arena block's own range). Otherwise each passes through. */
#include "hook_common.h"

/* ---- cuMemGetInfo ------------------------------------------------------- */
#define INFO_BODY(name, word_t)                                                 \
  VS_HOOK_ENTER(name, (free, total));                                           \
  if (!free || !total) VS_FORWARD(name, (free, total));                         \
  vs_guard_enter();                                                             \
  int card = vs_driver_current_card(real);                                      \
  uint64_t f = 0, t = 0;                                                        \
  CUresult r;                                                                   \
  if (vs_mem_info(card, &f, &t) == VS_MEM_DONE) {                               \
    *free = (word_t)f;                                                          \
    *total = (word_t)t;                                                         \
    r = CUDA_SUCCESS;                                                           \
  } else {                                                                      \
    r = real->name(free, total);                                                \
    vs_mem_count_call(card, VRAMSHIM_CALL_OTHER);                               \
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
    *bytes = (word_t)t;                                                         \
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
#define RANGE_BODY(name, ptr_t, word_t)                                         \
  VS_HOOK_ENTER(name, (pbase, psize, dptr));                                    \
  vs_guard_enter();                                                             \
  uint64_t b = 0, s = 0;                                                        \
  CUresult r;                                                                   \
  /* The legacy 32-bit variant cannot name a block above 4 GiB: the driver's. */ \
  if (vs_mem_range((uint64_t)dptr, &b, &s) == VS_MEM_DONE && (uint64_t)(ptr_t)b == b && \
      (uint64_t)(word_t)s == s) {                                               \
    if (pbase) *pbase = (ptr_t)b;                                               \
    if (psize) *psize = (word_t)s;                                              \
    r = CUDA_SUCCESS;                                                           \
  } else {                                                                      \
    r = real->name(pbase, psize, dptr);                                         \
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
 * The range start/size of an arena block are the block's own (the driver
 * would name the chunk or VMM range around it); every other attribute, and
 * any pointer outside the arena, is the driver's to answer. */
static int is_range_attr(CUpointer_attribute a) {
  return a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR || a == CU_POINTER_ATTRIBUTE_RANGE_SIZE;
}

static void put_range(void *data, CUpointer_attribute a, uint64_t base, uint64_t size) {
  if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) *(CUdeviceptr *)data = (CUdeviceptr)base;
  else *(size_t *)data = (size_t)size;
}

CUresult vs_hook_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  VS_HOOK_ENTER(cuPointerGetAttribute, (data, attribute, ptr));
  if (!data || !is_range_attr(attribute)) VS_FORWARD(cuPointerGetAttribute, (data, attribute, ptr));
  vs_guard_enter();
  uint64_t b = 0, s = 0;
  CUresult r;
  if (vs_mem_range((uint64_t)ptr, &b, &s) == VS_MEM_DONE) {
    put_range(data, attribute, b, s);
    r = CUDA_SUCCESS;
  } else {
    r = real->cuPointerGetAttribute(data, attribute, ptr);
  }
  vs_guard_leave();
  return r;
}

CUresult vs_hook_cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                        CUdeviceptr ptr) {
  VS_HOOK_ENTER(cuPointerGetAttributes, (numAttributes, attributes, data, ptr));
  vs_guard_enter();
  CUresult r = real->cuPointerGetAttributes(numAttributes, attributes, data, ptr);
  uint64_t b = 0, s = 0;
  if (r == CUDA_SUCCESS && attributes && data) {
    int any = 0;
    for (unsigned i = 0; i < numAttributes && !any; i++) any = is_range_attr(attributes[i]) && data[i];
    if (any && vs_mem_range((uint64_t)ptr, &b, &s) == VS_MEM_DONE)
      for (unsigned i = 0; i < numAttributes; i++)
        if (is_range_attr(attributes[i]) && data[i]) put_range(data[i], attributes[i], b, s);
  }
  vs_guard_leave();
  return r;
}

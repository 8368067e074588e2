/* The bodies the allocation and release hooks share (how every hook body
 * starts is driver/hook_enter.h). Private to the hooks_*.c files. */
#ifndef VS_HOOK_COMMON_H
#define VS_HOOK_COMMON_H

#include "hook_enter.h"
#include "memory_service.h"

/* One shape for every "allocate `size` bytes into *dptr" variant (a NULL
 * dptr goes to the driver as it is). DRIVER_ARGS, defined by the hook's
 * file around the hooks that share it, is the hook's own argument list;
 * driver_call is an expression over those arguments. */
#define ALLOC_BODY(name, kind, call, dptr, ptr_t, size, card_expr, driver_call) \
  ALLOC_BODY_BEGIN(name, vs_mem_alloc_begin(&op, kind, card_expr, size, call), dptr, ptr_t, driver_call)

/* The same with the service's begin call given (op is the request).
 * ALLOC_UNACCOUNTED, like DRIVER_ARGS defined around the hooks, is a
 * condition under which the request goes to the driver as it is (0: never). */
#define ALLOC_UNACCOUNTED 0
#define ALLOC_BODY_BEGIN(name, begin, dptr, ptr_t, driver_call)              \
  VS_HOOK_ENTER(name, DRIVER_ARGS);                                           \
  if (!(dptr) || (ALLOC_UNACCOUNTED)) VS_FORWARD(name, DRIVER_ARGS);          \
  vs_guard_enter();                                                           \
  vs_mem_op op;                                                               \
  CUresult r;                                                                 \
  if ((begin) == VS_MEM_DONE) {                                               \
    if (op.result == CUDA_SUCCESS) *(dptr) = (ptr_t)op.addr;                  \
    r = op.result;                                                            \
  } else {                                                                    \
    r = driver_call;                                                          \
    if (vs_mem_retry_refused(&op, r)) r = driver_call;                        \
    r = vs_mem_alloc_end(&op, r, r == CUDA_SUCCESS ? (uint64_t)*(dptr) : 0);  \
    /* served by the service after the driver refused (on_limit = spill) */   \
    if (r == CUDA_SUCCESS && op.addr) *(dptr) = (ptr_t)op.addr;               \
  }                                                                           \
  vs_guard_leave();                                                           \
  return r

/* The same for every release of `key` in key space `space` (device
 * pointers, VMM handles, address ranges). */
#define FREE_BODY(name, space, mask, call, key, driver_call)                   \
  FREE_BODY_BEGIN(name, vs_mem_free_begin(&op, space, mask, key, call), driver_call)

/* The same with the service's begin call given (op is the request). */
#define FREE_BODY_BEGIN(name, begin, driver_call)                            \
  VS_HOOK_ENTER(name, DRIVER_ARGS);                                           \
  vs_guard_enter();                                                           \
  vs_mem_op op;                                                               \
  CUresult r;                                                                 \
  if ((begin) == VS_MEM_DONE)                                                 \
    r = op.result;                                                            \
  else                                                                        \
    r = vs_mem_free_end(&op, driver_call);                                    \
  vs_guard_leave();                                                           \
  return r

#endif

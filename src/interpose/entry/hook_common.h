/* What every hook body starts with, and the bodies the allocation and
 * release hooks share. Private to the hooks_*.c files. */
#ifndef VS_HOOK_COMMON_H
#define VS_HOOK_COMMON_H

#include "driver_table.h"
#include "guard.h"
#include "hooks.h"
#include "memory_service.h"

/* Loads the driver on first use (a call before the shim's constructor ran
 * lands here too), forwards unchanged when the driver lacks this variant
 * or when the shim itself is the caller, and counts the call otherwise.
 * Declares `real`, the driver table. */
#define VS_HOOK_ENTER(name, args)                                       \
  const vs_real_table *real = vs_driver();                              \
  if (__builtin_expect(real == NULL, 0)) return vs_driver_missing_error(); \
  if (__builtin_expect(real->name == NULL, 0)) return CUDA_ERROR_NOT_FOUND; \
  if (vs_guard_active()) return real->name args;                        \
  vs_hook_count(VS_HOOK_##name, VRAMSHIM_PATH_CALLS)

/* A pure pass-through under the guard, for argument shapes the service
 * cannot account (NULL out-parameters: the driver says what is wrong). */
#define VS_FORWARD(name, args)           \
  do {                                   \
    vs_guard_enter();                    \
    CUresult vs_r_ = real->name args;    \
    vs_guard_leave();                    \
    return vs_r_;                        \
  } while (0)

/* One shape for every "allocate `size` bytes into *dptr" variant (a NULL
 * dptr goes to the driver as it is). DRIVER_ARGS, defined by the hook's
 * file around the hooks that share it, is the hook's own argument list;
 * driver_call is an expression over those arguments. */
#define ALLOC_BODY(name, kind, call, dptr, ptr_t, size, card_expr, driver_call) \
  ALLOC_BODY_BEGIN(name, vs_mem_alloc_begin(&op, kind, card_expr, size, call), dptr, ptr_t, driver_call)

/* The same with the service's begin call given (op is the request). */
#define ALLOC_BODY_BEGIN(name, begin, dptr, ptr_t, driver_call)              \
  VS_HOOK_ENTER(name, DRIVER_ARGS);                                           \
  if (!(dptr)) VS_FORWARD(name, DRIVER_ARGS);                                 \
  vs_guard_enter();                                                           \
  vs_mem_op op;                                                               \
  CUresult r;                                                                 \
  if ((begin) == VS_MEM_DONE) {                                               \
    if (op.result == CUDA_SUCCESS) *(dptr) = (ptr_t)op.addr;                  \
    r = op.result;                                                            \
  } else {                                                                    \
    r = driver_call;                                                          \
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

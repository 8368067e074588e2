/* How every hook body starts, in whichever folder it lives: the driver's
 * table, the recursion guard, the call counted. */
#ifndef VS_HOOK_ENTER_H
#define VS_HOOK_ENTER_H

#include "driver_table.h"
#include "guard.h"
#include "hook_ids.h"

/* Loads the driver on first use (the shim itself has started by then: a
 * program reaches a body only through its exported entry point,
 * entry/hooks.c, which starts it first), forwards unchanged when the driver lacks this variant
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

#endif

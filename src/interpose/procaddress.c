/* cuGetProcAddress / cuGetProcAddress_v2: the path the CUDA runtime (>= 11.3)
 * takes for every driver function.
 *
 * The request goes to the driver exactly as made, so the driver alone
 * decides which ABI variant (symbol, cudaVersion, flags) names: _v2 or
 * legacy, _ptsz or not. If the pointer it returns is the driver's own
 * pointer of a hooked variant, the caller gets that variant's hook instead;
 * any other pointer, the return code and the status out-parameter are the
 * driver's, unchanged. Asked for cuGetProcAddress itself, the driver's
 * answer is its own cuGetProcAddress(_v2), which maps to the hook the same
 * way. */
#include "hook_common.h"
#include "log.h"

#include <stdatomic.h>
#include <string.h>

/* Does the driver's answer for `symbol` belong to a hooked family (the
 * symbol itself or symbol_v2, symbol_ptsz, ...)? Then an unknown pointer
 * means an allocation path the shim would miss: say so, once. */
static int hooked_family(const char *symbol) {
  size_t n = strlen(symbol);
  for (int i = 0; i < VS_HOOK_COUNT; i++) {
    const char *h = vs_hook_name((vs_hook_id)i);
    if (strncmp(h, symbol, n) == 0 && (h[n] == '\0' || h[n] == '_')) return 1;
  }
  return 0;
}

static _Atomic int g_said_unknown;

static void answer(const char *symbol, int version, cuuint64_t flags, void **pfn) {
  int id = vs_hook_by_real(*pfn);
  if (id < 0) id = vs_hook_by_addr(*pfn);
  if (id >= 0) {
    vs_hook_count((vs_hook_id)id, VRAMSHIM_PATH_PROCADDRESS);
    VS_DEBUG("cuGetProcAddress(%s, %d, %llu) answered with the hook of %s", symbol ? symbol : "(null)", version,
             (unsigned long long)flags, vs_hook_name((vs_hook_id)id));
    *pfn = vs_hook_addr((vs_hook_id)id);
  } else if (symbol && hooked_family(symbol) && !atomic_exchange(&g_said_unknown, 1)) {
    VS_WARN("cuGetProcAddress(%s, %d, %llu): the driver answered with a function the shim does not know; "
            "calls through it are not seen", symbol, version, (unsigned long long)flags);
  }
}

CUresult vs_hook_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus) {
  VS_HOOK_ENTER(cuGetProcAddress_v2, (symbol, pfn, cudaVersion, flags, symbolStatus));
  vs_guard_enter();
  CUresult r = real->cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (r == CUDA_SUCCESS && pfn && *pfn) answer(symbol, cudaVersion, flags, pfn);
  vs_guard_leave();
  return r;
}

CUresult vs_hook_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  VS_HOOK_ENTER(cuGetProcAddress, (symbol, pfn, cudaVersion, flags));
  vs_guard_enter();
  CUresult r = real->cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  if (r == CUDA_SUCCESS && pfn && *pfn) answer(symbol, cudaVersion, flags, pfn);
  vs_guard_leave();
  return r;
}

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
 * way. A driver that answers with a function it does not export (so no
 * pointer matches) still gets the hook, of the variant the API's version
 * rules name, which forwards to the exported variant. */
#include "hook_enter.h"
#include "hooks.h"
#include "log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* The first CUDA version whose "symbol" means symbol_v2, for the hooked
 * families that have a _v2 (cuda.h's #define table). */
static int v2_since(const char *family) {
  if (!strcmp(family, "cuIpcOpenMemHandle")) return 11000;
  if (!strcmp(family, "cuGetProcAddress")) return 12000;
  if (!strcmp(family, "cuCtxSynchronize")) return 13000;
  if (!strcmp(family, "cuGraphAddNode")) return 12030;
  if (!strcmp(family, "cuStreamDestroy") || !strcmp(family, "cuEventDestroy")) return 4000;
  return 3020;   /* cuMemAlloc, cuMemAllocPitch, cuMemFree, cuMemGetInfo, cuMemGetAddressRange, cuDeviceTotalMem */
}

static int hook_named(const char *family, const char *suffix) {
  char name[128];
  int n = snprintf(name, sizeof name, "%s%s", family, suffix);
  return n > 0 && (size_t)n < sizeof name ? vs_hook_by_name(name) : -1;
}

/* The hooked variant a request names by the driver API's rules, or -1 when
 * the symbol is not of a hooked family. Used only when the driver answers
 * with a pointer the shim does not know (one that is not the exported
 * symbol): the hook then forwards to the driver's exported variant. */
static int variant_by_rule(const char *symbol, int version, cuuint64_t flags) {
  if (!symbol || !*symbol || vs_hook_by_name(symbol) < 0) return -1;
  int id = -1;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) id = hook_named(symbol, "_ptsz");
  if (id < 0 && version >= v2_since(symbol)) id = hook_named(symbol, "_v2");
  if (id < 0) id = vs_hook_by_name(symbol);
  return id >= 0 && vs_driver_real(id) ? id : -1;
}

static _Atomic int g_said_by_rule;

static void answer(const char *symbol, int version, cuuint64_t flags, void **pfn) {
  /* Not a sign of the per-thread default stream: the runtime asks for
   * those variants at start in every program (hook_list_ptds.h); their
   * hooks, which the caller gets below, say when one is called. */
  int id = vs_hook_by_real(*pfn);
  if (id < 0) id = vs_hook_by_addr(*pfn);
  if (id < 0) {
    id = variant_by_rule(symbol, version, flags);
    if (id >= 0 && !atomic_exchange(&g_said_by_rule, 1))
      VS_INFO("cuGetProcAddress(%s, %d, %llu): the driver answered with an unexported function; the "
              "shim answers with its hook of %s by the API's version rules (said once)",
              symbol, version, (unsigned long long)flags, vs_hook_name((vs_hook_id)id));
  }
  if (id < 0) return;   /* not a memory function: the driver's pointer, unchanged */
  vs_hook_count((vs_hook_id)id, VRAMSHIM_PATH_PROCADDRESS);
  VS_DEBUG("cuGetProcAddress(%s, %d, %llu) answered with the hook of %s", symbol ? symbol : "(null)", version,
           (unsigned long long)flags, vs_hook_name((vs_hook_id)id));
  *pfn = vs_hook_addr((vs_hook_id)id);
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

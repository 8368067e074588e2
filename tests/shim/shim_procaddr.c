/* Test 3: every request the CUDA 13 runtime makes of cuGetProcAddress_v2
 * (../shared/data/cudart13-getprocaddress.txt: symbol, version, flags),
 * made through the shim in the same order. Each memory function must come
 * back as the shim's hook of exactly the variant the driver chose; a
 * per-thread default stream request may come back as the shim's hook of a
 * per-thread variant of its family (the arena's stream order); every
 * other function must be the driver's own pointer; failures (symbols the
 * driver lacks, the empty symbol) must be the driver's, with its status.
 *
 * argv[1] or $VRAMSHIM_CUDART_LIST: the list. */
#include "shim_test.h"

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* The families the shim must hook (issue 2; the contexts, issue 9),
 * independent of its own list. */
static const char *const memory_families[] = {
    "cuMemAlloc", "cuMemAllocPitch", "cuMemAllocManaged", "cuMemFree", "cuMemAllocAsync", "cuMemFreeAsync",
    "cuMemAllocFromPoolAsync", "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemAddressReserve",
    "cuMemAddressFree", "cuMemRetainAllocationHandle", "cuIpcOpenMemHandle", "cuIpcCloseMemHandle",
    "cuIpcGetMemHandle", "cuMemGetInfo",
    "cuDeviceTotalMem", "cuMemGetAddressRange", "cuPointerGetAttribute", "cuPointerGetAttributes",
    "cuGetProcAddress", "cuCtxCreate", "cuCtxDestroy", "cuCtxAttach", "cuCtxDetach", "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset",
    /* peer access opens the arena's VMM memory to the peer (hooks_ctx.c) */
    "cuCtxEnablePeerAccess", "cuCtxDisablePeerAccess",
    /* stream creation ends the arena's stream order (issue 11) */
    "cuStreamCreate", "cuStreamCreateWithPriority", "cuGreenCtxCreate", "cuGreenCtxStreamCreate",
    /* the program's own synchronisations count as the arena's (issue 11, stream_syncs.c) */
    "cuCtxSynchronize", "cuStreamSynchronize", "cuStreamQuery", "cuStreamDestroy", "cuEventCreate", "cuEventRecord",
    "cuEventRecordWithFlags", "cuEventQuery", "cuEventSynchronize", "cuEventDestroy",
    /* stream-ordered allocation served by the arena: a capture or a pool of the program's own (stream_alloc.c) */
    "cuStreamBeginCapture", "cuStreamBeginCaptureToGraph", "cuStreamEndCapture", "cuDeviceSetMemPool",
    "cuMemSetMemPool",
    "cuMemPoolSetAccess",
    /* the default pool's statistics and trim count the arena's stream-ordered blocks (pool_view.c) */
    "cuMemPoolGetAttribute", "cuMemPoolSetAttribute", "cuMemPoolTrimTo",
    /* driver pools charged by what they reserve (pool_charge.c) */
    "cuMemPoolCreate", "cuMemPoolDestroy", "cuMemPoolImportFromShareableHandle",
    /* the device's graph memory pool charged by what it reserves (graph_charge.c) */
    "cuGraphAddMemAllocNode", "cuGraphDestroy", "cuGraphInstantiate", "cuGraphInstantiateWithFlags",
    "cuGraphInstantiateWithParams", "cuGraphLaunch", "cuGraphExecDestroy", "cuDeviceGraphMemTrim",
    "cuGraphAddNode", "cuGraphUpload",
    /* CUDA arrays: device memory by handle (hooks_array.c) */
    "cuArrayCreate", "cuArray3DCreate", "cuMipmappedArrayCreate", "cuArrayDestroy", "cuMipmappedArrayDestroy"};

/* A per-thread default stream variant (issue 11): asked for with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, every function of the
 * runtime's list comes back as the shim's hook of a _ptsz/_ptds variant of
 * its family (a call of one ends the arena's stream order), or as the
 * driver's own pointer where the driver has no such variant. */
static int per_thread_hook(const char *sym, const Dl_info *fi) {
  size_t n = fi->dli_sname ? strlen(fi->dli_sname) : 0;
  return n > 5 && strncmp(fi->dli_sname, sym, strlen(sym)) == 0 &&
         (!strcmp(fi->dli_sname + n - 5, "_ptsz") || !strcmp(fi->dli_sname + n - 5, "_ptds"));
}

/* The variant the driver API defines for some requests (true of any driver). */
static const struct {
  const char *sym;
  int version;
  unsigned flags;
  const char *variant;
} expected[] = {
    {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
    {"cuMemFree", 3020, 0, "cuMemFree_v2"},
    {"cuMemGetInfo", 3020, 0, "cuMemGetInfo_v2"},
    {"cuDeviceTotalMem", 3020, 0, "cuDeviceTotalMem_v2"},
    {"cuMemAllocAsync", 11020, 0, "cuMemAllocAsync"},
    {"cuMemAllocAsync", 11020, 2, "cuMemAllocAsync_ptsz"},
    {"cuMemFreeAsync", 11020, 2, "cuMemFreeAsync_ptsz"},
    {"cuIpcOpenMemHandle", 4010, 0, "cuIpcOpenMemHandle"},
    {"cuIpcOpenMemHandle", 11000, 0, "cuIpcOpenMemHandle_v2"},
    {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
    {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
    {"cuCtxSynchronize", 2000, 0, "cuCtxSynchronize"},
    {"cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2"},
    {"cuStreamDestroy", 4000, 0, "cuStreamDestroy_v2"},
    {"cuEventDestroy", 4000, 0, "cuEventDestroy_v2"},
    {"cuStreamSynchronize", 7000, 2, "cuStreamSynchronize_ptsz"},
    {"cuGraphInstantiate", 10000, 0, "cuGraphInstantiate"},
    {"cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2"},
    {"cuGraphLaunch", 10000, 0, "cuGraphLaunch"},
    {"cuGraphLaunch", 10000, 2, "cuGraphLaunch_ptsz"},
    {"cuGraphInstantiateWithParams", 12000, 2, "cuGraphInstantiateWithParams_ptsz"},
    {"cuGraphAddNode", 12020, 0, "cuGraphAddNode"},
    {"cuGraphAddNode", 12030, 0, "cuGraphAddNode_v2"},
    {"cuGraphUpload", 11010, 0, "cuGraphUpload"},
    {"cuGraphUpload", 11010, 2, "cuGraphUpload_ptsz"},
    {"cuStreamBeginCapture", 10010, 2, "cuStreamBeginCapture_v2_ptsz"},
    {"cuStreamEndCapture", 10000, 2, "cuStreamEndCapture_ptsz"},
    {"cuArrayCreate", 3020, 0, "cuArrayCreate_v2"},
    {"cuArray3DCreate", 3020, 0, "cuArray3DCreate_v2"},
    {"cuMipmappedArrayCreate", 5000, 0, "cuMipmappedArrayCreate"},
};

static int is_memory(const char *sym) {
  for (size_t i = 0; i < sizeof memory_families / sizeof *memory_families; i++)
    if (strcmp(sym, memory_families[i]) == 0) return 1;
  return 0;
}

static const char *expected_variant(const char *sym, int version, unsigned flags) {
  for (size_t i = 0; i < sizeof expected / sizeof *expected; i++)
    if (!strcmp(sym, expected[i].sym) && version == expected[i].version && flags == expected[i].flags)
      return expected[i].variant;
  return NULL;
}

int main(int argc, char **argv) {
  shim_api shim = t_shim();
  const char *list = getenv("VRAMSHIM_CUDART_LIST");
  if (!list || !*list) list = argc > 1 ? argv[1] : NULL;
  T_CHECK(list, "usage: shim_procaddr LIST (or $VRAMSHIM_CUDART_LIST)");
  FILE *f = fopen(list, "r");
  T_CHECK(f, "cannot open %s", list);

  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  T_CHECK(h, "dlopen(libcuda.so.1): %s", dlerror());
  gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
  T_CHECK(gpa, "cuGetProcAddress_v2");
  Dl_info shim_obj, drv_obj, fi;
  T_CHECK(dladdr((void *)gpa, &shim_obj) && strstr(shim_obj.dli_fname, "libvramshim"),
          "dlsym(cuGetProcAddress_v2) answered by the shim");
  void *init = dlsym(h, "cuInit");
  T_CHECK(init && dladdr(init, &drv_obj), "cuInit");

  char sym[256];
  int version;
  unsigned long long flags;
  int lines = 0, hooked = 0, driver_own = 0, not_found = 0, checked_variants = 0, per_thread = 0;
  while (fscanf(f, "%255s %d %llu", sym, &version, &flags) == 3) {
    lines++;
    const char *s = strcmp(sym, "(empty)") == 0 ? "" : sym;
    void *fn = (void *)0x1;
    CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)-1;
    CUresult r = gpa(s, &fn, version, flags, &status);
    if (r != CUDA_SUCCESS) {
      T_CHECK(fn == NULL, "line %d %s: failed lookup leaves NULL", lines, sym);
      T_CHECK(status != CU_GET_PROC_ADDRESS_SUCCESS, "line %d %s: status says why (%d)", lines, sym, (int)status);
      not_found++;
      continue;
    }
    /* The real driver (an H200, driver 580.159.04) answers the empty name,
     * cudart's first probe, with success and a not-found status: no
     * function, and the status says so. */
    if (status != CU_GET_PROC_ADDRESS_SUCCESS && fn == NULL) {
      T_SAY("line %d %s: not found (call succeeded, status %d)", lines, sym, (int)status);
      not_found++;
      continue;
    }
    T_CHECK(fn && status == CU_GET_PROC_ADDRESS_SUCCESS, "line %d %s: found, status success", lines, sym);
    T_CHECK(dladdr(fn, &fi) && fi.dli_fname, "line %d %s: pointer in a loaded object", lines, sym);
    if (is_memory(s)) {
      T_CHECK(fi.dli_fbase == shim_obj.dli_fbase, "line %d %s %d %llu: memory function answered by the shim (got %s)",
              lines, sym, version, flags, fi.dli_fname);
      T_CHECK(fi.dli_sname && strncmp(fi.dli_sname, s, strlen(s)) == 0, "line %d %s: hook of its family (%s)", lines,
              sym, fi.dli_sname ? fi.dli_sname : "?");
      T_CHECK(fn == dlsym(RTLD_DEFAULT, fi.dli_sname), "line %d %s: the same hook dlsym gives", lines, sym);
      const char *want = expected_variant(s, version, (unsigned)flags);
      if (want) {
        T_CHECK(strcmp(fi.dli_sname, want) == 0, "line %d %s %d %llu: variant %s, want %s", lines, sym, version,
                flags, fi.dli_sname, want);
        checked_variants++;
      }
      hooked++;
    } else if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && fi.dli_fbase == shim_obj.dli_fbase) {
      T_CHECK(per_thread_hook(s, &fi), "line %d %s %d %llu: a per-thread hook of its family (got %s)", lines, sym,
              version, flags, fi.dli_sname ? fi.dli_sname : "?");
      T_CHECK(fn == dlsym(RTLD_DEFAULT, fi.dli_sname), "line %d %s: the same hook dlsym gives", lines, sym);
      hooked++;
      per_thread++;
    } else {
      T_CHECK(fi.dli_fbase == drv_obj.dli_fbase, "line %d %s: the driver's own pointer (got %s)", lines, sym,
              fi.dli_fname);
      driver_own++;
    }
  }
  fclose(f);
  T_CHECK(lines == 440, "read the whole list (%d lines)", lines);
  T_CHECK(hooked >= 8, "memory functions hooked: %d", hooked);
  T_EQ_U64(shim.hook_count(NULL, VRAMSHIM_PATH_PROCADDRESS), (uint64_t)hooked, "every hook answer counted");
  T_SAY("%d requests: %d memory functions answered with hooks (%d variants checked; %d per-thread variants), %d "
        "driver pointers, %d not found by the driver",
        lines, hooked, checked_variants, per_thread, driver_own, not_found);
  T_SAY("PASS");
  return 0;
}

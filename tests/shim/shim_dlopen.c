/* Test 2: a program that reaches the driver only through
 * dlopen("libcuda.so.1") + dlsym, as ctypes, Numba and the CUDA runtime do.
 * A lookup on a handle never sees a preloaded library: these calls are
 * seen only because the shim answers dlsym. Legacy names answer with the
 * legacy hook, which calls the driver's legacy function (same ABI). */
#include "shim_test.h"

typedef CUresult (*alloc_v2_t)(CUdeviceptr *, size_t);
typedef CUresult (*free_v2_t)(CUdeviceptr);
typedef CUresult (*alloc_v1_t)(unsigned int *, unsigned int);
typedef CUresult (*free_v1_t)(unsigned int);
typedef CUresult (*info_v2_t)(size_t *, size_t *);
typedef CUresult (*info_v1_t)(unsigned int *, unsigned int *);
typedef CUresult (*init_t)(unsigned);
typedef CUresult (*retain_t)(CUcontext *, CUdevice);
typedef CUresult (*setcur_t)(CUcontext);
typedef CUresult (*htod_t)(CUdeviceptr, const void *, size_t);
typedef CUresult (*dtoh_t)(void *, CUdeviceptr, size_t);

static const char *object_of(void *fn) {
  Dl_info info;
  return fn && dladdr(fn, &info) && info.dli_fname ? info.dli_fname : "?";
}

static int in_shim(void *fn) { return strstr(object_of(fn), "libvramshim") != NULL; }

int main(void) {
  shim_api shim = t_shim();
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  T_CHECK(h, "dlopen(libcuda.so.1): %s", dlerror());
  sim_api sim = t_sim(h);

  init_t init = (init_t)dlsym(h, "cuInit");
  retain_t retain = (retain_t)dlsym(h, "cuDevicePrimaryCtxRetain");
  setcur_t setcur = (setcur_t)dlsym(h, "cuCtxSetCurrent");
  htod_t htod = (htod_t)dlsym(h, "cuMemcpyHtoD_v2");
  dtoh_t dtoh = (dtoh_t)dlsym(h, "cuMemcpyDtoH_v2");
  alloc_v2_t alloc = (alloc_v2_t)dlsym(h, "cuMemAlloc_v2");
  free_v2_t fr = (free_v2_t)dlsym(h, "cuMemFree_v2");
  info_v2_t info = (info_v2_t)dlsym(h, "cuMemGetInfo_v2");
  alloc_v1_t alloc1 = (alloc_v1_t)dlsym(h, "cuMemAlloc");
  free_v1_t free1 = (free_v1_t)dlsym(h, "cuMemFree");
  info_v1_t info1 = (info_v1_t)dlsym(h, "cuMemGetInfo");
  T_CHECK(init && retain && setcur && htod && dtoh && alloc && fr && info, "driver functions found");

  /* Memory functions come from the shim, everything else from the driver. */
  T_CHECK(in_shim((void *)alloc) && in_shim((void *)fr) && in_shim((void *)info), "memory lookups answered by the shim");
  T_CHECK(!in_shim((void *)init) && !in_shim((void *)htod), "other lookups answered by the driver (%s)",
          object_of((void *)init));
  T_CHECK(alloc1 == NULL || in_shim((void *)alloc1), "legacy cuMemAlloc answered by the shim");
  T_CHECK((void *)alloc != (void *)alloc1, "cuMemAlloc and cuMemAlloc_v2 are different hooks");
  T_CHECK(shim.hook_count("cuMemAlloc_v2", VRAMSHIM_PATH_DLSYM) >= 1, "the dlsym answer was counted");
  T_CHECK(dlsym(h, "cuNoSuchFunction") == NULL, "unknown cu* names: nothing");
  T_CHECK(dlsym(h, "vramshim_stats") == NULL, "a handle lookup still does not see the shim");

  t_context(init, retain, setcur);
  CUdeviceptr p[3];
  size_t sizes[3] = {100, 1 << 20, 7 << 20};
  for (int i = 0; i < 3; i++) {
    T_CU(alloc(&p[i], sizes[i]));
    t_match_live(&shim, &sim, 0, "dlsym'd cuMemAlloc_v2");
  }
  char buf[100], back[100];
  for (int i = 0; i < 100; i++) buf[i] = (char)i;
  T_CU(htod(p[0], buf, sizeof buf));
  T_CU(dtoh(back, p[0], sizeof back));
  T_CHECK(memcmp(buf, back, sizeof buf) == 0, "bytes survive");
  size_t f = 0, t = 0;
  T_CU(info(&f, &t));

  /* Legacy variants reach the driver's legacy functions, never _v2. */
  if (alloc1 && sim.calls) {
    uint64_t v2_before = sim.calls("cuMemAlloc_v2"), v1_before = sim.calls("cuMemAlloc");
    unsigned int small = 0;
    CUresult r = alloc1(&small, 4096);
    T_EQ_U64(sim.calls("cuMemAlloc"), v1_before + 1, "legacy hook calls the legacy driver function");
    T_EQ_U64(sim.calls("cuMemAlloc_v2"), v2_before, "... and not cuMemAlloc_v2");
    if (r == CUDA_SUCCESS) T_CU(free1(small));
    T_SAY("legacy cuMemAlloc: driver answered %d", (int)r);
    unsigned int f1 = 0, t1 = 0;
    uint64_t gi = sim.calls("cuMemGetInfo");
    (void)info1(&f1, &t1);
    T_EQ_U64(sim.calls("cuMemGetInfo"), gi + 1, "legacy cuMemGetInfo reaches the legacy function");
  }
  t_match_live(&shim, &sim, 0, "after legacy calls");

  for (int i = 0; i < 3; i++) T_CU(fr(p[i]));
  t_match_live(&shim, &sim, 0, "after frees");
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 0, "live back to zero");
  T_EQ_U64(st.free_requests, 3, "frees counted");
  T_CHECK(st.peak_live_bytes >= sizes[0] + sizes[1] + sizes[2], "peak");
  T_SAY("PASS");
  return 0;
}

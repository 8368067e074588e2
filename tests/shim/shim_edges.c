/* Edge cases of the shim, one per run: shim_edges CASE.
 *   missing_driver  VRAMSHIM_DRIVER names nothing: one clear message, an error code, no crash
 *   null_out        NULL out-parameters: the driver's error, nothing accounted
 *   double_free     the second free gets the driver's error; accounting intact
 *   unknown_ptr     pointers the shim never saw go to the driver unchanged
 *   fork            a forked child starts with empty accounting; the parent keeps its own
 *   rtld_next       dlsym(RTLD_NEXT) still means "after the caller", not "after the shim"
 *   early           a hook called from a constructor that ran before the shim's
 *   reentrant       a driver calling its own exported cuMemAlloc_v2: accounted once
 *   unexported      a driver whose cuGetProcAddress hands out unexported functions
 *   fork_threads    forks while other threads allocate: no child inherits a held lock
 * The program is not linked with the driver: it finds the hooks by name. */
#include "shim_test.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

typedef CUresult (*alloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*free_t)(CUdeviceptr);
typedef CUresult (*info_t)(size_t *, size_t *);
typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*attr_t)(void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*range_t)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*pitch_t)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
typedef CUresult (*init_t)(unsigned);
typedef CUresult (*retain_t)(CUcontext *, CUdevice);
typedef CUresult (*setcur_t)(CUcontext);

static shim_api shim;
static sim_api sim;
static alloc_t alloc;
static free_t fr;
static info_t info;
static gpa_t gpa;
static attr_t attr;
static range_t range;
static pitch_t pitch;

static void lookup(void) {
  alloc = (alloc_t)dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
  fr = (free_t)dlsym(RTLD_DEFAULT, "cuMemFree_v2");
  info = (info_t)dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2");
  gpa = (gpa_t)dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
  attr = (attr_t)dlsym(RTLD_DEFAULT, "cuPointerGetAttribute");
  range = (range_t)dlsym(RTLD_DEFAULT, "cuMemGetAddressRange_v2");
  pitch = (pitch_t)dlsym(RTLD_DEFAULT, "cuMemAllocPitch_v2");
  T_CHECK(alloc && fr && info && gpa && attr && range && pitch, "the shim's entry points");
}

static void context(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  T_CHECK(h, "dlopen(libcuda.so.1): %s", dlerror());
  sim = t_sim(h);
  t_context((init_t)dlsym(h, "cuInit"), (retain_t)dlsym(h, "cuDevicePrimaryCtxRetain"),
            (setcur_t)dlsym(h, "cuCtxSetCurrent"));
}

static int missing_driver(void) {
  /* Capture stderr to count the shim's messages. */
  char path[] = "/tmp/vramshim-edges-XXXXXX";
  int fd = mkstemp(path);
  T_CHECK(fd >= 0, "mkstemp");
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  lookup();   /* without a driver, RTLD_DEFAULT still finds the shim's exports */
  CUdeviceptr p = 0;
  size_t f = 1, t = 1;
  void *fn = (void *)0x1;
  CUresult r1 = alloc(&p, 4096), r2 = info(&f, &t), r3 = fr(0x1000), r4 = gpa("cuMemAlloc", &fn, 3020, 0, NULL);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char buf[4096] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  unlink(path);
  T_CHECK(n > 0, "the shim said something");
  printf("%s", buf);
  int count = 0;
  for (const char *s = buf; (s = strstr(s, "vramshim: cannot load the CUDA driver")); s++) count++;
  T_CHECK(count == 1, "exactly one message about the missing driver (%d)", count);
  T_CHECK(strstr(buf, "/nonexistent") != NULL, "the message names the driver path");
  CUresult want = CUDA_ERROR_NOT_INITIALIZED;
  T_CHECK(r1 == want && r2 == want && r3 == want && r4 == want, "NOT_INITIALIZED from every hook (%d %d %d %d)", r1,
          r2, r3, r4);
  T_CHECK(shim.driver_path() == NULL, "no driver path");
  /* A program that finds some libcuda by itself still gets the hooks (which
   * fail): nothing slips past the shim. */
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    T_CHECK(dlsym(h, "cuMemAlloc_v2") == (void *)alloc, "a handle lookup without the shim's driver: the hook");
    T_CHECK(dlsym(h, "cuInit") != NULL, "other functions: the library's own");
  }
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes + st.alloc_requests, 0, "nothing accounted");
  return 0;
}

static int null_out(void) {
  lookup();
  context();
  T_CHECK(alloc(NULL, 4096) != CUDA_SUCCESS, "cuMemAlloc_v2(NULL)");
  T_CHECK(info(NULL, NULL) != CUDA_SUCCESS, "cuMemGetInfo_v2(NULL, NULL)");
  T_CHECK(pitch(NULL, NULL, 100, 100, 4) != CUDA_SUCCESS, "cuMemAllocPitch_v2(NULL, NULL)");
  CUdeviceptr p;
  T_CHECK(pitch(&p, NULL, 100, 100, 4) != CUDA_SUCCESS, "cuMemAllocPitch_v2(&p, NULL)");
  T_CHECK(gpa("cuMemAlloc", NULL, 3020, 0, NULL) != CUDA_SUCCESS, "cuGetProcAddress_v2(pfn NULL)");
  T_CHECK(gpa(NULL, (void **)&p, 3020, 0, NULL) != CUDA_SUCCESS, "cuGetProcAddress_v2(symbol NULL)");
  T_CU(alloc(&p, 4096));
  T_CHECK(attr(NULL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS, "cuPointerGetAttribute(NULL)");
  (void)range(NULL, NULL, p);   /* the driver may accept both NULL; it must not crash */
  T_CU(fr(p));
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.alloc_requests, 1, "only the real allocation counted");
  T_EQ_U64(st.live_bytes, 0, "nothing live");
  t_match_live(&shim, &sim, 0, "after NULL arguments");
  return 0;
}

static int double_free(void) {
  lookup();
  context();
  CUdeviceptr p, q;
  T_CU(alloc(&p, 1 << 16));
  T_CU(alloc(&q, 1 << 12));
  T_CU(fr(p));
  CUresult r = fr(p);
  T_CHECK(r != CUDA_SUCCESS, "second free fails");
  T_SAY("second cuMemFree: driver's error %d", (int)r);
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 1 << 12, "the other allocation still accounted");
  T_EQ_U64(st.live_count, 1, "one live");
  T_EQ_U64(st.free_requests, 1, "one free accounted");
  t_match_live(&shim, &sim, 0, "after a double free");
  T_CU(fr(q));
  st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 0, "zero at the end");
  return 0;
}

static int unknown_ptr(void) {
  lookup();
  context();
  CUdeviceptr p;
  T_CU(alloc(&p, 1 << 16));
  CUdeviceptr bogus = (CUdeviceptr)0x7ff000001000ULL;
  T_CHECK(fr(bogus) != CUDA_SUCCESS, "freeing a pointer nobody allocated fails in the driver");
  T_CHECK(fr(p + 512) != CUDA_SUCCESS, "freeing the inside of an allocation fails in the driver");
  unsigned int type = 0;
  CUresult r = attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, bogus);
  T_SAY("attribute of an unknown pointer: %d", (int)r);
  CUdeviceptr base = 0;
  size_t size = 0;
  T_CU(range(&base, &size, p + 100));
  T_CHECK(base == p, "inner pointers are the driver's to resolve");
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 1 << 16, "accounting untouched");
  T_EQ_U64(st.free_requests, 0, "no free accounted");
  T_CU(fr(p));
  t_match_live(&shim, &sim, 0, "at the end");
  return 0;
}

static int fork_case(void) {
  int (*vramshim_card_count_fn)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "vramshim_card_count");
  lookup();
  context();
  CUdeviceptr p[3];
  for (int i = 0; i < 3; i++) T_CU(alloc(&p[i], 1000));
  pid_t pid = fork();
  T_CHECK(pid >= 0, "fork");
  if (pid == 0) {
    vramshim_card_stats st;
    if (shim.stats(0, &st) != 0 || st.live_bytes || st.live_count || st.alloc_requests || st.peak_live_bytes)
      _exit(3);
    if (shim.hook_count(NULL, VRAMSHIM_PATH_CALLS) != 0) _exit(4);
    if (vramshim_card_count_fn && vramshim_card_count_fn() != 0) _exit(5);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child started clean (status %d)", status);
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_count, 3, "the parent keeps its accounting");
  for (int i = 0; i < 3; i++) T_CU(fr(p[i]));
  T_EQ_U64(t_stats(&shim, 0).live_bytes, 0, "zero");
  return 0;
}

static _Atomic int g_stop;
static CUcontext g_ctx;

static void *churn(void *arg) {
  (void)arg;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ((setcur_t)dlsym(h, "cuCtxSetCurrent"))(g_ctx);
  while (!g_stop) {
    CUdeviceptr p;
    if (alloc(&p, 4096) == CUDA_SUCCESS) fr(p);
  }
  return NULL;
}

static int fork_threads(void) {
  lookup();
  context();
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  T_CU(((CUresult(*)(CUcontext *))dlsym(h, "cuCtxGetCurrent"))(&g_ctx));
  pthread_t t[2];
  for (int i = 0; i < 2; i++) T_CHECK(pthread_create(&t[i], NULL, churn, NULL) == 0, "thread");
  for (int round = 0; round < 20; round++) {
    pid_t pid = fork();
    T_CHECK(pid >= 0, "fork");
    if (pid == 0) {
      /* Every stripe lock and the driver lock must be free here: a free of
       * an unknown pointer takes a stripe lock, a lookup by name the driver's. */
      alarm(10);
      for (int i = 0; i < 64; i++) (void)fr((CUdeviceptr)(0x7f0000000000ULL + (CUdeviceptr)i * 4096));
      vramshim_card_stats st;
      _exit(shim.stats(0, &st) == 0 && st.live_count == 0 && st.alloc_requests == 0 ? 0 : 3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "round %d: the child ran clean (status %d)", round, status);
  }
  g_stop = 1;
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  T_EQ_U64(t_stats(&shim, 0).live_bytes, 0, "the parent's accounting intact");
  t_match_live(&shim, &sim, 0, "after the forks");
  return 0;
}

static int rtld_next(void) {
  /* From the program, the next object after it is the preloaded shim, which
   * defines vramshim_version. Were the override to lose the caller, glibc
   * would search after the shim and find nothing. */
  void *fn = dlsym(RTLD_NEXT, "vramshim_version");
  T_CHECK(fn != NULL, "dlsym(RTLD_NEXT) searched after the program, not after the shim");
  T_CHECK(dlsym(RTLD_NEXT, "vs_no_such_symbol") == NULL, "unknown names: NULL");
  return 0;
}

static int early(void) {
  int *result = (int *)dlsym(RTLD_DEFAULT, "vs_early_result");
  T_CHECK(result, "libshim_early.so is preloaded after the shim");
  T_SAY("the hook called from an earlier constructor returned %d", *result);
  T_CHECK(*result != -1, "the early constructor reached a hook");
  T_CHECK(shim.driver_path() != NULL, "the early call loaded the driver lazily");
  T_CHECK(shim.hook_count("cuMemGetInfo_v2", VRAMSHIM_PATH_CALLS) == 1, "and was counted");
  return 0;
}

static int reentrant(void) {
  typedef CUresult (*managed_t)(CUdeviceptr *, size_t, unsigned);
  managed_t managed = (managed_t)dlsym(RTLD_DEFAULT, "cuMemAllocManaged");
  lookup();
  T_CHECK(managed, "cuMemAllocManaged");
  CUdeviceptr p;
  T_CU(managed(&p, 1000, CU_MEM_ATTACH_GLOBAL));
  vramshim_card_stats st = t_stats(&shim, 1);   /* the stand-in's card */
  T_EQ_U64(st.alloc_requests, 1, "one request accounted, not two");
  T_EQ_U64(st.live_count, 1, "one live allocation");
  T_EQ_U64(st.live_bytes, 1000, "its size once");
  T_EQ_U64(shim.hook_count("cuMemAlloc_v2", VRAMSHIM_PATH_CALLS), 0, "the driver's inner call passed straight through");
  T_EQ_U64(shim.hook_count("cuMemAllocManaged", VRAMSHIM_PATH_CALLS), 1, "the program's call was seen");
  T_CU(fr(p));
  st = t_stats(&shim, 1);
  T_EQ_U64(st.live_bytes, 0, "freed");
  /* The program's own cuMemAlloc_v2 is a program call again: counted. */
  T_CU(alloc(&p, 512));
  T_EQ_U64(shim.hook_count("cuMemAlloc_v2", VRAMSHIM_PATH_CALLS), 1, "outside a hook the guard is off");
  T_CU(fr(p));
  return 0;
}

static int unexported(void) {
  lookup();
  void *fn = NULL, *fr_fn = NULL, *other = NULL;
  CUdriverProcAddressQueryResult st;
  T_CU(gpa("cuMemAlloc", &fn, 3020, 0, &st));
  T_CHECK(fn == (void *)alloc, "an unexported cuMemAlloc answer still comes back as the hook of cuMemAlloc_v2");
  T_CU(gpa("cuMemFree", &fr_fn, 12000, 0, &st));
  T_CHECK(fr_fn == (void *)fr, "cuMemFree: the hook of cuMemFree_v2");
  T_CU(gpa("cuCtxGetDevice", &other, 2000, 0, &st));
  Dl_info info;
  T_CHECK(dladdr(other, &info) && !strstr(info.dli_fname, "libvramshim"), "other functions stay the driver's");
  CUdeviceptr p;
  T_CU(((alloc_t)fn)(&p, 4096));
  vramshim_card_stats s1 = t_stats(&shim, 1);
  T_EQ_U64(s1.live_bytes, 4096, "the allocation through it was accounted");
  T_CU(((free_t)fr_fn)(p));
  T_EQ_U64(t_stats(&shim, 1).live_bytes, 0, "and its free");
  T_EQ_U64(shim.hook_count(NULL, VRAMSHIM_PATH_PROCADDRESS), 2, "two lookups answered with hooks");
  return 0;
}

int main(int argc, char **argv) {
  shim = t_shim();
  const char *c = argc > 1 ? argv[1] : "";
  int r = -1;
  if (!strcmp(c, "missing_driver")) r = missing_driver();
  else if (!strcmp(c, "null_out")) r = null_out();
  else if (!strcmp(c, "double_free")) r = double_free();
  else if (!strcmp(c, "unknown_ptr")) r = unknown_ptr();
  else if (!strcmp(c, "fork")) r = fork_case();
  else if (!strcmp(c, "fork_threads")) r = fork_threads();
  else if (!strcmp(c, "rtld_next")) r = rtld_next();
  else if (!strcmp(c, "early")) r = early();
  else if (!strcmp(c, "reentrant")) r = reentrant();
  else if (!strcmp(c, "unexported")) r = unexported();
  T_CHECK(r == 0, "unknown case '%s'", c);
  T_SAY("%s: PASS", c);
  return 0;
}

/* Edges of the arena inside the shim. Argument: the case.
 *   double_free: a second free of an arena block (one at a chunk's base
 *     included) is the driver's error and frees nothing else;
 *   no_context: cuMemAlloc without a current context is the driver's error;
 *   fork: a child starts with no arena memory of its own and a fresh arena;
 *   legacy: the 32-bit cuMemAlloc is never served by the arena (its
 *     addresses need 64 bits): it goes to the driver, whatever it says. */
#include "shim_test.h"
#include "vramsim.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

static void double_free(shim_api *shim) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUdeviceptr a, b, c;
  T_CU(cuMemAlloc(&a, 300 << 10));   /* the first heap block: at the base of the first chunk or range */
  T_CU(cuMemAlloc(&b, 300 << 10));
  T_CU(cuMemAlloc(&c, 1000));
  unsigned char buf[1000], got[1000];
  for (int i = 0; i < 1000; i++) buf[i] = (unsigned char)(i * 3);
  T_CU(cuMemcpyHtoD(b, buf, sizeof buf));
  uint64_t held = vramsim_live_bytes(0);
  T_CU(cuMemFree(a));
  T_CHECK(cuMemFree(a) == CUDA_ERROR_INVALID_VALUE, "double free: the driver's error");
  T_CU(cuMemFree(c));
  T_CHECK(cuMemFree(c) == CUDA_ERROR_INVALID_VALUE, "double free of a small block");
  T_CHECK(cuMemFree(b + 512) == CUDA_ERROR_INVALID_VALUE, "an interior pointer");
  T_CHECK(cuMemFree(0x10000) == CUDA_ERROR_INVALID_VALUE, "a pointer never allocated");
  T_EQ_U64(vramsim_live_bytes(0), held, "the driver still holds the arena's memory");
  T_CU(cuMemcpyDtoH(got, b, sizeof got));
  T_CHECK(memcmp(buf, got, sizeof buf) == 0, "the live block is intact");
  vramshim_card_stats st = t_stats(shim, 0);
  T_EQ_U64(st.live_count, 1, "one block live");
  T_EQ_U64(st.free_requests, 2, "two frees of known blocks");
  T_CU(cuMemFree(b));
}

static void legacy(shim_api *shim) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  typedef CUresult (*alloc_v1)(unsigned int *, unsigned int);
  alloc_v1 f = (alloc_v1)(uintptr_t)dlsym(RTLD_DEFAULT, "cuMemAlloc");
  T_CHECK(f != NULL, "the legacy entry point is exported");
  uint64_t calls = vramsim_calls("cuMemAlloc");
  unsigned int p = 0;
  CUresult r = f(&p, 4096);
  T_EQ_U64(vramsim_calls("cuMemAlloc"), calls + 1, "the legacy call reached the driver");
  vramshim_card_stats st = t_stats(shim, 0);
  if (r == CUDA_SUCCESS) {
    T_EQ_U64(st.live_count, 1, "accounted as a driver allocation");
    T_CHECK(((CUresult (*)(unsigned int))(uintptr_t)dlsym(RTLD_DEFAULT, "cuMemFree"))(p) == CUDA_SUCCESS, "legacy free");
  } else {
    T_CHECK(st.live_count == 0, "the driver's refusal (%d) is passed on, nothing served", (int)r);
    T_EQ_U64(st.reserved_bytes, 0, "and the arena took nothing for it");
  }
}

static void no_context(void) {
  T_CU(cuInit(0));
  CUdeviceptr p;
  CUresult r = cuMemAlloc(&p, 4096);
  T_CHECK(r == CUDA_ERROR_INVALID_CONTEXT, "no context: the driver's error (%d)", (int)r);
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  T_CU(cuMemAlloc(&p, 4096));   /* and the arena works once there is one */
  T_CU(cuMemFree(p));
}

static void fork_case(shim_api *shim) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUdeviceptr p, q;
  T_CU(cuMemAlloc(&p, 4096));
  T_CU(cuMemAlloc(&q, 300 << 10));
  pid_t pid = fork();
  T_CHECK(pid >= 0, "fork");
  if (pid == 0) {
    vramshim_card_stats st = t_stats(shim, 0);
    T_EQ_U64(st.live_bytes + st.reserved_bytes + st.alloc_requests, 0, "the child starts clean");
    t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
    T_CHECK(cuMemFree(q) == CUDA_ERROR_INVALID_VALUE, "the parent's block is not the child's");
    CUdeviceptr r;
    T_CU(cuMemAlloc(&r, 4096));
    unsigned char b[16] = {1, 2, 3}, g[16];
    T_CU(cuMemcpyHtoD(r, b, sizeof b));
    T_CU(cuMemcpyDtoH(g, r, sizeof g));
    T_CHECK(!memcmp(b, g, sizeof b), "the child's own arena works");
    T_CU(cuMemFree(r));
    T_EQ_U64(t_stats(shim, 0).live_bytes, 0, "child: zero");
    T_SAY("child: PASS");
    _exit(0);   /* the sim drops the parent's records in a child: not a leak of the child's */
  }
  int status = 0;
  waitpid(pid, &status, 0);
  T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child passed (status %d)", status);
  T_CU(cuMemFree(p));
  T_CU(cuMemFree(q));
  T_EQ_U64(t_stats(shim, 0).live_bytes, 0, "parent: zero");
}

int main(int argc, char **argv) {
  shim_api shim = t_shim();
  const char *c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "double_free")) double_free(&shim);
  else if (!strcmp(c, "no_context")) no_context();
  else if (!strcmp(c, "fork")) fork_case(&shim);
  else if (!strcmp(c, "legacy")) legacy(&shim);
  else T_CHECK(0, "unknown case %s", c);
  T_SAY("%s: PASS", c);
  return 0;
}

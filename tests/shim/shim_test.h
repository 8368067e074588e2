/* Helpers shared by the programs that run with the shim preloaded.
 *
 * The shim's API (vramshim_*) and the simulated driver's (vramsim_*) are
 * both looked up at run time, so the same program runs over the sim and
 * over a real driver: without the sim, the sim comparisons are skipped and
 * said so. Output lines start with "vramshim-test: ". */
#ifndef VS_SHIM_TEST_H
#define VS_SHIM_TEST_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vramshim.h"

#define T_SAY(...) (printf("vramshim-test: " __VA_ARGS__), printf("\n"), fflush(stdout))
#define T_CHECK(cond, ...)                                                                   \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      printf("vramshim-test: FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                  \
      printf(__VA_ARGS__);                                                                   \
      printf("\n");                                                                          \
      fflush(stdout);                                                                        \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)
#define T_CU(call) T_CHECK((call) == CUDA_SUCCESS, "%s failed", #call)
#define T_EQ_U64(a, b, what)                                                                 \
  T_CHECK((uint64_t)(a) == (uint64_t)(b), "%s: %llu != %llu", what, (unsigned long long)(a), \
          (unsigned long long)(b))

typedef struct shim_api {
  int (*stats)(int, vramshim_card_stats *);
  uint64_t (*hook_count)(const char *, vramshim_path);
  const char *(*driver_path)(void);
} shim_api;

typedef struct sim_api {
  uint64_t (*calls)(const char *);
  void (*reset_calls)(void);
  uint64_t (*live_bytes)(int);
  uint64_t (*live_count)(int);
  uint64_t (*card_used)(int);
} sim_api;

/* The shim must be there: every test here is about it. */
static inline shim_api t_shim(void) {
  shim_api s;
  *(void **)&s.stats = dlsym(RTLD_DEFAULT, "vramshim_stats");
  *(void **)&s.hook_count = dlsym(RTLD_DEFAULT, "vramshim_hook_count");
  *(void **)&s.driver_path = dlsym(RTLD_DEFAULT, "vramshim_driver_path");
  T_CHECK(s.stats && s.hook_count && s.driver_path, "libvramshim.so is not preloaded");
  return s;
}

/* The test runs over the real driver (VRAMSHIM_TEST_REAL_DRIVER set, not "0"). */
static inline int t_real_driver(void) {
  const char *real = getenv("VRAMSHIM_TEST_REAL_DRIVER");
  return real && *real && strcmp(real, "0") != 0;
}

/* The sim's counters from `handle` (RTLD_DEFAULT or a dlopen handle); all
 * NULL on a real driver, or when VRAMSHIM_TEST_REAL_DRIVER is set. */
static inline sim_api t_sim(void *handle) {
  sim_api s;
  memset(&s, 0, sizeof s);
  if (t_real_driver()) return s;
  *(void **)&s.calls = dlsym(handle, "vramsim_calls");
  *(void **)&s.reset_calls = dlsym(handle, "vramsim_reset_calls");
  *(void **)&s.live_bytes = dlsym(handle, "vramsim_live_bytes");
  *(void **)&s.live_count = dlsym(handle, "vramsim_live_count");
  *(void **)&s.card_used = dlsym(handle, "vramsim_card_used");
  if (!s.calls || !s.live_bytes || !s.live_count) memset(&s, 0, sizeof s);
  return s;
}

/* Pinned device memory on card dev: the VMM allocation property the tests
 * make their handles with. */
static inline CUmemAllocationProp t_device_prop(int dev) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

static inline vramshim_card_stats t_stats(const shim_api *s, int card) {
  vramshim_card_stats st;
  T_CHECK(s->stats(card, &st) == 0, "vramshim_stats(%d)", card);
  return st;
}

/* The shim's live bytes/count on `card` must equal the sim's (when there is one). */
static inline void t_match_live(const shim_api *shim, const sim_api *sim, int card, const char *when) {
  vramshim_card_stats st = t_stats(shim, card);
  if (!sim->live_bytes) {
    T_SAY("%s: shim says %llu bytes in %llu allocations on card %d (no sim to compare)", when,
          (unsigned long long)st.live_bytes, (unsigned long long)st.live_count, card);
    return;
  }
  char what[160];
  snprintf(what, sizeof what, "%s: live bytes shim vs sim", when);
  T_EQ_U64(st.live_bytes, sim->live_bytes(card), what);
  snprintf(what, sizeof what, "%s: live count shim vs sim", when);
  T_EQ_U64(st.live_count, sim->live_count(card), what);
}

/* Primary context of device 0, current on this thread. */
static inline CUcontext t_context(CUresult (*init)(unsigned), CUresult (*retain)(CUcontext *, CUdevice),
                                  CUresult (*set)(CUcontext)) {
  CUcontext ctx = NULL;
  T_CHECK(init(0) == CUDA_SUCCESS, "cuInit");
  T_CHECK(retain(&ctx, 0) == CUDA_SUCCESS, "cuDevicePrimaryCtxRetain");
  T_CHECK(set(ctx) == CUDA_SUCCESS, "cuCtxSetCurrent");
  return ctx;
}

/* An IPC handle as text, to pass to another process: two hex digits a byte
 * (hex holds 2 * sizeof h->reserved + 1 chars). */
static inline void t_ipc_to_hex(const CUipcMemHandle *h, char *hex) {
  for (size_t i = 0; i < sizeof h->reserved; i++) sprintf(hex + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

static inline void t_ipc_from_hex(const char *hex, CUipcMemHandle *h) {
  T_CHECK(strlen(hex) == 2 * sizeof h->reserved, "handle text");
  for (size_t i = 0; i < sizeof h->reserved; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    h->reserved[i] = (char)v;
  }
}

#endif

/* An LLM-server-like workload, written the way a plain CUDA program would
 * be: it only calls the Driver API, knows nothing of vramshim, and runs
 * unchanged with or without the shim preloaded.
 *
 *   - weights are loaded once (a 7B-class model in fp16: ~13 GiB in
 *     per-layer tensors);
 *   - requests arrive with random prompt and output lengths; each holds a
 *     KV-cache tensor per layer group that GROWS as tokens are generated
 *     (reallocated bigger, the old one freed: the pattern that fragments a
 *     card over time);
 *   - every decoding step allocates and frees temporaries (activations,
 *     logits) whose size follows the batch.
 *
 * It prints a progress line every --report steps. With --hold-at STEP it
 * stops after that step (and --hold-at -1: after the last step, before
 * freeing anything), prints "HOLD <step>" and waits for a line on stdin,
 * like a server idle between bursts: the demo's runner takes a dump of
 * the live process from outside at that moment. When the shim is loaded
 * it also reads the shim's per-card accounting through vramshim_stats()
 * (found with dlsym, so the program still runs without the shim). */
#include <cuda.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vramshim.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)
#define MAX_REQ 64
#define LAYER_GROUPS 4

typedef struct request {
  int active;
  int tokens, target;
  CUdeviceptr kv[LAYER_GROUPS];
  size_t kv_size[LAYER_GROUPS];
} request;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return;
  const char *name = "?";
  cuGetErrorName(r, &name);
  fprintf(stderr, "demo: %s failed: %s\n", what, name);
  exit(1);
}

static char *human(uint64_t b, char *buf) {
  if (b >= GIB) snprintf(buf, 32, "%.2f GiB", (double)b / (double)GIB);
  else snprintf(buf, 32, "%.1f MiB", (double)b / (double)MIB);
  return buf;
}

/* Waits for a line on stdin (or its end) after saying where it stands. */
static void hold(int step) {
  printf("HOLD %d\n", step);
  fflush(stdout);
  char line[64];
  if (!fgets(line, sizeof line, stdin)) return;
}

typedef int (*stats_fn)(int, vramshim_card_stats *);

static void report(stats_fn stats, int step, int live_requests, uint64_t app_live, const char *tag) {
  char a[32], b[32], c[32];
  if (!stats) {
    printf("[%s] step %5d  requests %2d  program holds %s\n", tag, step, live_requests, human(app_live, a));
    return;
  }
  vramshim_card_stats s;
  stats(0, &s);
  uint64_t drv = 0;
  for (int k = 0; k < VRAMSHIM_CALL_KINDS; k++) drv += s.driver_calls[k];
  printf("[%s] step %5d  requests %2d  live %s (peak %s)  reserved %s  driver calls %" PRIu64
         "  allocs %" PRIu64 "\n",
         tag, step, live_requests, human(s.live_bytes, a), human(s.peak_live_bytes, b),
         human(s.reserved_bytes, c), drv, s.alloc_requests);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int steps = 2000, report_every = 250;
  const char *tag = "demo";
  int holds[8], nholds = 0;
  int step_us = 0;   /* time a decoding step "computes" (kernels), in microseconds */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--report") && i + 1 < argc) report_every = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tag") && i + 1 < argc) tag = argv[++i];
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) rng_state = strtoull(argv[++i], NULL, 0) | 1;
    else if (!strcmp(argv[i], "--hold-at") && i + 1 < argc && nholds < 8) holds[nholds++] = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--step-us") && i + 1 < argc) step_us = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--steps N] [--report N] [--tag NAME] [--seed N] [--hold-at STEP]... [--step-us US]\n", argv[0]);
      return 2;
    }
  }
  if (steps < 1 || report_every < 1) {
    fprintf(stderr, "demo: --steps and --report must be positive\n");
    return 2;
  }
  stats_fn stats = (stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "vramshim_stats");

  check(cuInit(0), "cuInit");
  CUdevice dev;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  size_t free_b, total_b;
  check(cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo");
  char a[32], b[32];
  printf("[%s] card 0: %s free of %s\n", tag, human(free_b, a), human(total_b, b));

  /* Weights: embeddings, 32 layers of attention + MLP matrices, lm head. */
  enum { NW = 2 + 32 * 7 };
  CUdeviceptr weights[NW];
  int nw = 0;
  uint64_t app_live = 0;
  size_t hidden = 4096, inter = 11008, vocab = 32000;
  size_t wsz[7] = {hidden * hidden * 2, hidden * hidden * 2, hidden * hidden * 2, hidden * hidden * 2,
                   hidden * inter * 2,  hidden * inter * 2,  hidden * inter * 2};
  check(cuMemAlloc(&weights[nw++], vocab * hidden * 2), "cuMemAlloc(embeddings)");
  app_live += vocab * hidden * 2;
  for (int l = 0; l < 32; l++)
    for (int m = 0; m < 7; m++) {
      check(cuMemAlloc(&weights[nw++], wsz[m]), "cuMemAlloc(weights)");
      app_live += wsz[m];
    }
  check(cuMemAlloc(&weights[nw++], vocab * hidden * 2), "cuMemAlloc(lm_head)");
  app_live += vocab * hidden * 2;
  report(stats, 0, 0, app_live, tag);

  /* Serving loop. KV per token per layer group: 32 layers/4 groups * 2 (K,V) * hidden * 2 bytes. */
  const size_t kv_per_token = (32 / LAYER_GROUPS) * 2 * hidden * 2;
  request req[MAX_REQ];
  memset(req, 0, sizeof req);
  int live_requests = 0;
  for (int step = 1; step <= steps; step++) {
    /* Arrivals: keep 8..48 requests in flight, varying with "time of day". */
    int phase = step % 600;
    int want = 8 + (phase < 300 ? phase : 600 - phase) * 40 / 300;
    for (int i = 0; i < MAX_REQ && live_requests < want; i++) {
      if (req[i].active || rnd() % 4) continue;
      req[i].active = 1;
      req[i].tokens = 64 + (int)(rnd() % 1024);       /* prompt */
      req[i].target = req[i].tokens + 16 + (int)(rnd() % 512);
      live_requests++;
    }
    /* Decode one chunk of 16 tokens per request: the KV tensors grow. */
    int batch = 0;
    for (int i = 0; i < MAX_REQ; i++) {
      request *r = &req[i];
      if (!r->active) continue;
      batch++;
      r->tokens += 16;
      for (int g = 0; g < LAYER_GROUPS; g++) {
        size_t need = (size_t)r->tokens * kv_per_token / 16;
        if (need <= r->kv_size[g]) continue;
        size_t grown = need + need / 4;     /* grow by 25% headroom, like a growing cache */
        CUdeviceptr p;
        check(cuMemAlloc(&p, grown), "cuMemAlloc(kv)");
        if (r->kv[g]) {
          check(cuMemcpyDtoD(p, r->kv[g], 256), "cuMemcpyDtoD(kv)");
          check(cuMemFree(r->kv[g]), "cuMemFree(kv)");
          app_live -= r->kv_size[g];
        }
        r->kv[g] = p;
        r->kv_size[g] = grown;
        app_live += grown;
      }
      if (r->tokens >= r->target) { /* finished: release its cache */
        for (int g = 0; g < LAYER_GROUPS; g++) {
          check(cuMemFree(r->kv[g]), "cuMemFree(kv)");
          app_live -= r->kv_size[g];
        }
        memset(r, 0, sizeof *r);
        live_requests--;
      }
    }
    /* Temporaries of the step: activations and logits sized by the batch. */
    CUdeviceptr t[6];
    size_t tsz[6] = {(size_t)batch * hidden * 4 * 16, (size_t)batch * inter * 4 * 16, (size_t)batch * vocab * 4,
                     (size_t)batch * hidden * 2 * 16, 4096 + (rnd() % 64) * 512, (size_t)batch * 512};
    for (int k = 0; k < 6; k++) check(cuMemAlloc(&t[k], tsz[k] ? tsz[k] : 512), "cuMemAlloc(temp)");
    check(cuMemsetD8(t[0], 0, 64), "cuMemsetD8");
    if (step_us > 0) usleep((useconds_t)step_us);   /* the step's kernels run */
    for (int k = 5; k >= 0; k--) check(cuMemFree(t[k]), "cuMemFree(temp)");
    if (step % report_every == 0 || step == steps) report(stats, step, live_requests, app_live, tag);
    for (int h = 0; h < nholds; h++)
      if (holds[h] == step || (holds[h] == -1 && step == steps)) hold(step);
  }

  for (int i = 0; i < MAX_REQ; i++)
    for (int g = 0; g < LAYER_GROUPS; g++)
      if (req[i].kv[g]) check(cuMemFree(req[i].kv[g]), "cuMemFree(kv)");
  for (int i = 0; i < nw; i++) check(cuMemFree(weights[i]), "cuMemFree(weights)");
  report(stats, steps, 0, 0, tag);
  check(cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
  return 0;
}

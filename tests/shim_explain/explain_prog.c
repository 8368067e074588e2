/* A program under the shim for the explain tests (run_explain.py drives it).
 *
 *   explain_prog idle SIZE...   allocates SIZE bytes each on card 0, says
 *                               "ready PID LIVE COUNT", then blocks in read()
 *                               on stdin until it closes; frees; exits 0
 *   explain_prog refuse         allocates 8 MiB, asks for twice the card
 *                               (refused), says "refused PID", blocks like idle
 *   explain_prog fork PSIZE CSIZE  the parent allocates PSIZE and forks; the
 *                               child allocates CSIZE, says "child PID CSIZE",
 *                               blocks on stdin, frees, leaves with _exit;
 *                               the parent waits for it (exit status passed on)
 *   explain_prog trace SEED N   N allocations and frees of mixed sizes (one
 *                               refused request among them); says
 *                               "peak PEAK events EVENTS"; exits (the trace
 *                               is flushed at exit)
 *   explain_prog pools PMIB GMIB  memory the driver's pools keep: a pool of
 *                               its own (release threshold: keep all) that
 *                               served PMIB and got it back, and a graph
 *                               that allocated GMIB and freed it, launched
 *                               once, beside 1 MiB of cuMemAlloc it holds;
 *                               says "pooled PID POOL GRAPH" (the bytes
 *                               vramshim_driver_pools says for card 0,
 *                               found with dlsym: -1 -1 without the shim),
 *                               blocks like idle */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(call)                                                          \
  do {                                                                       \
    CUresult r_ = (call);                                                    \
    if (r_ != CUDA_SUCCESS) {                                                \
      fprintf(stderr, "explain_prog: %s failed: %d\n", #call, (int)r_);      \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

static void block_on_stdin(void) {
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
}

static void context(void) {
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
  CHECK(cuCtxSetCurrent(ctx));
}

static uint64_t rng(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  context();
  if (!strcmp(argv[1], "idle")) {
    int n = argc - 2;
    CUdeviceptr *p = calloc((size_t)n + 1, sizeof *p);
    uint64_t live = 0;
    for (int i = 0; i < n; i++) {
      uint64_t sz = strtoull(argv[i + 2], NULL, 0);
      CHECK(cuMemAlloc(&p[i], sz));
      live += sz;
    }
    printf("ready %d %llu %d\n", (int)getpid(), (unsigned long long)live, n);
    fflush(stdout);
    block_on_stdin();
    for (int i = 0; i < n; i++) CHECK(cuMemFree(p[i]));
    free(p);
    return 0;
  }
  if (!strcmp(argv[1], "pools") && argc == 4) {
    uint64_t pmib = strtoull(argv[2], NULL, 0), gmib = strtoull(argv[3], NULL, 0);
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    CHECK(cuMemPoolCreate(&pool, &props));
    cuuint64_t keep = UINT64_MAX;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    CUdeviceptr held, p;
    CHECK(cuMemAlloc(&held, 1 << 20));
    CHECK(cuMemAllocFromPoolAsync(&p, pmib << 20, pool, s));
    CHECK(cuMemFreeAsync(p, s));
    CHECK(cuStreamSynchronize(s));
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof a);
    a.poolProps = props;
    a.bytesize = gmib << 20;
    CUgraphNode alloc, fr;
    CHECK(cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &a));
    CHECK(cuGraphAddMemFreeNode(&fr, g, &alloc, 1, a.dptr));
    CUgraphExec e;
    CHECK(cuGraphInstantiateWithFlags(&e, g, 0));
    CHECK(cuGraphLaunch(e, s));
    CHECK(cuStreamSynchronize(s));
    /* The public API's figures, found as a program that also runs without
     * the shim would find them (vramshim.h). */
    int (*pools_of)(int, uint64_t *, uint64_t *) =
        (int (*)(int, uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "vramshim_driver_pools");
    long long api_pool = -1, api_graph = -1;
    uint64_t pb = 0, gb = 0;
    if (pools_of && pools_of(0, &pb, &gb) == 0) {
      api_pool = (long long)pb;
      api_graph = (long long)gb;
    }
    printf("pooled %d %lld %lld\n", (int)getpid(), api_pool, api_graph);
    fflush(stdout);
    block_on_stdin();
    CHECK(cuGraphExecDestroy(e));
    CHECK(cuGraphDestroy(g));
    CHECK(cuMemPoolDestroy(pool));
    CHECK(cuMemFree(held));
    return 0;
  }
  if (!strcmp(argv[1], "refuse")) {
    CUdeviceptr a, b;
    size_t total = 0;
    CHECK(cuDeviceTotalMem(&total, 0));
    CHECK(cuMemAlloc(&a, 8u << 20));
    CUresult r = cuMemAlloc(&b, 2 * total);
    if (r != CUDA_ERROR_OUT_OF_MEMORY) {
      fprintf(stderr, "explain_prog: twice the card was not refused: %d\n", (int)r);
      return 1;
    }
    printf("refused %d\n", (int)getpid());
    fflush(stdout);
    block_on_stdin();
    CHECK(cuMemFree(a));
    return 0;
  }
  if (!strcmp(argv[1], "fork") && argc == 4) {
    CUdeviceptr a, b;
    CHECK(cuMemAlloc(&a, strtoull(argv[2], NULL, 0)));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      context();   /* CUDA does not survive fork: the child starts its own */
      uint64_t sz = strtoull(argv[3], NULL, 0);
      CHECK(cuMemAlloc(&b, sz));
      printf("child %d %llu 1\n", (int)getpid(), (unsigned long long)sz);
      fflush(stdout);
      block_on_stdin();
      CHECK(cuMemFree(b));
      _exit(0);   /* the sim drops the parent's records in a child */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(cuMemFree(a));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  if (!strcmp(argv[1], "trace") && argc == 4) {
    uint64_t seed = strtoull(argv[2], NULL, 0);
    int n = atoi(argv[3]);
    enum { SLOTS = 64 };
    CUdeviceptr p[SLOTS] = {0};
    uint64_t sz[SLOTS] = {0}, live = 0, peak = 0, events = 0;
    size_t total = 0;
    CHECK(cuDeviceTotalMem(&total, 0));
    for (int i = 0; i < n; i++) {
      int k = (int)(rng(&seed) % SLOTS);
      if (p[k]) {
        CHECK(cuMemFree(p[k]));
        live -= sz[k];
        p[k] = 0;
      } else {
        /* 256 B .. 8 MiB, log-uniform, odd sizes too */
        uint64_t s = (256ull << (rng(&seed) % 16)) + rng(&seed) % 4096;
        CHECK(cuMemAlloc(&p[k], s));
        sz[k] = s;
        live += s;
        if (live > peak) peak = live;
      }
      events++;
      if (i == n / 2) {
        CUdeviceptr x;
        if (cuMemAlloc(&x, 2 * total) != CUDA_ERROR_OUT_OF_MEMORY) return 1;
        events++;
      }
    }
    for (int k = 0; k < SLOTS; k++)
      if (p[k]) {
        CHECK(cuMemFree(p[k]));
        events++;
      }
    printf("peak %llu events %llu\n", (unsigned long long)peak, (unsigned long long)events);
    return 0;
  }
  return 2;
}

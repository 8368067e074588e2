/* The books are the card, whatever the program does (issue 22's rule, at
 * random): one tenant limited to 64 MiB on a 4 GiB simulated card, a
 * program that takes and gives back card memory on every path at once, in
 * an order drawn from a seed: cuMemAlloc, pitch, managed, stream-ordered
 * (the default pool on three kinds of stream, and a pool of its own whose
 * release threshold it moves), its own VMM memory, CUDA arrays, graphs with
 * memory nodes (freed in the graph, or kept and freed by the program),
 * stream captures with allocations in them; children forked that exit at
 * once (by exit() or _exit()); on two cards (when the sim has two), a third of the blocks
 * on card 1; a fifth of what contexts own taken in a second context
 * (freed in it or from the primary one), which is destroyed now and then;
 * syncs, trims, and now and then a reset of the primary context, which
 * frees everything it owns at once. After every step:
 *
 *   - the card never holds more than the limit for the tenant's processes
 *     (the driver's rounding of blocks to 512 bytes apart: NVML's footprint,
 *     charged as overhead about once a second, docs/nvml.md);
 *   - once the program's streams are synchronised, what the shim counted
 *     for the process in the ledger equals what the card holds for it (the
 *     sim's per-process figure) less its contexts' own cost, to the byte but
 *     that rounding;
 *   - what the shim says the program holds (vramshim_stats: live bytes and
 *     blocks per card) is what it took and did not give back (a block
 *     spilled to host memory under on_limit = spill apart, and a graph's
 *     allocations, which vramshim.h leaves out of "live": the graph pool's
 *     memory is charged as the driver reserves it);
 *   - alone on the card, the tenant's view through NVML is cuMemGetInfo's;
 *   - a refused request leaves the books and the card as they were, and
 *     every refusal is CUDA_ERROR_OUT_OF_MEMORY;
 *
 * and at the end, everything freed and the context gone, the card holds
 * nothing for the process, its books are back at zero and (alone) its
 * cuMemGetInfo view is whole again. A failure names the seed and the
 * step, and the steps before it, so it can be replayed (STORM_VERBOSE=1 in
 * the environment says every block taken and given back, with its address;
 * STORM_DEBUG=1 checks the tenant's ledger total before every check and
 * reads the cards and ledgers again for 100 ms after a card over the limit).
 *
 *   card_storm case MODE SEEDS STEPS PROCS WORKDIR [TENANT_LINE]   the
 *        orchestrator: one worker per seed 1..SEEDS under the tenant, PROCS
 *        of them at once (the card's limit then holds for all of them
 *        together), arena = MODE, TENANT_LINE added to the tenant's section
 *        (on_limit = wait:..., spill:...).
 *   card_storm storm SEED STEPS PROCS LEDGER_DIR     a worker.
 *   card_storm teardown-case MODE WORKDIR   a context's end (below).
 *   card_storm ipc-case MODE SEEDS STEPS WORKDIR   blocks opened by another
 *        process (below).
 *   card_storm threads-case MODE SEEDS THREADS ROUNDS STEPS WORKDIR   threads of
 *        one process at once, checked between rounds (below).
 *   card_storm threads-contexts-case MODE SEEDS THREADS ROUNDS STEPS WORKDIR
 *        the same while the main thread begins and ends contexts on the
 *        card, each measured at once by NVML: the overhead charged is never
 *        another thread's allocation in flight (below). */
#include "tenant_proc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vramshim.h"
#include "vramsim.h"

#define LIMIT (64 * MiB)
#define SLOTS 48

enum kind { K_ALLOC, K_PITCH, K_MANAGED, K_ASYNC, K_POOL, K_VMM, K_ARRAY, K_GRAPH, K_COUNT };
static const char *const kind_name[K_COUNT] = {"alloc", "pitch", "managed", "async", "pool", "vmm", "array",
                                               "graph"};

typedef struct item {
  int kind;
  CUdeviceptr p;
  uint64_t size;
  CUstream s;                      /* stream-ordered: the stream it was taken on */
  CUmemGenericAllocationHandle h;  /* VMM */
  CUarray a;
  CUcontext ctx;                   /* a context of the program's own (NULL: the primary one) */
  int dev;                         /* the card it is on */
  int spilled;                     /* on_limit = spill served it from host memory */
} item;

static item g_live[SLOTS];
static int g_nlive;
/* Each thread of the threads case draws and logs its own storm. */
static _Thread_local uint64_t g_rng;
static unsigned g_seed;
static _Thread_local int g_step;
static CUstream g_stream;          /* a stream of the program's own */
static CUmemoryPool g_pool;        /* a pool of the program's own */
static CUcontext g_ctx2;           /* a second context on card 0, now and then */
static int g_ndev = 1;             /* with two cards, a third of the blocks on card 1 */
static CUcontext g_prim1;          /* card 1's primary context */
static uint64_t g_free0;           /* the view's free memory with nothing held */
static const char *g_ledger;       /* the ledger folder */
static _Thread_local int g_refused[K_COUNT], g_granted[K_COUNT];
static _Thread_local char g_log[8][96];   /* the last steps, said when a check fails */

static uint64_t next(void) {       /* splitmix64: the same storm for a seed everywhere */
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static uint64_t below(uint64_t n) { return next() % n; }

static void note(const char *fmt, const char *what, uint64_t n) {
  memmove(g_log[1], g_log[0], sizeof g_log - sizeof g_log[0]);
  snprintf(g_log[0], sizeof g_log[0], fmt, g_step, what, (unsigned long long)n);
}

static void say_state(void);
#define STORM_CHECK(cond, ...)                                                  \
  do {                                                                          \
    if (!(cond)) {                                                              \
      for (int i_ = 7; i_ >= 0; i_--)                                           \
        if (g_log[i_][0]) printf("vramshim-test: seed %u, %s\n", g_seed, g_log[i_]); \
      say_state();                                                              \
      CHECK(cond, __VA_ARGS__);                                                 \
    }                                                                           \
  } while (0)

/* What a card holds for this process (the sim's per-process figure, as
 * NVML reads it), and for every process of the tenant (the card's). */
static uint64_t card_mine(int card) {
  int32_t pids[64];
  uint64_t used[64];
  unsigned n = vramsim_card_processes(card, pids, used, 64);
  for (unsigned i = 0; i < n && i < 64; i++)
    if (pids[i] == (int32_t)getpid()) return used[i];
  return 0;
}
static uint64_t card_used(int card) { return vramsim_card_used(card); }

/* The ledger of a card: 0, or -1 when the card has none yet. */
static int ledger_of(int card, vs_ledger_snapshot *snap) {
  char ids[4][VS_NAME_MAX], err[VS_ERR_MAX];
  int n = vs_ledger_list(g_ledger, ids, 4, err, sizeof err);
  for (int i = 0; i < n; i++)
    if (vs_ledger_snapshot_read(g_ledger, ids[i], snap, err, sizeof err) == 0 && snap->card_index == card) return 0;
  return -1;
}

/* This process's ledger slot on a card, read now; NULL when it has none. */
static const vs_snap_proc *my_slot(int card) {
  static vs_ledger_snapshot snap;
  if (ledger_of(card, &snap) != 0) return NULL;
  for (int i = 0; i < snap.nprocs; i++)
    if (snap.procs[i].pid == (int)getpid()) return &snap.procs[i];
  return NULL;
}

/* What the shim counted for this process on a card: its ledger slot's held
 * bytes less its overhead (NVML's footprint beyond the count, measured about
 * once a second: docs/nvml.md). */
static uint64_t books(int card) {
  const vs_snap_proc *me = my_slot(card);
  return me ? me->held - me->overhead : 0;
}

/* What the driver rounds the live blocks on a card up to beyond their sizes
 * (the sim: 512 B): NVML's footprint, charged as overhead, not counted. */
static uint64_t rounding(int card) {
  uint64_t r = 0;
  for (int i = 0; i < g_nlive; i++)
    if (g_live[i].dev == card && !g_live[i].spilled && g_live[i].kind != K_VMM && g_live[i].kind != K_ARRAY &&
        g_live[i].kind != K_GRAPH)
      r += (512 - g_live[i].size % 512) % 512;
  return r;
}

/* Sizes as programs ask them: mostly small, some of a few MiB, a few large. */
static uint64_t draw_size(void) {
  switch (below(8)) {
  case 0: case 1: case 2: return 1 + below(64 << 10);
  case 3: case 4: case 5: return (64 << 10) + below(4 * MiB);
  default: return 4 * MiB + below(36 * MiB);
  }
}

static CUstream draw_stream(void) {
  switch (below(3)) {
  case 0: return NULL;                    /* the legacy stream */
  case 1: return CU_STREAM_PER_THREAD;
  default: return g_stream;
  }
}

static void set_threshold(CUmemoryPool pool, cuuint64_t v) {
  STORM_CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v) == CUDA_SUCCESS, "threshold");
}

/* The context and a stream of its own (a reset ends both), and once a pool
 * of the program's own (a pool is the device's: it outlives a reset). */
static void up(void) {
  tp_cuda_up();
  STORM_CHECK(cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "cuStreamCreate");
  if (g_pool) return;
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  STORM_CHECK(cuMemPoolCreate(&g_pool, &props) == CUDA_SUCCESS, "cuMemPoolCreate");
}

static void push(CUcontext c) { STORM_CHECK(cuCtxPushCurrent(c) == CUDA_SUCCESS, "push"); }
static void pop(void) {
  CUcontext popped;
  STORM_CHECK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS, "pop");
}

static void sync_all(void) {
  STORM_CHECK(cuStreamSynchronize(g_stream) == CUDA_SUCCESS, "sync of the program's stream");
  STORM_CHECK(cuCtxSynchronize() == CUDA_SUCCESS, "cuCtxSynchronize");
  if (g_prim1) {
    push(g_prim1);
    STORM_CHECK(cuCtxSynchronize() == CUDA_SUCCESS, "cuCtxSynchronize on card 1");
    pop();
  }
}

/* A graph of one allocation of `bytes` on dev, freed by a free node of the
 * graph (free_it) or kept, launched on s and gone (the graph and its
 * executable graph; a kept allocation outlives them). The launch's answer;
 * *dptr the allocation's address when it ran. */
static CUresult one_alloc_graph(int dev, uint64_t bytes, int free_it, CUstream s, CUdeviceptr *dptr) {
  CUgraph g;
  STORM_CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS, "cuGraphCreate");
  CUDA_MEM_ALLOC_NODE_PARAMS a;
  memset(&a, 0, sizeof a);
  a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.poolProps.location.id = dev;
  a.bytesize = bytes;
  CUgraphNode n, f;
  STORM_CHECK(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a) == CUDA_SUCCESS, "alloc node");
  if (free_it) STORM_CHECK(cuGraphAddMemFreeNode(&f, g, &n, 1, a.dptr) == CUDA_SUCCESS, "free node");
  CUgraphExec e;
  STORM_CHECK(cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS, "instantiate");
  CUresult r = cuGraphLaunch(e, s);
  STORM_CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY, "cuGraphLaunch = %d", (int)r);
  if (r == CUDA_SUCCESS) {
    STORM_CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS, "sync");
    *dptr = a.dptr;
  }
  STORM_CHECK(cuGraphExecDestroy(e) == CUDA_SUCCESS && cuGraphDestroy(g) == CUDA_SUCCESS, "graph destroy");
  return r;
}

/* One request of a kind; CUDA_SUCCESS fills it in. */
static CUresult take(item *it) {
  CUresult r;
  switch (it->kind) {
  case K_ALLOC: {
    r = cuMemAlloc(&it->p, it->size);
    unsigned type = 0;
    if (r == CUDA_SUCCESS && cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, it->p) == CUDA_SUCCESS)
      it->spilled = type == CU_MEMORYTYPE_HOST;
    return r;
  }
  case K_PITCH: {
    size_t pitch = 0, w = 256 + below(8192), h = 1 + it->size / w;
    r = cuMemAllocPitch(&it->p, &pitch, w, h, 4);
    if (r == CUDA_SUCCESS) it->size = (uint64_t)pitch * h;
    return r;
  }
  case K_MANAGED: return cuMemAllocManaged(&it->p, it->size, CU_MEM_ATTACH_GLOBAL);
  case K_ASYNC:   /* card 1: its legacy stream (the program's own stream is card 0's) */
    it->s = it->dev ? NULL : draw_stream();
    return cuMemAllocAsync(&it->p, it->size, it->s);
  case K_POOL: it->s = g_stream; return cuMemAllocFromPoolAsync(&it->p, it->size, g_pool, g_stream);
  case K_VMM: {
    size_t gran = 0;
    CUmemAllocationProp p = t_device_prop(it->dev);
    r = cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r == CUDA_ERROR_NOT_SUPPORTED) return r;   /* a card without VMM */
    STORM_CHECK(r == CUDA_SUCCESS, "gran");
    it->size = (it->size + gran - 1) / gran * gran;
    r = cuMemCreate(&it->h, it->size, &p, 0);
    if (r != CUDA_SUCCESS) return r;
    STORM_CHECK(cuMemAddressReserve(&it->p, it->size, 0, 0, 0) == CUDA_SUCCESS, "reserve");
    STORM_CHECK(cuMemMap(it->p, it->size, 0, it->h, 0) == CUDA_SUCCESS, "map");
    if (below(2)) {   /* released at once: the mapping keeps it (NVIDIA's samples) */
      STORM_CHECK(cuMemRelease(it->h) == CUDA_SUCCESS, "release after map");
      it->h = 0;
    }
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = it->dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    STORM_CHECK(cuMemSetAccess(it->p, it->size, &acc, 1) == CUDA_SUCCESS, "access");
    return CUDA_SUCCESS;
  }
  case K_GRAPH:   /* a graph's allocation it does not free: the program frees it later */
    it->s = it->dev ? NULL : draw_stream();
    return one_alloc_graph(it->dev, it->size, 0, it->s, &it->p);
  case K_ARRAY: {
    /* float4 rows of 4096 texels (64 KiB, a multiple of the row pitch),
     * counted as the shim estimates it: 64 KiB pages below 2 MiB, 2 MiB
     * pages from there (docs/architecture.md, "CUDA arrays") */
    CUDA_ARRAY_DESCRIPTOR d = {4096, 1 + (size_t)(it->size >> 16), CU_AD_FORMAT_FLOAT, 4};
    uint64_t bytes = (uint64_t)d.Height << 16;
    it->size = bytes < 2 * MiB ? bytes : (bytes + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    return cuArrayCreate(&it->a, &d);
  }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

static void give_back(item *it) {
  switch (it->kind) {
  case K_ALLOC: case K_PITCH: case K_MANAGED:
    STORM_CHECK(cuMemFree(it->p) == CUDA_SUCCESS, "cuMemFree");
    break;
  case K_ASYNC: case K_POOL: case K_GRAPH:
    /* on the stream it came from, or on another after a sync of that one */
    if (below(4) == 0) {
      STORM_CHECK(cuStreamSynchronize(it->s) == CUDA_SUCCESS, "sync");
      STORM_CHECK(cuMemFreeAsync(it->p, draw_stream()) == CUDA_SUCCESS, "cuMemFreeAsync elsewhere");
    } else {
      STORM_CHECK(cuMemFreeAsync(it->p, it->s) == CUDA_SUCCESS, "cuMemFreeAsync");
    }
    break;
  case K_VMM:
    if (it->h && below(2)) {   /* NCCL's order: release, then unmap */
      STORM_CHECK(cuMemRelease(it->h) == CUDA_SUCCESS, "release");
      it->h = 0;
    }
    STORM_CHECK(cuMemUnmap(it->p, it->size) == CUDA_SUCCESS, "unmap");
    if (it->h) STORM_CHECK(cuMemRelease(it->h) == CUDA_SUCCESS, "release");
    STORM_CHECK(cuMemAddressFree(it->p, it->size) == CUDA_SUCCESS, "address free");
    break;
  case K_ARRAY:
    STORM_CHECK(cuArrayDestroy(it->a) == CUDA_SUCCESS, "cuArrayDestroy");
    break;
  }
}

/* A stream capture in relaxed mode, as PyTorch's torch.cuda.graph makes one:
 * cuMemAlloc inside it (the arena holds: no sync, no release), a
 * stream-ordered allocation and its free captured as the graph's memory
 * nodes; the graph comes out, runs, and goes. */
static void capture(void) {
  STORM_CHECK(cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS, "begin capture");
  for (int k = (int)below(3); k > 0 && g_nlive < SLOTS; k--) {
    item it;
    memset(&it, 0, sizeof it);
    it.kind = K_ALLOC;
    it.size = draw_size();
    if (take(&it) == CUDA_SUCCESS) g_live[g_nlive++] = it;
  }
  CUdeviceptr p;
  uint64_t n = 1 + below(16 * MiB);
  CUresult r = cuMemAllocAsync(&p, n, g_stream);
  if (r == CUDA_SUCCESS) STORM_CHECK(cuMemFreeAsync(p, g_stream) == CUDA_SUCCESS, "captured free");
  CUgraph g = NULL;
  CUresult e = cuStreamEndCapture(g_stream, &g);
  STORM_CHECK(e == CUDA_SUCCESS && g, "seed %u step %d: the capture came out: %d (its allocation: %d)", g_seed, g_step,
              (int)e, (int)r);
  CUgraphExec x;
  STORM_CHECK(cuGraphInstantiateWithFlags(&x, g, 0) == CUDA_SUCCESS, "instantiate the capture");
  r = cuGraphLaunch(x, g_stream);
  STORM_CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY, "launch of the capture: %d", (int)r);
  STORM_CHECK(cuStreamSynchronize(g_stream) == CUDA_SUCCESS, "sync");
  STORM_CHECK(cuGraphExecDestroy(x) == CUDA_SUCCESS && cuGraphDestroy(g) == CUDA_SUCCESS, "capture's graph destroy");
}

/* A child forked from the program, using no CUDA, that exits at once: by
 * exit() (its atexit work and the shim's run in it) or _exit(). The
 * parent's slot, books and blocks stay as they were. */
static void fork_child(void) {
  int how = (int)below(2);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* not under a sanitizer: the process has threads (the shim's background
   * one), ThreadSanitizer kills such a child and GCC 12's ASan allocator has
   * no fork handler (tests/faults: reclaim_forkstorm) */
  (void)how;
  return;
#endif
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  STORM_CHECK(pid >= 0, "fork");
  if (pid == 0) {
    if (how) exit(0);
    _exit(0);
  }
  int st = 0;
  STORM_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's exit: %d", st);
}

/* The ledgers and the cards, process by process, when a check fails. */
static void say_state(void) {
  static vs_ledger_snapshot snap;
  for (int card = 0; g_ledger && card < g_ndev; card++) {
    if (ledger_of(card, &snap) != 0) continue;
    int32_t pids[64];
    uint64_t used[64];
    unsigned n = vramsim_card_processes(card, pids, used, 64);
    printf("vramshim-test: pid %d; card %d holds %llu; tenant used %llu, overhead %llu (snapshot consistent %d)\n",
           (int)getpid(), card, (unsigned long long)card_used(card), (unsigned long long)snap.tenants[0].used,
           (unsigned long long)snap.tenants[0].overhead, snap.consistent);
    for (unsigned j = 0; j < n && j < 64; j++)
      printf("vramshim-test:   the sim: pid %d holds %llu\n", (int)pids[j], (unsigned long long)used[j]);
    for (int i = 0; i < snap.nprocs; i++) {
      uint64_t on_card = 0;
      for (unsigned j = 0; j < n && j < 64; j++)
        if (pids[j] == snap.procs[i].pid) on_card = used[j];
      printf("vramshim-test:   pid %d alive %d: held %llu, overhead %llu, live %llu; the card holds %llu\n",
             snap.procs[i].pid, snap.procs[i].alive, (unsigned long long)snap.procs[i].held,
             (unsigned long long)snap.procs[i].overhead, (unsigned long long)snap.procs[i].live,
             (unsigned long long)on_card);
    }
  }
}

/* The driver's rounding of other processes' blocks (at most SLOTS each). */
static uint64_t g_others_rounding;

/* The blocks a context's end freed leave the program's list: what it owned
 * (ctx NULL: the primary context's). VMM memory is the process's, no
 * context's: it stays. */
static void forget_ctx(CUcontext ctx) {
  int kept = 0;
  for (int i = 0; i < g_nlive; i++)
    if (g_live[i].ctx != ctx || g_live[i].kind == K_VMM) g_live[kept++] = g_live[i];
  g_nlive = kept;
}

/* What this process's contexts on a card take beyond any allocation (the
 * sim's VRAMSIM_CONTEXT_OVERHEAD each: NVML's footprint, charged as overhead
 * when a context begins, without the limit's rule). */
static int g_procs = 1;
static uint64_t contexts_cost(int card) {
  int n = card == 0 ? 1 + (g_ctx2 != NULL) : g_prim1 != NULL;
  return (uint64_t)n * vramsim_context_overhead();
}

static void check_card(int card, const char *after) {
  uint64_t c = card_used(card);
  /* every process's contexts (at most two each) may be charged past it */
  uint64_t slack = rounding(card) + g_others_rounding + (uint64_t)g_procs * 2 * vramsim_context_overhead();
  if (c > LIMIT + slack) {
    say_state();
    if (getenv("STORM_DEBUG"))
      for (int k = 0; k < 20; k++) {
        tp_sleep_ms(5);
        say_state();
      }
  }
  STORM_CHECK(c <= LIMIT + slack, "seed %u step %d, after %s: card %d holds %llu bytes for a 64 MiB tenant", g_seed,
              g_step, after, card, (unsigned long long)c);
  /* The shim's background thread may give the arena's cache back at any
   * moment (its decay, or another process of the tenant asking): a reading
   * counts when the books did not move across it. */
  uint64_t b = 0, round = rounding(card);
  for (int tries = 0;; tries++) {
    uint64_t b1 = books(card);
    c = card_mine(card) - contexts_cost(card);
    b = books(card);
    if (b1 == b && b <= c && c - b <= round) return;
    if (tries == 100) break;
    tp_sleep_ms(2);
  }
  STORM_CHECK(0, "seed %u step %d, after %s: the shim counted %llu on card %d, the card holds %llu (the driver's "
              "rounding of live blocks: %llu)", g_seed, g_step, after, (unsigned long long)b, card,
              (unsigned long long)c, (unsigned long long)round);
}

/* What the shim says the program holds on a card (vramshim_stats, the
 * public API: live bytes and blocks) is what the program took and did not
 * give back. */
static void check_live(int card, const char *after) {
  static int (*stats)(int, vramshim_card_stats *);
  if (!stats) *(void **)&stats = dlsym(RTLD_DEFAULT, "vramshim_stats");
  if (!stats) return;   /* not under the shim */
  uint64_t bytes = 0, count = 0;
  for (int i = 0; i < g_nlive; i++)
    if (g_live[i].dev == card && !g_live[i].spilled && g_live[i].kind != K_GRAPH) bytes += g_live[i].size, count++;
  vramshim_card_stats st;
  STORM_CHECK(stats(card, &st) == 0, "vramshim_stats");
  STORM_CHECK(st.live_bytes == bytes && st.live_count == count, "seed %u step %d, after %s: card %d: the shim says "
              "%llu bytes in %llu blocks live, the program holds %llu in %llu", g_seed, g_step, after, card,
              (unsigned long long)st.live_bytes, (unsigned long long)st.live_count, (unsigned long long)bytes,
              (unsigned long long)count);
}

/* Alone on the card, the tenant's view through NVML (what nvidia-smi,
 * nvitop and Ollama read) is the view cuMemGetInfo gives (docs/nvml.md). */
static int g_alone;
typedef struct { unsigned long long total, free, used; } nvml_memory;   /* nvml.h's nvmlMemory_t */
static void check_views(int card, const char *after) {
  static int (*get)(void *, nvml_memory *), (*handle_of)(unsigned, void **);
  static int tried;
  if (!tried) {
    tried = 1;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    int (*init)(void) = NULL;
    if (lib) *(void **)&init = dlsym(lib, "nvmlInit_v2");
    if (init && init() == 0) {
      *(void **)&get = dlsym(lib, "nvmlDeviceGetMemoryInfo");
      *(void **)&handle_of = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    }
  }
  void *h = NULL;
  if (!g_alone || !get || !handle_of || handle_of((unsigned)card, &h) != 0) return;
  nvml_memory m = {0, 0, 0};
  size_t f = 0, t = 0;
  for (int tries = 0; tries <= 100; tries++) {   /* the background thread may move the cache between */
    if (card) push(g_prim1);
    STORM_CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS, "cuMemGetInfo");
    if (card) pop();
    STORM_CHECK(get(h, &m) == 0, "nvmlDeviceGetMemoryInfo");
    if (m.free == f && m.total == t && m.used == t - f) return;
    tp_sleep_ms(2);
  }
  STORM_CHECK(0, "seed %u step %d, after %s: card %d: NVML says free %llu of %llu (used %llu), cuMemGetInfo free "
              "%zu of %zu", g_seed, g_step, after, card, m.free, m.total, m.used, f, t);
}

static void check_books(const char *after) {
  if (getenv("STORM_DEBUG")) {   /* the tenant's books over its limit: who, after what */
    static vs_ledger_snapshot snap;
    if (ledger_of(0, &snap) == 0 && snap.consistent && snap.tenants[0].used > LIMIT + g_others_rounding) {
      printf("vramshim-test: DEBUG pid %d seed %u step %d after %s: tenant used %llu\n", (int)getpid(), g_seed,
             g_step, after, (unsigned long long)snap.tenants[0].used);
      say_state();
    }
  }
  sync_all();
  for (int card = 0; card < g_ndev; card++) {
    check_card(card, after);
    check_live(card, after);
    check_views(card, after);
  }
}

/* Memory of another context (card 0's second one, card 1's): freed in it,
 * or from card 0's primary one (one address space: the driver takes either;
 * a stream-ordered block on its own card's streams). */
static void give_back_in_place(item *it) {
  int in = it->ctx && (below(2) || it->kind == K_ASYNC || it->kind == K_GRAPH);
  if (in) push(it->ctx);
  give_back(it);
  if (in) pop();
}

static void step(void) {
  uint64_t r = below(100);
  if (r < 40 && g_nlive < SLOTS) {                   /* take */
    item it;
    memset(&it, 0, sizeof it);
    it.kind = (int)below(K_COUNT);
    it.size = draw_size();
    /* with two cards a third on card 1 (the program's own pool is card 0's) */
    if (g_ndev == 2 && it.kind != K_POOL && below(3) == 0) {
      it.dev = 1;
      it.ctx = g_prim1;
    }
    /* a fifth of what card 0's contexts own is taken in a second context */
    int owned = it.kind == K_ALLOC || it.kind == K_PITCH || it.kind == K_MANAGED || it.kind == K_ARRAY;
    if (!it.dev && owned && below(5) == 0) {
      if (!g_ctx2) {
        STORM_CHECK(cuCtxCreate(&g_ctx2, NULL, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
        CUcontext popped;
        STORM_CHECK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS && popped == g_ctx2, "pop");
      }
      it.ctx = g_ctx2;
    }
    note(it.dev ? "%d: take %s %llu on card 1" : "%d: take %s %llu", kind_name[it.kind], it.size);
    uint64_t card0 = card_mine(it.dev), books0 = books(it.dev);
    if (it.ctx) push(it.ctx);
    CUresult res = take(&it);
    if (it.ctx) pop();
    if (res == CUDA_SUCCESS) {
      if (getenv("STORM_VERBOSE"))
        fprintf(stderr, "step %d: %s 0x%llx +%llu\n", g_step, kind_name[it.kind], (unsigned long long)it.p,
                (unsigned long long)it.size);
      g_live[g_nlive++] = it;
      g_granted[it.kind]++;
    } else {
      STORM_CHECK(res == CUDA_ERROR_OUT_OF_MEMORY || (res == CUDA_ERROR_NOT_SUPPORTED && it.kind == K_VMM),
                  "seed %u step %d: %s of %llu = %d", g_seed, g_step, kind_name[it.kind], (unsigned long long)it.size,
                  (int)res);
      g_refused[it.kind]++;
      /* a refusal may give the arena's cache back, never take anything */
      STORM_CHECK(card_mine(it.dev) <= card0 && books(it.dev) <= books0, "seed %u step %d: the refusal took memory",
                  g_seed, g_step);
    }
    check_books(kind_name[it.kind]);
  } else if (r < 80 && g_nlive > 0) {                /* give back */
    int i = (int)below((uint64_t)g_nlive);
    note("%d: free %s %llu", kind_name[g_live[i].kind], g_live[i].size);
    if (getenv("STORM_VERBOSE"))
      fprintf(stderr, "step %d: free %s 0x%llx\n", g_step, kind_name[g_live[i].kind], (unsigned long long)g_live[i].p);
    give_back_in_place(&g_live[i]);
    g_live[i] = g_live[--g_nlive];
    check_books("a free");
  } else if (r < 86) {                               /* pools: thresholds and trims */
    CUmemoryPool def;
    STORM_CHECK(cuDeviceGetDefaultMemPool(&def, 0) == CUDA_SUCCESS, "default pool");
    CUmemoryPool pool = below(2) ? def : g_pool;
    switch (below(3)) {
    case 0: note("%d: %s %llu", "threshold", 0); set_threshold(pool, 0); break;
    case 1: note("%d: %s %llu", "threshold", UINT64_MAX); set_threshold(pool, UINT64_MAX); break;
    default:
      note("%d: %s %llu", "trim", 0);
      STORM_CHECK(cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS, "trim");
    }
    check_books("a pool's setting");
  } else if (r < 90) {                               /* graph memory */
    uint64_t mib = 1 + below(24);
    note("%d: %s %llu MiB", "graph", mib);
    CUdeviceptr p;   /* freed by the graph itself; the device's graph pool keeps it until trimmed */
    (void)one_alloc_graph(0, mib * MiB, 1, draw_stream(), &p);
    if (below(2)) STORM_CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS, "graph trim");
    check_books("a graph");
  } else if (r < 92) {                               /* a stream capture */
    note("%d: %s %llu", "capture", 0);
    capture();
    check_books("a capture");
  } else if (r < 95) {                               /* the program's syncs */
    note("%d: %s %llu", "sync", 0);
    sync_all();
    check_books("a sync");
  } else if (r < 96) {                               /* a fork (Python's multiprocessing, a shell-out) */
    note("%d: %s %llu", "fork", 0);
    fork_child();
    check_books("a child's exit");
  } else if (r < 99) {                               /* the second context ends, with its memory */
    if (!g_ctx2) return;
    note("%d: %s %llu", "destroy the second context", 0);
    STORM_CHECK(cuCtxDestroy(g_ctx2) == CUDA_SUCCESS, "cuCtxDestroy");
    forget_ctx(g_ctx2);
    g_ctx2 = NULL;
    check_books("a context's destroy");
  } else {                                           /* a reset frees everything */
    note("%d: %s %llu", "reset", (uint64_t)g_nlive);
    if (getenv("STORM_VERBOSE")) fprintf(stderr, "step %d: reset\n", g_step);
    /* Stream-ordered blocks are no context's (cuda.h, cuCtxDestroy): a
     * program gives them back before it resets (the arena's, served in the
     * context, would end with it). */
    for (int i = 0; i < g_nlive;)
      if (g_live[i].kind == K_ASYNC || g_live[i].kind == K_POOL || g_live[i].kind == K_GRAPH) {
        give_back_in_place(&g_live[i]);
        g_live[i] = g_live[--g_nlive];
      } else {
        i++;
      }
    sync_all();
    STORM_CHECK(cuDevicePrimaryCtxReset(0) == CUDA_SUCCESS, "cuDevicePrimaryCtxReset");
    forget_ctx(NULL);
    up();
    /* what the pools keep is all the card still holds */
    CUmemoryPool def;
    STORM_CHECK(cuDeviceGetDefaultMemPool(&def, 0) == CUDA_SUCCESS, "default pool");
    STORM_CHECK(cuMemPoolTrimTo(g_pool, 0) == CUDA_SUCCESS && cuMemPoolTrimTo(def, 0) == CUDA_SUCCESS,
                "trims after the reset");
    /* what lives on (VMM memory, the second context's) passes the books check below */
    check_books("a reset");
  }
}

static int w_storm(unsigned seed, int steps, int procs, const char *ledger) {
  g_ledger = ledger;
  g_others_rounding = (uint64_t)(procs - 1) * SLOTS * 511;
  g_alone = procs == 1;
  g_procs = procs;
  g_seed = seed;
  g_rng = seed;
  up();
  int ndev = 0;
  CHECK(cuDeviceGetCount(&ndev) == CUDA_SUCCESS && ndev >= 1, "cards");
  if (ndev >= 2) {
    g_ndev = 2;
    CHECK(cuDevicePrimaryCtxRetain(&g_prim1, 1) == CUDA_SUCCESS, "card 1's primary context");
  }
  size_t f = 0, t = 0;
  CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS && t == LIMIT, "the tenant's view: %zu", t);
  g_free0 = f;
  for (g_step = 0; g_step < steps; g_step++) step();
  note("%d: %s %llu", "end", (uint64_t)g_nlive);
  while (g_nlive > 0) give_back_in_place(&g_live[--g_nlive]);
  if (g_ctx2) CHECK(cuCtxDestroy(g_ctx2) == CUDA_SUCCESS, "cuCtxDestroy");
  g_ctx2 = NULL;
  sync_all();
  CUmemoryPool def;
  CHECK(cuDeviceGetDefaultMemPool(&def, 0) == CUDA_SUCCESS, "default pool");
  CHECK(cuMemPoolTrimTo(def, 0) == CUDA_SUCCESS && cuMemPoolTrimTo(g_pool, 0) == CUDA_SUCCESS, "trims");
  CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS, "graph trim");
  check_books("the end");
  CHECK(cuMemPoolDestroy(g_pool) == CUDA_SUCCESS && cuStreamDestroy(g_stream) == CUDA_SUCCESS, "destroys");
  CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS, "the context ends");
  if (g_prim1) CHECK(cuDevicePrimaryCtxRelease(1) == CUDA_SUCCESS, "card 1's context ends");
  for (int card = 0; card < g_ndev; card++)
    CHECK(card_mine(card) == 0, "seed %u: card %d holds %llu bytes after the contexts' end", seed, card,
          (unsigned long long)card_mine(card));
  tp_cuda_up();
  if (procs == 1)   /* alone on the card: the view is whole again */
    CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS && f == g_free0, "seed %u: the view lacks %llu bytes at the end",
          seed, (unsigned long long)(g_free0 - f));
  for (int card = 0; card < g_ndev; card++)
    CHECK(books(card) == 0, "seed %u: the books of card %d hold %llu bytes at the end", seed, card,
          (unsigned long long)books(card));
  char line[256];
  int n = 0;
  for (int k = 0; k < K_COUNT; k++)
    n += snprintf(line + n, sizeof line - (size_t)n, " %s %d/%d", kind_name[k], g_granted[k],
                  g_granted[k] + g_refused[k]);
  SAY("seed %u: %d steps, granted of asked:%s", seed, steps, line);
  return 0;
}

/* ---- a context's end: its memory stays charged until the driver freed it ----
 * A destroy or a reset frees the context's memory inside the driver's call.
 * While it runs (a host function queued on one of the context's streams,
 * which the driver's teardown waits for, reads the ledger), the books must
 * still hold that memory: given back before, another process of the card
 * could be admitted for bytes the card still holds (the storm above saw the
 * card pass the limit so, with three processes). */
static _Atomic int g_gate;
static uint64_t g_seen;
static void CUDA_CB read_books_in_teardown(void *arg) {
  (void)arg;
  while (!atomic_load(&g_gate)) tp_sleep_ms(1);
  tp_sleep_ms(50);   /* the hook lets go of the context's records before the driver's call */
  g_seen = books(0);
}

static void teardown_one(const char *how) {
  CUcontext ctx = NULL;
  if (!strcmp(how, "destroy")) {
    CHECK(cuCtxCreate(&ctx, NULL, 0, 0) == CUDA_SUCCESS, "cuCtxCreate");
  } else {
    tp_cuda_up();
  }
  uint64_t before = books(0);
  CUdeviceptr p, q;
  CHECK(cuMemAlloc(&p, 24 * MiB) == CUDA_SUCCESS &&
            cuMemAllocManaged(&q, 8 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS,
        "24 MiB and 8 MiB managed");
  uint64_t held = books(0);
  CHECK(held >= before + 32 * MiB, "the books count them: %llu", (unsigned long long)held);
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
  atomic_store(&g_gate, 0);
  g_seen = 0;
  CHECK(cuLaunchHostFunc(s, read_books_in_teardown, NULL) == CUDA_SUCCESS, "host function");
  atomic_store(&g_gate, 1);
  CUresult r = ctx ? cuCtxDestroy(ctx) : cuDevicePrimaryCtxReset(0);
  CHECK(r == CUDA_SUCCESS, "%s = %d", how, (int)r);
  CHECK(g_seen >= held, "%s: while the driver freed the context's memory the books held %llu of %llu", how,
        (unsigned long long)g_seen, (unsigned long long)held);
  CHECK(books(0) <= before, "%s: given back after it: %llu", how, (unsigned long long)books(0));
  SAY("%s: the books held %llu MiB during the teardown, %llu after", how, (unsigned long long)(g_seen / MiB),
      (unsigned long long)(books(0) / MiB));
}

static int w_teardown(const char *ledger) {
  g_ledger = ledger;
  CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
  teardown_one("reset");
  teardown_one("destroy");
  return 0;
}

/* ---- IPC: blocks exported by one process, opened by another ----
 * The exporter (tenant t) takes blocks (cuMemAlloc, so the arena's in its
 * modes), fills them, exports them and has the importer (tenant u) open
 * them, read both ends, and close them later; it frees a block only once
 * closed. After every step each side checks its own books against what the
 * card holds for it: an opened block is the exporter's memory, charged to
 * t, never to u (tenant u's limit is 1 MiB: an open charged to it would be
 * refused). */
typedef struct ipc_msg {
  int op;                /* 1 open, 2 close, 3 end */
  int id;
  CUipcMemHandle h;
  uint64_t size;
  unsigned char pattern;
} ipc_msg;

static void full_io(int fd, void *buf, size_t n, int wr) {
  char *b = buf;
  while (n) {
    ssize_t k = wr ? write(fd, b, n) : read(fd, b, n);
    CHECK(k > 0, "ipc pipe %s: %zd", wr ? "write" : "read", k);
    b += k;
    n -= (size_t)k;
  }
}

static int w_importer(int in, int out, const char *ledger) {
  g_ledger = ledger;
  tp_cuda_up();
  CUdeviceptr open_at[SLOTS];
  memset(open_at, 0, sizeof open_at);
  for (;;) {
    ipc_msg m;
    full_io(in, &m, sizeof m, 0);
    int status = 0;
    if (m.op == 1) {
      CUresult r = cuIpcOpenMemHandle(&open_at[m.id], m.h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      unsigned char first = 0, last = 0;
      if (r == CUDA_SUCCESS) r = cuMemcpyDtoH(&first, open_at[m.id], 1);
      if (r == CUDA_SUCCESS) r = cuMemcpyDtoH(&last, open_at[m.id] + m.size - 1, 1);
      status = r == CUDA_SUCCESS && first == m.pattern && last == m.pattern ? 0 : (r ? (int)r : -1);
      if (status) SAY("open of block %d: %d (bytes %u %u, wanted %u)", m.id, (int)r, first, last, m.pattern);
    } else if (m.op == 2) {
      status = (int)cuIpcCloseMemHandle(open_at[m.id]);
      open_at[m.id] = 0;
    }
    /* nothing opened is ours: the books and the card hold none of it */
    uint64_t b = books(0), c = card_mine(0);
    if (b != 0 || c != 0) {
      SAY("importer, op %d block %d: the books hold %llu, the card %llu", m.op, m.id, (unsigned long long)b,
          (unsigned long long)c);
      status = status ? status : -2;
    }
    full_io(out, &status, sizeof status, 1);
    if (m.op == 3) return 0;
  }
}

static int w_exporter(unsigned seed, int steps, int to, int from, const char *ledger) {
  g_ledger = ledger;
  g_seed = seed;
  g_rng = seed;
  up();
  enum { FREE, OPEN, CLOSED } st[SLOTS];
  for (int i = 0; i < SLOTS; i++) st[i] = FREE;
  int exported = 0, refused = 0;
  for (g_step = 0; g_step < steps; g_step++) {
    int i = (int)below(SLOTS);
    ipc_msg m;
    memset(&m, 0, sizeof m);
    m.id = i;
    int status = 0;
    if (st[i] == FREE) {                       /* take, fill, export, open there */
      item *it = &g_live[i];
      memset(it, 0, sizeof *it);
      it->kind = K_ALLOC;
      it->size = draw_size();
      note("%d: export %s %llu", "block", it->size);
      if (cuMemAlloc(&it->p, it->size) != CUDA_SUCCESS) {
        refused++;
        continue;
      }
      m.pattern = (unsigned char)(1 + below(255));
      STORM_CHECK(cuMemsetD8(it->p, m.pattern, it->size) == CUDA_SUCCESS, "fill");
      STORM_CHECK(cuIpcGetMemHandle(&m.h, it->p) == CUDA_SUCCESS, "cuIpcGetMemHandle");
      m.op = 1;
      m.size = it->size;
      full_io(to, &m, sizeof m, 1);
      full_io(from, &status, sizeof status, 0);
      STORM_CHECK(status == 0, "seed %u step %d: the importer's open of %llu bytes: %d", seed, g_step,
                  (unsigned long long)it->size, status);
      st[i] = OPEN;
      exported++;
    } else if (st[i] == OPEN) {                /* closed there */
      note("%d: close %s %llu", "block", g_live[i].size);
      m.op = 2;
      full_io(to, &m, sizeof m, 1);
      full_io(from, &status, sizeof status, 0);
      STORM_CHECK(status == 0, "seed %u step %d: the importer's close: %d", seed, g_step, status);
      st[i] = CLOSED;
    } else {                                   /* freed here */
      note("%d: free %s %llu", "block", g_live[i].size);
      STORM_CHECK(cuMemFree(g_live[i].p) == CUDA_SUCCESS, "cuMemFree");
      st[i] = FREE;
    }
    /* what the program holds, for the books check's rounding */
    g_nlive = 0;
    for (int k = 0; k < SLOTS; k++)
      if (st[k] != FREE) g_live[g_nlive++] = g_live[k];
    check_card(0, "an IPC step");
    /* check_card's rounding reads g_live[0..g_nlive): put the slots back */
    for (int k = SLOTS - 1, j = g_nlive - 1; k >= 0; k--)
      if (st[k] != FREE) g_live[k] = g_live[j--];
  }
  ipc_msg end;
  memset(&end, 0, sizeof end);
  for (int i = 0; i < SLOTS; i++)
    if (st[i] == OPEN) {
      end.op = 2;
      end.id = i;
      int status;
      full_io(to, &end, sizeof end, 1);
      full_io(from, &status, sizeof status, 0);
      CHECK(status == 0, "close at the end: %d", status);
      st[i] = CLOSED;
    }
  for (int i = 0; i < SLOTS; i++)
    if (st[i] == CLOSED) CHECK(cuMemFree(g_live[i].p) == CUDA_SUCCESS, "cuMemFree at the end");
  end.op = 3;
  int status;
  full_io(to, &end, sizeof end, 1);
  full_io(from, &status, sizeof status, 0);
  CHECK(status == 0, "the importer's books at the end: %d", status);
  SAY("seed %u: %d steps, %d blocks exported and opened, %d refused", seed, steps, exported, refused);
  return 0;
}

/* ---- threads of one process at once ----
 * THREADS threads of the program take and give back blocks (cuMemAlloc,
 * pitch, managed, stream-ordered, VMM, arrays) on their own, each with its
 * own seed, STEPS steps a round; between rounds they stop and the main
 * thread checks the books, the card and the live counters against every
 * block the threads hold. */
#define T_MAX 4
#define T_SLOTS (SLOTS / T_MAX)
typedef struct tstorm {
  unsigned seed;
  int rounds, steps;
  CUcontext ctx;
  pthread_barrier_t *bar;
  item live[T_SLOTS];
  int n;
} tstorm;

/* threads-contexts: the main thread begins and ends contexts while the
 * threads run, and checks the overhead charged (check_overhead). Their
 * kinds are those charged before the driver is asked and given back after
 * it freed them; a driver pool's reserved memory (async) is settled from
 * the pool's own figure after the fact, so a measurement may see it either
 * way (docs/nvml.md, "A context's own measurement counts at once"). */
static int g_contexts;

static void *storm_thread(void *arg) {
  tstorm *t = arg;
  static const int all[] = {K_ALLOC, K_PITCH, K_MANAGED, K_ASYNC, K_VMM, K_ARRAY};
  static const int charged_first[] = {K_ALLOC, K_PITCH, K_MANAGED, K_VMM, K_ARRAY};
  const int *kinds = g_contexts ? charged_first : all;
  size_t nkinds = g_contexts ? sizeof charged_first / sizeof *charged_first : sizeof all / sizeof *all;
  g_rng = t->seed;
  CHECK(cuCtxSetCurrent(t->ctx) == CUDA_SUCCESS, "the context in a thread");
  for (int round = 0; round <= t->rounds; round++) {
    for (g_step = 0; g_step < t->steps; g_step++) {
      if (round == t->rounds) break;   /* the last round gives everything back */
      if (below(2) && t->n < T_SLOTS) {
        item it;
        memset(&it, 0, sizeof it);
        it.kind = kinds[below(nkinds)];
        it.size = draw_size();
        note("%d: take %s %llu", kind_name[it.kind], it.size);
        CUresult r = take(&it);
        STORM_CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY || (r == CUDA_ERROR_NOT_SUPPORTED &&
                    it.kind == K_VMM), "thread seed %u step %d: %s = %d", t->seed, g_step, kind_name[it.kind], (int)r);
        if (r == CUDA_SUCCESS) t->live[t->n++] = it;
      } else if (t->n > 0) {
        int i = (int)below((uint64_t)t->n);
        note("%d: free %s %llu", kind_name[t->live[i].kind], t->live[i].size);
        give_back(&t->live[i]);
        t->live[i] = t->live[--t->n];
      }
    }
    if (round == t->rounds)
      while (t->n > 0) give_back(&t->live[--t->n]);
    pthread_barrier_wait(t->bar);   /* stopped: the main thread checks */
    pthread_barrier_wait(t->bar);
  }
  return NULL;
}

/* The overhead charged for this process on a card (NVML's footprint beyond
 * the count) is never more than its contexts and the driver's rounding of
 * the most blocks the threads can hold: a reading taken while another
 * thread's allocation was in flight (charged after the shim's count was
 * read, on the card before NVML's figure was) must not charge it. */
static void check_overhead(int card, const char *after) {
  const vs_snap_proc *me = my_slot(card);
  if (!me) return;
  uint64_t o = me->overhead, most = contexts_cost(card) + SLOTS * 512;
  STORM_CHECK(o <= most, "seed %u round %d, after %s: %llu bytes charged to this process on card %d as overhead, "
              "its contexts and the driver's rounding are at most %llu", g_seed, g_step, after,
              (unsigned long long)o, card, (unsigned long long)most);
}

/* While the threads run: contexts begun and ended on card 0, each measured
 * at once while the threads' charges move. */
static void contexts_meanwhile(CUcontext ctx) {
  for (int k = 0; k < 3; k++) {
    CUcontext c;
    CHECK(cuCtxCreate(&c, NULL, 0, 0) == CUDA_SUCCESS, "cuCtxCreate beside the threads");
    CHECK(cuCtxDestroy(c) == CUDA_SUCCESS, "cuCtxDestroy beside the threads");
  }
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "the main thread's context again");
}

static int w_threads(unsigned seed, int nthreads, int rounds, int steps, const char *ledger) {
  g_ledger = ledger;
  g_seed = seed;
  up();
  CUcontext ctx;
  CHECK(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS, "context");
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)nthreads + 1);
  static tstorm ts[T_MAX];
  pthread_t th[T_MAX];
  for (int i = 0; i < nthreads; i++) {
    ts[i] = (tstorm){.seed = seed * 100 + (unsigned)i, .rounds = rounds, .steps = steps, .ctx = ctx, .bar = &bar};
    CHECK(pthread_create(&th[i], NULL, storm_thread, &ts[i]) == 0, "thread");
  }
  if (g_contexts) contexts_meanwhile(ctx);
  for (int round = 0; round <= rounds; round++) {
    pthread_barrier_wait(&bar);
    g_step = round;
    g_nlive = 0;   /* every thread's blocks, for the checks' sums */
    for (int i = 0; i < nthreads; i++)
      for (int k = 0; k < ts[i].n; k++) g_live[g_nlive++] = ts[i].live[k];
    const char *after = round == rounds ? "the threads gave everything back" : "a round of the threads";
    check_books(after);
    for (int card = 0; g_contexts && card < g_ndev; card++) check_overhead(card, after);
    pthread_barrier_wait(&bar);
    if (g_contexts && round < rounds) contexts_meanwhile(ctx);
  }
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&bar);
  SAY("seed %u: %d threads, %d rounds of %d steps", seed, nthreads, rounds, steps);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 6 && !strcmp(argv[1], "storm"))
    return w_storm((unsigned)atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5]);
  if (argc == 3 && !strcmp(argv[1], "teardown")) return w_teardown(argv[2]);
  if (argc == 7 && (!strcmp(argv[1], "threads") || !strcmp(argv[1], "threads-contexts"))) {
    g_contexts = !strcmp(argv[1], "threads-contexts");
    return w_threads((unsigned)atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), argv[6]);
  }
  /* MODE SEEDS THREADS ROUNDS STEPS WORKDIR */
  if (argc == 8 && (!strcmp(argv[1], "threads-case") || !strcmp(argv[1], "threads-contexts-case"))) {
    const char *worker = !strcmp(argv[1], "threads-case") ? "threads" : "threads-contexts";
    tp_workdir(argv[7]);
    char global[64];
    snprintf(global, sizeof global, "arena = %s", argv[2]);
    tp_config(global, "[tenant t]\nlimit = 64MiB\n");
    for (int seed = 1; seed <= atoi(argv[3]); seed++) {
      char sd[16];
      snprintf(sd, sizeof sd, "%d", seed);
      const char *args[] = {worker, sd, argv[4], argv[5], argv[6], tp_path("ledger"), NULL};
      int st = tp_wait(tp_spawn("threads", "t", NULL, args));
      char *out = tp_read("threads.out"), *err = tp_read("threads.err");
      printf("%s%s", out, err);
      free(out);
      free(err);
      CHECK(st == 0, "seed %d: the threads' storm failed (status %d)", seed, st);
    }
    SAY("PASS %s %s", worker, argv[2]);
    return 0;
  }
  if (argc == 5 && !strcmp(argv[1], "importer")) return w_importer(atoi(argv[2]), atoi(argv[3]), argv[4]);
  if (argc == 7 && !strcmp(argv[1], "exporter"))
    return w_exporter((unsigned)atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), argv[6]);
  if (argc == 6 && !strcmp(argv[1], "ipc-case")) {
    tp_workdir(argv[5]);
    char global[64];
    snprintf(global, sizeof global, "arena = %s", argv[2]);
    tp_config(global, "[tenant t]\nlimit = 64MiB\n[tenant u]\nlimit = 1MiB\n");
    for (int seed = 1; seed <= atoi(argv[3]); seed++) {
      int down[2], up_[2];
      CHECK(pipe(down) == 0 && pipe(up_) == 0, "pipes");
      char a[16], b[16], c[16], d[16], sd[16];
      snprintf(a, sizeof a, "%d", down[0]);
      snprintf(b, sizeof b, "%d", up_[1]);
      snprintf(c, sizeof c, "%d", down[1]);
      snprintf(d, sizeof d, "%d", up_[0]);
      snprintf(sd, sizeof sd, "%d", seed);
      const char *imp[] = {"importer", a, b, tp_path("ledger"), NULL};
      const char *exp[] = {"exporter", sd, argv[4], c, d, tp_path("ledger"), NULL};
      pid_t pi = tp_spawn("importer", "u", NULL, imp);
      pid_t pe = tp_spawn("exporter", "t", NULL, exp);
      close(down[0]);
      close(down[1]);
      close(up_[0]);
      close(up_[1]);
      int se = tp_wait(pe), si = tp_wait(pi);
      char *oe = tp_read("exporter.out"), *ee = tp_read("exporter.err");
      char *oi = tp_read("importer.out"), *ei = tp_read("importer.err");
      printf("%s%s%s%s", oe, ee, oi, ei);
      free(oe);
      free(ee);
      free(oi);
      free(ei);
      CHECK(se == 0 && si == 0, "seed %d: exporter %d, importer %d", seed, se, si);
    }
    SAY("PASS ipc %s", argv[2]);
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "teardown-case")) {
    tp_workdir(argv[3]);
    char global[64];
    snprintf(global, sizeof global, "arena = %s", argv[2]);
    tp_config(global, "[tenant t]\nlimit = 64MiB\n");
    const char *args[] = {"teardown", tp_path("ledger"), NULL};
    int st = tp_wait(tp_spawn("teardown", "t", NULL, args));
    char *out = tp_read("teardown.out"), *err = tp_read("teardown.err");
    printf("%s%s", out, err);
    free(out);
    free(err);
    CHECK(st == 0, "the teardown worker failed (status %d)", st);
    SAY("PASS teardown %s", argv[2]);
    return 0;
  }
  CHECK((argc == 7 || argc == 8) && !strcmp(argv[1], "case"),
        "usage: card_storm case MODE SEEDS STEPS PROCS WORKDIR [TENANT_LINE]");
  tp_workdir(argv[6]);
  char global[256], tenant[160];
  /* STORM_GLOBAL: more [global] lines, '|' between them (the arena's release settings) */
  snprintf(global, sizeof global, "arena = %s\n%s", argv[2], getenv("STORM_GLOBAL") ? getenv("STORM_GLOBAL") : "");
  for (char *c = global; *c; c++)
    if (*c == '|') *c = '\n';
  snprintf(tenant, sizeof tenant, "[tenant t]\nlimit = 64MiB\n%s\n", argc == 8 ? argv[7] : "");
  tp_config(global, tenant);
  int seeds = atoi(argv[3]), procs = atoi(argv[5]);
  CHECK(procs >= 1 && procs <= 8, "1 to 8 processes at once");
  for (int first = 1; first <= seeds; first += procs) {
    pid_t pid[8];
    int n = 0;
    for (int s = first; s < first + procs && s <= seeds; s++, n++) {
      char tag[32], seed[16];
      snprintf(tag, sizeof tag, "storm%d", s);
      snprintf(seed, sizeof seed, "%d", s);
      const char *args[] = {"storm", seed, argv[4], argv[5], tp_path("ledger"), NULL};
      pid[n] = tp_spawn(tag, "t", NULL, args);
    }
    for (int i = 0; i < n; i++) {
      int st = tp_wait(pid[i]);
      char name[64];
      snprintf(name, sizeof name, "storm%d.out", first + i);
      char *out = tp_read(name);
      snprintf(name, sizeof name, "storm%d.err", first + i);
      char *err = tp_read(name);
      printf("%s%s", out, err);
      /* a free the shim missed, found when the driver hands the address out again */
      int missed = strstr(err, "never saw freed") != NULL;
      free(out);
      free(err);
      CHECK(st == 0, "seed %d: the storm failed (status %d)", first + i, st);
      CHECK(!missed, "seed %d: the driver reused an address the shim thought live", first + i);
    }
  }
  SAY("PASS storm %s, %d seeds, %d at once", argv[2], seeds, procs);
  return 0;
}

/* The quota is what the card holds (issue 22): real processes under the
 * shim over the simulated driver, one tenant limited to 64 MiB on a 4 GiB
 * card, in every arena mode (and on a card without VMM, VRAMSIM_VMM=0 set
 * by the test).
 *
 *   card_truth case pool KIND MODE WORKDIR   a driver pool (KIND created,
 *        exportable or default) that keeps freed memory (release threshold
 *        at its maximum) while the program allocates to the limit: the
 *        sim's own charge of the card never passes the limit; trim, a
 *        lowered threshold at a sync and a destroy give it back; the
 *        program's cuMemPoolGetAttribute answers the driver's numbers.
 *   card_truth case graph MODE WORKDIR   graphs' memory nodes: the device's
 *        graph pool keeps what a launch reserved; a graph allocating past
 *        the limit is refused at launch (CUDA_ERROR_OUT_OF_MEMORY), the
 *        sim's charge never passes the limit; trim and the context's end
 *        give it back.
 *   card_truth case graphup MODE WORKDIR   graph memory backed ahead of a
 *        launch: cuGraphUpload (and its per-thread variant) and
 *        instantiation with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, of graphs
 *        built with cuGraphAddNode (both signatures), and a child graph
 *        moved into its parent: charged when uploaded or launched,
 *        refused past the limit with the driver not asked, given back by
 *        trim and the context's end.
 *   card_truth case array MODE WORKDIR   CUDA arrays (2D, 3D, layered,
 *        mipmapped; through cuGetProcAddress too): charged to the tenant by
 *        their estimated size, which on the sim is what the card holds; one
 *        past the limit refused with the driver not asked (block-compressed
 *        ones too, which the sim does not model); destroy and the context's
 *        end give them back; sparse arrays pass unaccounted.
 *   card_truth case graphcap MODE WORKDIR   a graph made by stream capture
 *        with a stream-ordered allocation in it: the captured allocation is
 *        a node, never refused at capture time; its memory node, which no
 *        hook saw added, is read from the graph when the capture ends, so its
 *        launch past the limit is refused with the driver not asked.
 *   card_truth case pitch MODE WORKDIR   cuMemAllocPitch of narrow rows: charged
 *        as the driver pads them (to 512 bytes), so one that would take the
 *        card past the limit padded is refused with the driver not asked.
 *   card_truth case vmmlife MODE WORKDIR   the program's own VMM memory
 *        lives while referenced or mapped: released at once after its
 *        cuMemMap (NVIDIA's samples do so) it stays charged until unmapped,
 *        and a create past the limit meanwhile is refused; NCCL's free
 *        (retain, release, unmap, release) keeps it charged to the last
 *        release.
 *   card_truth case hostpool MODE WORKDIR   host-located pools (HOST,
 *        HOST_NUMA) allocating above the limit: granted, on no card.
 *   card_truth case host MODE WORKDIR   cuMemCreate at host locations above
 *        the limit: the driver's own answer, the tenant's view unchanged.
 *   card_truth case names MODE WORKDIR   tenant names: a name with a newline
 *        and names longer than 63 bytes are refused at start (exit 78; run
 *        without enforcement under VRAMSHIM_ON_ERROR=passthrough), the log
 *        line escaped; two 63-byte names differing in the last byte are two
 *        tenants; a tenant without a section shows [tenant default]'s limit.
 *
 *   card_truth case visible MODE WORKDIR   one physical card seen under
 *        different CUDA_VISIBLE_DEVICES (unset: device 1; "1": device 0;
 *        its UUID: device 0): one tenant usage, one limit ([tenant t]
 *        cards = 1, limit 256 MiB), one ledger, whose header keeps the
 *        physical index. Cards: 4GiB,4GiB.
 *
 * Workers (started by the orchestrator under the tenant): pool KIND, host,
 * hold MIB [DEV] (allocate on device DEV, then wait for SIGTERM), try DEV MIB
 * ok|oom. */
#include "tenant_proc.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/prctl.h>
#include <string.h>
#include <unistd.h>

#include "vramsim.h"

#define LIMIT (64 * MiB)

static uint64_t card_used(void) { return vramsim_card_used(0); }

/* The card never holds more than the limit for the tenant (the only one). */
#define WITHIN_LIMIT(what) \
  CHECK(card_used() <= LIMIT, "%s: the card holds %llu MiB for a 64 MiB tenant", what, \
        (unsigned long long)(card_used() / MiB))

static uint64_t reserved_of(CUmemoryPool pool) {
  cuuint64_t v = 0;
  CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) == CUDA_SUCCESS, "reserved");
  return v;
}

static CUresult pool_alloc(const char *kind, CUdeviceptr *p, uint64_t n, CUmemoryPool pool, CUstream s) {
  if (!strcmp(kind, "default")) return cuMemAllocAsync(p, n, s);
  return cuMemAllocFromPoolAsync(p, n, pool, s);
}

static int w_pool(const char *kind) {
  tp_cuda_up();
  CUmemoryPool pool;
  /* the default pool: on the per-thread stream, which the driver's pool
   * serves in every arena mode (docs/arena.md, "The lane") */
  CUstream s = !strcmp(kind, "default") ? CU_STREAM_PER_THREAD : 0;
  if (!strcmp(kind, "default")) {
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0) == CUDA_SUCCESS, "default pool");
  } else {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    if (!strcmp(kind, "exportable")) props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS, "cuMemPoolCreate");
  }
  cuuint64_t keep = UINT64_MAX;
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS, "threshold");

  /* 1. The pool keeps 32 MiB it no longer uses: they are the tenant's. */
  CUdeviceptr a, big;
  CHECK(pool_alloc(kind, &a, 32 * MiB, pool, s) == CUDA_SUCCESS, "32 MiB from the pool");
  CHECK(cuMemFreeAsync(a, s) == CUDA_SUCCESS, "free async");
  CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS, "sync");
  CHECK(reserved_of(pool) == 32 * MiB, "the driver's reserved bytes: %llu", (unsigned long long)reserved_of(pool));
  CHECK(card_used() == 32 * MiB, "the pool keeps 32 MiB on the card");
  CUresult r = cuMemAlloc(&big, 48 * MiB);
  WITHIN_LIMIT("cuMemAlloc(48 MiB) next to a pool keeping 32 MiB");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc(48 MiB) = %d, the pool keeps 32 MiB of 64", (int)r);

  /* 2. The pool grows to the limit, never past it (its unused memory goes
   * back first when the growth is refused). */
  CUdeviceptr blk[64];
  int n = 0;
  for (; n < 64; n++) {
    r = pool_alloc(kind, &blk[n], 8 * MiB, pool, s);
    WITHIN_LIMIT("the pool growing");
    if (r != CUDA_SUCCESS) break;
  }
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "the growth past the limit is refused: %d", (int)r);
  CHECK(n * 8 * MiB <= LIMIT && n >= 6, "%d blocks of 8 MiB", n);
  SAY("%s pool: %d blocks of 8 MiB, the card holds %llu MiB", kind, n, (unsigned long long)(card_used() / MiB));
  for (int i = 0; i < n; i++) CHECK(cuMemFreeAsync(blk[i], s) == CUDA_SUCCESS, "free");
  CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS, "sync");
  CHECK(card_used() == (uint64_t)n * 8 * MiB, "the pool keeps its blocks");
  CHECK(cuMemAlloc(&big, 48 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "the pool's memory is still the tenant's");

  /* 3. A trim gives it back to the card and to the tenant. */
  CHECK(cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS, "trim");
  CHECK(card_used() == 0, "trimmed");
  CHECK(cuMemAlloc(&big, 48 * MiB) == CUDA_SUCCESS, "48 MiB once the pool gave its memory back");
  CHECK(cuMemFree(big) == CUDA_SUCCESS, "free");

  /* 4. A lowered release threshold gives it back at the next sync. */
  CHECK(pool_alloc(kind, &a, 16 * MiB, pool, s) == CUDA_SUCCESS, "16 MiB");
  CHECK(cuMemFreeAsync(a, s) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS, "free");
  CHECK(reserved_of(pool) == 16 * MiB, "the pool keeps 16 MiB");
  cuuint64_t none = 0;
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &none) == CUDA_SUCCESS, "threshold 0");
  CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS, "sync");
  CHECK(reserved_of(pool) == 0, "given back at the sync");
  r = cuMemAlloc(&big, 56 * MiB);
  WITHIN_LIMIT("cuMemAlloc(56 MiB)");
  CHECK(r == CUDA_SUCCESS, "56 MiB once the threshold gave the pool's memory back: %d", (int)r);
  CHECK(cuMemFree(big) == CUDA_SUCCESS, "free");

  /* 5. The view's whole free from the pool is granted, as the driver
   * grants its own: the books' free comes in whole 2 MiB pieces, which a
   * pool grows by (a 1000-byte pitch allocation leaves the books at no
   * multiple of them; before, that growth was refused). */
  CUdeviceptr pt;
  size_t pitch = 0, fr = 0, to = 0;
  CHECK(cuMemAllocPitch(&pt, &pitch, 1000, 1, 4) == CUDA_SUCCESS, "pitch");
  CHECK(cuMemGetInfo(&fr, &to) == CUDA_SUCCESS, "cuMemGetInfo");
  CHECK(fr > 0 && fr % (2 * MiB) == 0, "free %zu in whole 2 MiB pieces", fr);
  r = pool_alloc(kind, &a, fr, pool, s);
  WITHIN_LIMIT("the view's free from the pool");
  CHECK(r == CUDA_SUCCESS, "the view's free (%zu bytes) from the pool: %d", fr, (int)r);
  CHECK(cuMemFreeAsync(a, s) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS, "free");
  CHECK(cuMemFree(pt) == CUDA_SUCCESS, "pitch free");

  /* 6. A destroyed pool gives back what it kept. */
  if (strcmp(kind, "default") != 0) {
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS, "threshold");
    CHECK(pool_alloc(kind, &a, 16 * MiB, pool, s) == CUDA_SUCCESS, "16 MiB");
    CHECK(cuMemFreeAsync(a, s) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS, "free");
    CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS, "destroy");
    r = cuMemAlloc(&big, 56 * MiB);
    WITHIN_LIMIT("cuMemAlloc(56 MiB) after the destroy");
    CHECK(r == CUDA_SUCCESS, "56 MiB once the pool was destroyed: %d", (int)r);
    CHECK(cuMemFree(big) == CUDA_SUCCESS, "free");
  }
  SAY("pool %s ok", kind);
  return 0;
}

static CUmemAllocationProp host_prop(CUmemLocationType t, int id) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = t;
  p.location.id = id;
  return p;
}

static int w_host(void) {
  tp_cuda_up();
  size_t free0, total0, free1, total1;
  CHECK(cuMemGetInfo(&free0, &total0) == CUDA_SUCCESS, "view");
  CHECK(total0 == LIMIT, "the tenant's view: %llu", (unsigned long long)total0);
  int vmm = 0;
  CHECK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0) == CUDA_SUCCESS, "attr");
  CUmemGenericAllocationHandle h = 0, n = 0;
  CUmemAllocationProp p = host_prop(CU_MEM_LOCATION_TYPE_HOST, 0);
  CUresult r = cuMemCreate(&h, 256 * MiB, &p, 0);   /* four times the limit */
  CHECK(r == (vmm ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED), "cuMemCreate(HOST, 256 MiB) = %d", (int)r);
  p = host_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0);
  r = cuMemCreate(&n, 128 * MiB, &p, 0);
  CHECK(r == (vmm ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED), "cuMemCreate(HOST_NUMA 0, 128 MiB) = %d", (int)r);
  CUmemGenericAllocationHandle bad;
  p = host_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA, 5);
  r = cuMemCreate(&bad, 2 * MiB, &p, 0);
  CHECK(r == (vmm ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED), "HOST_NUMA 5: %d", (int)r);
  p = host_prop(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0);
  r = cuMemCreate(&bad, 2 * MiB, &p, 0);
  CHECK(r == (vmm ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED), "HOST_NUMA_CURRENT: %d", (int)r);
  CHECK(card_used() == 0, "host memory is on no card");
  CHECK(cuMemGetInfo(&free1, &total1) == CUDA_SUCCESS, "view");
  CHECK(free1 == free0 && total1 == total0, "the tenant's view is unchanged: free %llu -> %llu",
        (unsigned long long)free0, (unsigned long long)free1);
  CUdeviceptr d;
  CHECK(cuMemAlloc(&d, 48 * MiB) == CUDA_SUCCESS, "the tenant's device memory is untouched");
  WITHIN_LIMIT("after host memory");
  CHECK(cuMemFree(d) == CUDA_SUCCESS, "free");
  if (vmm) CHECK(cuMemRelease(h) == CUDA_SUCCESS && cuMemRelease(n) == CUDA_SUCCESS, "release");
  SAY("host ok");
  return 0;
}

/* ---- graphs' memory nodes ---- */

static uint64_t graph_attr(CUgraphMem_attribute a) {
  cuuint64_t v = 0;
  CHECK(cuDeviceGetGraphMemAttribute(0, a, &v) == CUDA_SUCCESS, "cuDeviceGetGraphMemAttribute(%d)", (int)a);
  return v;
}

/* An executable graph that allocates `n` blocks of `mib` MiB on device 0
 * and frees them (free 1) or keeps them. */
static CUgraphExec graph_of(int n, uint64_t mib, int free_them) {
  CUgraph g;
  CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS, "cuGraphCreate");
  CUgraphNode prev = NULL;
  CUdeviceptr p[4];
  for (int i = 0; i < n; i++) {
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof a);
    a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.poolProps.location.id = 0;
    a.bytesize = mib * MiB;
    CUgraphNode node;
    CHECK(cuGraphAddMemAllocNode(&node, g, prev ? &prev : NULL, prev ? 1 : 0, &a) == CUDA_SUCCESS, "alloc node");
    CHECK(a.dptr != 0, "the alloc node's address");
    p[i] = a.dptr;
    prev = node;
  }
  for (int i = 0; free_them && i < n; i++) {
    CUgraphNode node;
    CHECK(cuGraphAddMemFreeNode(&node, g, &prev, 1, p[i]) == CUDA_SUCCESS, "free node");
    prev = node;
  }
  CUgraphExec e;
  CHECK(cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS, "cuGraphInstantiateWithFlags");
  CHECK(cuGraphDestroy(g) == CUDA_SUCCESS, "cuGraphDestroy");
  return e;
}

static int w_graph(void) {
  tp_cuda_up();
  CUstream s;
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS, "stream");
  /* the launch as a program that looks its entry points up gets it */
  CUresult (*launch)(CUgraphExec, CUstream) = NULL;
  CHECK(cuGetProcAddress("cuGraphLaunch", (void **)&launch, 13000, 0, NULL) == CUDA_SUCCESS && launch,
        "cuGetProcAddress(cuGraphLaunch)");

  /* 1. A graph that allocates 32 MiB and frees it: the device's graph pool
   * keeps the 32 MiB, and they are the tenant's. */
  CUgraphExec a = graph_of(1, 32, 1);
  CHECK(cuGraphLaunch(a, s) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS, "launch 32 MiB");
  CHECK(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 32 * MiB &&
            graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT) == 0 && graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH) == 32 * MiB,
        "the driver's graph pool: reserved %llu", (unsigned long long)graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT));
  CHECK(card_used() == 32 * MiB, "the graph pool keeps 32 MiB on the card: %llu", (unsigned long long)card_used());
  CUdeviceptr big;
  CUresult r = cuMemAlloc(&big, 48 * MiB);
  WITHIN_LIMIT("cuMemAlloc(48 MiB) next to a graph pool keeping 32 MiB");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc(48 MiB) = %d, the graph pool keeps 32 MiB of 64", (int)r);

  /* 2. A graph that allocates past the limit is refused at launch. */
  CUgraphExec b = graph_of(2, 40, 1);
  r = launch(b, s);
  cuStreamSynchronize(s);
  WITHIN_LIMIT("a graph allocating 80 MiB");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "launch of a graph allocating 80 MiB = %d", (int)r);
  CHECK(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 32 * MiB, "the driver was not asked");

  /* 3. Growth within the limit: the pool's spare 32 MiB count. */
  CHECK(cuGraphLaunch(a, s) == CUDA_SUCCESS, "relaunch 32 MiB");
  CHECK(card_used() == 32 * MiB, "no growth for a relaunch");
  CUgraphExec c = graph_of(1, 48, 1);
  r = cuGraphLaunch(c, s);
  WITHIN_LIMIT("a graph allocating 48 MiB");
  CHECK(r == CUDA_SUCCESS, "launch of a graph allocating 48 MiB next to 32 spare = %d", (int)r);
  CHECK(card_used() == 48 * MiB, "the graph pool grew to 48 MiB: %llu", (unsigned long long)card_used());

  /* 4. Trim gives it back. */
  CUresult (*trim)(CUdevice) = (CUresult(*)(CUdevice))dlsym(RTLD_DEFAULT, "cuDeviceGraphMemTrim");
  CHECK(trim && trim(0) == CUDA_SUCCESS, "cuDeviceGraphMemTrim (through dlsym)");
  CHECK(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 0 && card_used() == 0, "trimmed");
  CHECK(cuMemAlloc(&big, 56 * MiB) == CUDA_SUCCESS, "56 MiB once the graph pool gave its memory back");
  WITHIN_LIMIT("after trim");
  CHECK(cuMemFree(big) == CUDA_SUCCESS, "free");

  /* 5. What the arena caches goes back before a launch is refused. */
  r = cuGraphLaunch(c, s);
  WITHIN_LIMIT("a launch next to the arena's cache");
  CHECK(r == CUDA_SUCCESS, "launch of 48 MiB after a freed 56 MiB = %d", (int)r);

  /* 6. A graph that keeps its allocation holds it; the context's end gives
   * the pool back. */
  CUgraphExec k = graph_of(1, 8, 0);
  CHECK(cuGraphLaunch(k, s) == CUDA_SUCCESS, "launch of a graph keeping 8 MiB");
  CHECK(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT) == 8 * MiB, "8 MiB in use");
  CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS && cuStreamDestroy(s) == CUDA_SUCCESS, "stream");
  CHECK(cuGraphExecDestroy(a) == CUDA_SUCCESS && cuGraphExecDestroy(b) == CUDA_SUCCESS &&
            cuGraphExecDestroy(c) == CUDA_SUCCESS && cuGraphExecDestroy(k) == CUDA_SUCCESS,
        "exec destroy");
  CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS, "the context ends");
  CHECK(card_used() == 0, "the context's end gave the graph pool back: %llu", (unsigned long long)card_used());
  tp_cuda_up();
  CHECK(cuMemAlloc(&big, 60 * MiB) == CUDA_SUCCESS, "60 MiB: the tenant holds nothing of the graph pool");
  WITHIN_LIMIT("after the context's end");
  SAY("graph ok");
  return 0;
}


static uint64_t view_free(void) {
  size_t f = 0, t = 0;
  CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS && t == LIMIT, "the tenant's view");
  return f;
}

/* A graph of one allocation node of mib MiB and its free node, both added
 * by add (cuGraphAddNode's 12.2 or 12.3 signature); instantiated by inst. */
typedef CUresult (*add_node_v1)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraphNodeParams *);
static CUgraph generic_graph(uint64_t mib, add_node_v1 add_v1) {
  CUgraph g;
  CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS, "cuGraphCreate");
  CUgraphNodeParams np;
  memset(&np, 0, sizeof np);
  np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  np.alloc.bytesize = mib * MiB;
  CUgraphNode a, f;
  CUresult r = add_v1 ? add_v1(&a, g, NULL, 0, &np) : cuGraphAddNode(&a, g, NULL, NULL, 0, &np);
  CHECK(r == CUDA_SUCCESS && np.alloc.dptr, "cuGraphAddNode(MEM_ALLOC %llu MiB) = %d", (unsigned long long)mib, (int)r);
  CUdeviceptr p = np.alloc.dptr;
  memset(&np, 0, sizeof np);
  np.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  np.free.dptr = p;
  r = add_v1 ? add_v1(&f, g, &a, 1, &np) : cuGraphAddNode(&f, g, &a, NULL, 1, &np);
  CHECK(r == CUDA_SUCCESS, "cuGraphAddNode(MEM_FREE) = %d", (int)r);
  return g;
}

/* Graph memory that comes by upload: cuGraphUpload and instantiation with
 * CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD back a graph's allocations before any
 * launch, and the graphs here are built with cuGraphAddNode. */
static int w_graphup(void) {
  tp_cuda_up();
  uint64_t free0 = view_free();
  CUstream s;
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS, "stream");
  add_node_v1 add_v1 = NULL;
  CHECK(cuGetProcAddress("cuGraphAddNode", (void **)&add_v1, 12020, 0, NULL) == CUDA_SUCCESS && add_v1,
        "cuGetProcAddress(cuGraphAddNode, 12020)");
  CUresult (*upload_ptsz)(CUgraphExec, CUstream) = NULL;
  CHECK(cuGetProcAddress("cuGraphUpload", (void **)&upload_ptsz, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                         NULL) == CUDA_SUCCESS && upload_ptsz,
        "cuGetProcAddress(cuGraphUpload, per-thread)");

  /* 1. An upload backs 32 MiB before the launch: the books count them. */
  CUgraph g32 = generic_graph(32, NULL), g48 = generic_graph(48, add_v1);
  CUgraphExec e32, e48;
  CHECK(cuGraphInstantiateWithFlags(&e32, g32, 0) == CUDA_SUCCESS, "instantiate 32");
  CHECK(cuGraphInstantiateWithFlags(&e48, g48, 0) == CUDA_SUCCESS, "instantiate 48");
  CHECK(cuGraphUpload(e32, s) == CUDA_SUCCESS, "cuGraphUpload 32 MiB");
  CHECK(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 32 * MiB && card_used() == 32 * MiB,
        "the upload reserved 32 MiB: card %llu", (unsigned long long)card_used());
  CHECK(free0 - view_free() == 32 * MiB, "the books count the upload: %llu", (unsigned long long)(free0 - view_free()));

  /* 2. An upload whose growth passes the limit is refused, the driver not
   * asked: 48 MiB take the pool's spare 32 and 16 more, next to 24 MiB of
   * cuMemAlloc. */
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, 24 * MiB) == CUDA_SUCCESS, "cuMemAlloc(24 MiB) next to 32 uploaded");
  CUresult r = cuGraphUpload(e48, s);
  WITHIN_LIMIT("an upload of 48 MiB next to 32 + 24");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "cuGraphUpload(48 MiB) next to 32 + 24 = %d", (int)r);
  CHECK(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 32 * MiB, "the driver was not asked");

  /* 3. So is an instantiation that uploads; once the 24 MiB are freed it
   * fits (the arena's cache of them given back first). */
  CUDA_GRAPH_INSTANTIATE_PARAMS ip;
  memset(&ip, 0, sizeof ip);
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  ip.hUploadStream = s;
  CUgraphExec u48 = NULL;
  r = cuGraphInstantiateWithParams(&u48, g48, &ip);
  WITHIN_LIMIT("an instantiation uploading 48 MiB next to 32 + 24");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY && ip.result_out == CUDA_GRAPH_INSTANTIATE_ERROR,
        "cuGraphInstantiateWithParams(UPLOAD, 48 MiB) next to 32 + 24 = %d (result %d)", (int)r, (int)ip.result_out);
  CHECK(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 32 * MiB, "the driver was not asked");
  CHECK(cuMemFree(p) == CUDA_SUCCESS, "free the 24 MiB");
  memset(&ip, 0, sizeof ip);
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  ip.hUploadStream = s;
  r = cuGraphInstantiateWithParams(&u48, g48, &ip);
  WITHIN_LIMIT("an instantiation uploading 48 MiB next to 32 and a cache");
  CHECK(r == CUDA_SUCCESS && ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS, "instantiate-and-upload 48 MiB = %d",
        (int)r);
  CHECK(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 48 * MiB && card_used() == 48 * MiB &&
            free0 - view_free() == 48 * MiB,
        "uploaded at instantiation: card %llu, books %llu", (unsigned long long)card_used(),
        (unsigned long long)(free0 - view_free()));

  /* 4. Its launch takes what the upload reserved; the books hold the limit
   * against other memory meanwhile. */
  CHECK(cuGraphLaunch(u48, s) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS, "launch after upload");
  CHECK(card_used() == 48 * MiB, "no growth at the launch: %llu", (unsigned long long)card_used());
  r = cuMemAlloc(&p, 24 * MiB);
  WITHIN_LIMIT("cuMemAlloc(24 MiB) next to an uploaded 48");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc(24 MiB) next to 48 uploaded = %d", (int)r);

  /* 5. The per-thread upload, after a trim. */
  CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS && card_used() == 0, "trimmed again");
  CHECK(upload_ptsz(e32, s) == CUDA_SUCCESS, "cuGraphUpload_ptsz 32 MiB");
  CHECK(card_used() == 32 * MiB && free0 - view_free() == 32 * MiB, "per-thread upload: card %llu, books %llu",
        (unsigned long long)card_used(), (unsigned long long)(free0 - view_free()));

  /* 6. A child graph moved into its parent (the only way a child brings
   * memory nodes) brings its allocation bytes: refused at the launch next
   * to 32 MiB of cuMemAlloc, the driver not asked; granted once freed. */
  CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS && card_used() == 0, "trimmed before the child graph");
  CUgraph child = generic_graph(40, NULL), parent;
  CHECK(cuGraphCreate(&parent, 0) == CUDA_SUCCESS, "parent graph");
  CUgraphNodeParams cp;
  memset(&cp, 0, sizeof cp);
  cp.type = CU_GRAPH_NODE_TYPE_GRAPH;
  cp.graph.graph = child;
  cp.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
  CUgraphNode cn;
  r = cuGraphAddNode(&cn, parent, NULL, NULL, 0, &cp);
  CHECK(r == CUDA_SUCCESS, "cuGraphAddNode(child graph, MOVE) = %d", (int)r);
  CUgraphExec pe;
  CHECK(cuGraphInstantiateWithFlags(&pe, parent, 0) == CUDA_SUCCESS, "instantiate the parent");
  CHECK(cuMemAlloc(&p, 32 * MiB) == CUDA_SUCCESS, "cuMemAlloc(32 MiB)");
  r = cuGraphLaunch(pe, s);
  WITHIN_LIMIT("a parent graph allocating 40 MiB through its child, next to 32");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "launch of the parent next to 32 MiB = %d", (int)r);
  CHECK(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 0, "the driver was not asked");
  CHECK(cuMemFree(p) == CUDA_SUCCESS, "free the 32 MiB");
  r = cuGraphLaunch(pe, s);
  WITHIN_LIMIT("the parent graph alone");
  CHECK(r == CUDA_SUCCESS && card_used() == 40 * MiB && free0 - view_free() == 40 * MiB,
        "the parent's launch = %d: card %llu, books %llu", (int)r, (unsigned long long)card_used(),
        (unsigned long long)(free0 - view_free()));
  CHECK(cuGraphExecDestroy(pe) == CUDA_SUCCESS && cuGraphDestroy(parent) == CUDA_SUCCESS, "parent destroyed");

  /* 7. The context's end gives it all back. */
  CHECK(cuStreamDestroy(s) == CUDA_SUCCESS, "stream");
  CHECK(cuGraphExecDestroy(e32) == CUDA_SUCCESS && cuGraphExecDestroy(e48) == CUDA_SUCCESS &&
            cuGraphExecDestroy(u48) == CUDA_SUCCESS && cuGraphDestroy(g32) == CUDA_SUCCESS &&
            cuGraphDestroy(g48) == CUDA_SUCCESS,
        "destroys");
  CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS, "the context ends");
  CHECK(card_used() == 0, "the context's end gave the graph pool back: %llu", (unsigned long long)card_used());
  tp_cuda_up();
  CHECK(view_free() == free0, "the books hold nothing of it");
  SAY("graphup ok");
  return 0;
}

/* ---- CUDA arrays ---- */

static int w_array(void) {
  tp_cuda_up();
  uint64_t free0 = view_free();
  /* 1. 1000 x 1000 float4: rows of 16,000 B padded to 16 KiB, 16 MiB */
  CUDA_ARRAY_DESCRIPTOR d2 = {1000, 1000, CU_AD_FORMAT_FLOAT, 4};
  CUarray a, b;
  CHECK(cuArrayCreate(&a, &d2) == CUDA_SUCCESS, "cuArrayCreate 1000 x 1000 float4");
  CHECK(card_used() == 16 * MiB, "the card holds the array: %llu", (unsigned long long)card_used());
  CHECK(free0 - view_free() == 16 * MiB, "the tenant's view counts it: free %llu -> %llu",
        (unsigned long long)free0, (unsigned long long)view_free());
  /* 2. 2048 x 2048 float4 (64 MiB) next to it: refused, the driver not asked */
  CUDA_ARRAY3D_DESCRIPTOR big = {2048, 2048, 0, CU_AD_FORMAT_FLOAT, 4, 0};
  CUresult r = cuArray3DCreate(&b, &big);
  WITHIN_LIMIT("an array past the limit");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "cuArray3DCreate(64 MiB) next to 16 = %d", (int)r);
  CHECK(card_used() == 16 * MiB, "the driver was not asked");
  /* 3. device memory next to the array: the limit counts both */
  CUdeviceptr p;
  r = cuMemAlloc(&p, 56 * MiB);
  WITHIN_LIMIT("cuMemAlloc next to an array");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc(56 MiB) next to a 16 MiB array = %d", (int)r);
  CHECK(cuMemAlloc(&p, 40 * MiB) == CUDA_SUCCESS, "cuMemAlloc(40 MiB) next to a 16 MiB array");
  CHECK(cuMemFree(p) == CUDA_SUCCESS, "free");
  /* 4. as the runtime reaches them (and with the arena, if on, caching the
   * 40 MiB block: given back before the request is refused): a layered 3D array of six 1024 x 1024
   * int32 layers (24 MiB) and a 2048 x 2048 RGBA8 mipmap of 12 levels
   * (16 + 4 + 1 + ... MiB: 22 MiB) */
  CUresult (*create3d)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *) = NULL;
  CUresult (*mipmap)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned) = NULL;
  CHECK(cuGetProcAddress("cuArray3DCreate", (void **)&create3d, 13000, 0, NULL) == CUDA_SUCCESS && create3d &&
            cuGetProcAddress("cuMipmappedArrayCreate", (void **)&mipmap, 13000, 0, NULL) == CUDA_SUCCESS && mipmap,
        "cuGetProcAddress of the array functions");
  CUDA_ARRAY3D_DESCRIPTOR layered = {1024, 1024, 6, CU_AD_FORMAT_SIGNED_INT32, 1, CUDA_ARRAY3D_LAYERED};
  CHECK(create3d(&b, &layered) == CUDA_SUCCESS, "a layered array");
  CUDA_ARRAY3D_DESCRIPTOR md = {2048, 2048, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
  CUmipmappedArray m;
  CHECK(mipmap(&m, &md, 12) == CUDA_SUCCESS, "a mipmapped array");
  CHECK(card_used() == (16 + 24 + 22) * MiB, "the card holds three arrays: %llu", (unsigned long long)card_used());
  CHECK(free0 - view_free() == card_used(), "the books are the card: %llu vs %llu",
        (unsigned long long)(free0 - view_free()), (unsigned long long)card_used());
  WITHIN_LIMIT("three arrays");
  /* 5. destroys give back; a handle the shim never saw is the driver's */
  CHECK(cuArrayDestroy(b) == CUDA_SUCCESS && cuArrayDestroy(a) == CUDA_SUCCESS, "cuArrayDestroy");
  CHECK(cuArrayDestroy(a) == CUDA_ERROR_INVALID_HANDLE, "a second destroy is the driver's error");
  CHECK(card_used() == 22 * MiB && free0 - view_free() == 22 * MiB, "after destroys: card %llu, books %llu",
        (unsigned long long)card_used(), (unsigned long long)(free0 - view_free()));
  /* 6. the mipmap goes with its context */
  CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS, "the context ends");
  CHECK(card_used() == 0, "the context's end freed the mipmap: %llu", (unsigned long long)card_used());
  tp_cuda_up();
  CHECK(view_free() == free0, "the books hold nothing of it: free %llu, was %llu", (unsigned long long)view_free(),
        (unsigned long long)free0);
  CHECK(cuMemAlloc(&p, 60 * MiB) == CUDA_SUCCESS, "60 MiB after the arrays went");
  WITHIN_LIMIT("after the context's end");
  CHECK(cuMemFree(p) == CUDA_SUCCESS, "free");
  /* 7. formats the sim does not model still get the shim's estimate: a
   * 16384^2 BC1 array (8 bytes per 4 x 4 block: 128 MiB) is refused before
   * the driver is asked; a 4096^2 one (8 MiB) is admitted, and the sim's
   * refusal of it leaves the books as they were. A sparse array takes no
   * memory when made: the driver's answer, unaccounted. */
  uint64_t free1 = view_free();
  CUDA_ARRAY3D_DESCRIPTOR bc = {16384, 16384, 0, CU_AD_FORMAT_BC1_UNORM, 4, 0};
  r = cuArray3DCreate(&b, &bc);
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "a 128 MiB BC1 array: %d, refused by the books", (int)r);
  bc.Width = bc.Height = 4096;
  r = cuArray3DCreate(&b, &bc);
  CHECK(r == CUDA_ERROR_NOT_SUPPORTED, "an 8 MiB BC1 array: %d, the sim's own answer", (int)r);
  CUDA_ARRAY3D_DESCRIPTOR sparse = {16384, 16384, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_SPARSE};
  r = cuArray3DCreate(&b, &sparse);
  CHECK(r == CUDA_ERROR_NOT_SUPPORTED, "a 4 GiB sparse array: %d, the sim's own answer", (int)r);
  r = cuMipmappedArrayCreate(&m, &md, 0xffffffffu);   /* more levels than any side halves into */
  CHECK(r == CUDA_ERROR_INVALID_VALUE, "a mipmap of 2^32 - 1 levels: %d, the sim's own answer", (int)r);
  CHECK(view_free() == free1 && card_used() == 0, "nothing charged: free %llu -> %llu",
        (unsigned long long)free1, (unsigned long long)view_free());
  SAY("array ok");
  return 0;
}

/* ---- a graph made by stream capture: its memory nodes are counted ---- */

static int w_graphcap(void) {
  tp_cuda_up();
  uint64_t free0 = view_free();
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
  /* PyTorch's CUDA graphs over the stream-ordered allocator: a captured
   * cudaMallocAsync becomes an allocation node no hook saw added */
  CUgraph g;
  CUdeviceptr p, big;
  /* 32 MiB held: the captured 48 MiB is a node of the graph, no memory, so
   * it is not refused (the driver takes nothing at capture time) */
  CHECK(cuMemAlloc(&big, 32 * MiB) == CUDA_SUCCESS, "32 MiB");
  CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS, "begin capture");
  CUresult r = cuMemAllocAsync(&p, 48 * MiB, s);
  CHECK(r == CUDA_SUCCESS, "a captured 48 MiB allocation next to 32 MiB: %d", (int)r);
  CHECK(cuMemFreeAsync(p, s) == CUDA_SUCCESS, "its captured free");
  CHECK(cuStreamEndCapture(s, &g) == CUDA_SUCCESS, "end capture");
  CUgraphExec e;
  CHECK(cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS, "instantiate");
  CHECK(card_used() == 32 * MiB && free0 - view_free() == 32 * MiB, "only the 32 MiB before the launch");
  /* next to the 32 MiB its launch would take the card to 80 MiB: refused,
   * the driver not asked */
  r = cuGraphLaunch(e, s);
  WITHIN_LIMIT("the captured graph's launch next to 32 MiB");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "the launch = %d", (int)r);
  CHECK(cuMemFree(big) == CUDA_SUCCESS, "free");
  /* alone it runs; the graph pool keeps its 48 MiB, charged */
  CHECK(cuGraphLaunch(e, s) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS, "the launch alone");
  WITHIN_LIMIT("the captured graph alone");
  CHECK(free0 - view_free() == card_used(), "the books are the card: %llu vs %llu",
        (unsigned long long)(free0 - view_free()), (unsigned long long)card_used());
  CHECK(cuGraphExecDestroy(e) == CUDA_SUCCESS && cuGraphDestroy(g) == CUDA_SUCCESS, "destroy");
  CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS && card_used() == 0, "trimmed: %llu",
        (unsigned long long)card_used());
  SAY("graphcap ok");
  return 0;
}

/* ---- pitch allocations: charged as the driver pads them ---- */

static int w_pitch(void) {
  tp_cuda_up();
  uint64_t free0 = view_free();
  CUdeviceptr p;
  size_t pitch = 0;
  /* 257-byte rows, padded to 512 by the driver: 200,000 rows take 97.7 MiB,
   * twice their bare width. Refused by the books, the driver not asked. */
  CUresult r = cuMemAllocPitch(&p, &pitch, 257, 200000, 4);
  WITHIN_LIMIT("a narrow pitch allocation");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "257 x 200000 (97.7 MiB padded) = %d", (int)r);
  CHECK(vramsim_calls("cuMemAllocPitch_v2") == 0, "the driver was not asked");
  /* 100,000 rows (48.8 MiB padded): granted, charged as padded */
  CHECK(cuMemAllocPitch(&p, &pitch, 257, 100000, 4) == CUDA_SUCCESS && pitch == 512, "257 x 100000: pitch %zu",
        pitch);
  /* The view's free memory is what one allocation could take: under VMM
   * the arena maps whole 2 MiB granules, so it drops by the charge rounded
   * up to one (48.8 -> 50 MiB); with chunks or the arena off, exactly. */
  uint64_t drop = free0 - view_free();
  CHECK(card_used() == 512ull * 100000 && drop >= card_used() && drop - card_used() < 2 * MiB,
        "the books are the card: %llu vs %llu", (unsigned long long)drop, (unsigned long long)card_used());
  /* next to it, 19.5 MiB padded would pass the limit (11.4 MiB bare would not) */
  r = cuMemAllocPitch(&p, &pitch, 300, 40000, 4);
  WITHIN_LIMIT("a second pitch allocation");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "300 x 40000 (19.5 MiB padded) next to 48.8 MiB = %d", (int)r);
  SAY("pitch ok");
  return 0;
}

/* ---- the program's own VMM memory: references and mappings ---- */

static CUdeviceptr map_rw(CUmemGenericAllocationHandle h, uint64_t size) {
  CUdeviceptr va = 0;
  CHECK(cuMemAddressReserve(&va, size, 0, 0, 0) == CUDA_SUCCESS, "reserve");
  CHECK(cuMemMap(va, size, 0, h, 0) == CUDA_SUCCESS, "map");
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = 0;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(cuMemSetAccess(va, size, &acc, 1) == CUDA_SUCCESS, "access");
  return va;
}

static int w_vmmlife(void) {
  tp_cuda_up();
  uint64_t free0 = view_free();
  CUmemAllocationProp p = t_device_prop(0);
  /* 1. created, mapped and released at once: alive until unmapped */
  CUmemGenericAllocationHandle a, b, c, r1;
  CHECK(cuMemCreate(&a, 32 * MiB, &p, 0) == CUDA_SUCCESS, "create 32 MiB");
  CUdeviceptr va = map_rw(a, 32 * MiB);
  CHECK(cuMemRelease(a) == CUDA_SUCCESS, "release while mapped");
  CHECK(card_used() == 32 * MiB, "the card holds the released, mapped memory: %llu", (unsigned long long)card_used());
  CHECK(free0 - view_free() == 32 * MiB, "the books still count it: %llu", (unsigned long long)(free0 - view_free()));
  CHECK(cuMemsetD8(va, 0x5a, 32 * MiB) == CUDA_SUCCESS, "the program still uses it");
  /* 2. the limit counts it */
  CUresult r = cuMemCreate(&b, 40 * MiB, &p, 0);
  WITHIN_LIMIT("a create next to released, mapped memory");
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate(40 MiB) next to 32 mapped = %d", (int)r);
  /* 3. NCCL's free: retain, release, unmap, release; charged to the last */
  CHECK(cuMemCreate(&c, 16 * MiB, &p, 0) == CUDA_SUCCESS, "create 16 MiB");
  CUdeviceptr vc = map_rw(c, 16 * MiB);
  CHECK(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)(vc + 4096)) == CUDA_SUCCESS && r1 == c, "retain");
  CHECK(cuMemRelease(r1) == CUDA_SUCCESS, "release the retained reference");
  CHECK(free0 - view_free() == 48 * MiB && card_used() == 48 * MiB, "both charged: books %llu, card %llu",
        (unsigned long long)(free0 - view_free()), (unsigned long long)card_used());
  CHECK(cuMemUnmap(vc, 16 * MiB) == CUDA_SUCCESS, "unmap");
  CHECK(free0 - view_free() == 48 * MiB && card_used() == 48 * MiB, "unmapped, still referenced: books %llu",
        (unsigned long long)(free0 - view_free()));
  CHECK(cuMemRelease(c) == CUDA_SUCCESS, "the last release");
  CHECK(cuMemRelease(c) == CUDA_ERROR_INVALID_VALUE, "one release too many is the driver's error");
  CHECK(free0 - view_free() == 32 * MiB && card_used() == 32 * MiB, "the 16 MiB went: books %llu, card %llu",
        (unsigned long long)(free0 - view_free()), (unsigned long long)card_used());
  CHECK(cuMemAddressFree(vc, 16 * MiB) == CUDA_SUCCESS, "address free");
  /* 4. the unmap of the released handle ends its memory */
  CHECK(cuMemUnmap(va, 32 * MiB) == CUDA_SUCCESS, "unmap the released handle");
  CHECK(card_used() == 0 && view_free() == free0, "all given back: card %llu, books %llu",
        (unsigned long long)card_used(), (unsigned long long)(free0 - view_free()));
  CHECK(cuMemAddressFree(va, 32 * MiB) == CUDA_SUCCESS, "address free");
  CHECK(cuMemCreate(&b, 60 * MiB, &p, 0) == CUDA_SUCCESS, "60 MiB once they went");
  WITHIN_LIMIT("after the VMM memory went");
  CHECK(cuMemRelease(b) == CUDA_SUCCESS, "release");
  SAY("vmmlife ok");
  return 0;
}

/* ---- host-located pools ---- */

static CUresult host_pool(CUmemoryPool *pool, CUmemLocationType t, int id) {
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = t;
  props.location.id = id;
  return cuMemPoolCreate(pool, &props);
}

static int w_hostpool(void) {
  tp_cuda_up();
  size_t free0, total0, free1, total1;
  CHECK(cuMemGetInfo(&free0, &total0) == CUDA_SUCCESS, "view");
  CUmemoryPool h, n, bad;
  CHECK(host_pool(&h, CU_MEM_LOCATION_TYPE_HOST, 0) == CUDA_SUCCESS, "cuMemPoolCreate(HOST)");
  CHECK(host_pool(&n, CU_MEM_LOCATION_TYPE_HOST_NUMA, 0) == CUDA_SUCCESS, "cuMemPoolCreate(HOST_NUMA 0)");
  CHECK(host_pool(&bad, CU_MEM_LOCATION_TYPE_HOST_NUMA, 5) == CUDA_ERROR_INVALID_VALUE, "HOST_NUMA 5");
  CHECK(host_pool(&bad, CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0) == CUDA_ERROR_INVALID_VALUE, "HOST_NUMA_CURRENT");
  cuuint64_t keep = UINT64_MAX;
  CHECK(cuMemPoolSetAttribute(h, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS, "threshold");
  CUdeviceptr a, b, d;
  CHECK(cuMemAllocFromPoolAsync(&a, 256 * MiB, h, 0) == CUDA_SUCCESS, "256 MiB from a HOST pool (limit 64 MiB)");
  CHECK(cuMemAllocFromPoolAsync(&b, 128 * MiB, n, 0) == CUDA_SUCCESS, "128 MiB from a HOST_NUMA pool");
  CHECK(cuStreamSynchronize(0) == CUDA_SUCCESS, "sync");
  CHECK(card_used() == 0, "host pools are on no card: %llu", (unsigned long long)card_used());
  cuuint64_t reserved = 0;
  CHECK(cuMemPoolGetAttribute(h, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == CUDA_SUCCESS &&
            reserved == 256 * MiB,
        "the driver's reserved bytes of the host pool: %llu", (unsigned long long)reserved);
  CHECK(cuMemGetInfo(&free1, &total1) == CUDA_SUCCESS, "view");
  CHECK(free1 == free0 && total1 == total0, "the tenant's view is unchanged: free %llu -> %llu",
        (unsigned long long)free0, (unsigned long long)free1);
  CHECK(cuMemAlloc(&d, 60 * MiB) == CUDA_SUCCESS, "the tenant's device memory is untouched");
  WITHIN_LIMIT("after host pools");
  CHECK(cuMemFree(d) == CUDA_SUCCESS, "free");
  CHECK(cuMemFreeAsync(a, 0) == CUDA_SUCCESS && cuMemFreeAsync(b, 0) == CUDA_SUCCESS &&
            cuStreamSynchronize(0) == CUDA_SUCCESS,
        "free host blocks");
  CHECK(cuMemPoolTrimTo(h, 0) == CUDA_SUCCESS, "trim");
  CHECK(cuMemPoolDestroy(h) == CUDA_SUCCESS && cuMemPoolDestroy(n) == CUDA_SUCCESS, "destroy");
  CHECK(cuMemAlloc(&d, 60 * MiB) == CUDA_SUCCESS, "still the whole limit");
  WITHIN_LIMIT("after host pools went");
  SAY("hostpool ok");
  return 0;
}

static void cuda_up_on(int dev) {
  CUcontext c;
  CHECK(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&c, dev) == CUDA_SUCCESS &&
            cuCtxSetCurrent(c) == CUDA_SUCCESS,
        "context on device %d", dev);
}

static int w_try(int dev, const char *mib, const char *want) {
  cuda_up_on(dev);
  CUdeviceptr p;
  CUresult r = cuMemAlloc(&p, strtoull(mib, NULL, 10) * MiB);
  printf("result=%d\n", (int)r);
  CHECK(!strcmp(want, "ok") ? r == CUDA_SUCCESS : r == CUDA_ERROR_OUT_OF_MEMORY, "try: cuMemAlloc(%s MiB) on %d = %d",
        mib, dev, (int)r);
  return 0;
}

static int w_hold(const char *mib, int dev) {
  /* a holder never outlives its orchestrator (one that failed a check
   * exits without its SIGTERM): it would hold memory in the next run's
   * ledger and sim state */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 1;
  cuda_up_on(dev);
  CUdeviceptr p;
  CUresult r = cuMemAlloc(&p, strtoull(mib, NULL, 10) * MiB);
  printf("result=%d\n", (int)r);
  fflush(stdout);
  CHECK(r == CUDA_SUCCESS, "hold: cuMemAlloc(%s MiB) = %d", mib, (int)r);
  while (tp_wait_signal() != SIGTERM) {
  }
  return 0;
}

static const char *arena_line(const char *mode) {
  static char g[64];
  snprintf(g, sizeof g, "arena = %s", mode);
  return g;
}

static int run_worker(const char *tag, const char *const *args) {
  int st = tp_wait(tp_spawn(tag, "t", NULL, args));
  char name[64];
  snprintf(name, sizeof name, "%s.out", tag);
  char *out = tp_read(name);
  snprintf(name, sizeof name, "%s.err", tag);
  char *err = tp_read(name);
  printf("%s%s", out, err);
  free(out);
  free(err);
  return st;
}

/* A worker under tenant `name` (raw bytes) holding mib; extra_env may be NULL. */
static pid_t spawn_hold(const char *tag, const char *name, const char *extra_env, const char *mib) {
  const char *args[] = {"hold", mib, NULL};
  return tp_spawn(tag, name, extra_env, args);
}

static int has_line_starting(const char *text, const char *prefix) {
  for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (!strncmp(l, prefix, strlen(prefix))) return 1;
  return 0;
}

static int case_names(void) {
  /* A newline in the name: refused, the log line escaped (no forged line). */
  int st = tp_wait(spawn_hold("nl", "evil\nvramshim: forged line", NULL, "1"));
  char *err = tp_read("nl.err");
  printf("%s", err);
  CHECK(st == 78, "a name with a newline is a config error: exit %d", st);
  CHECK(!has_line_starting(err, "vramshim: forged line"), "no forged line in the log");
  CHECK(strstr(err, "VRAMSHIM_TENANT='evil\\nvramshim: forged line'"), "the name is shown escaped");
  free(err);
  /* Names longer than 63 bytes: refused, never cut (once they became one tenant). */
  char long1[80], long2[80];
  memset(long1, 'n', 70), long1[70] = 0;
  memcpy(long2, long1, sizeof long1);
  long1[69] = '1', long2[69] = '2';
  CHECK(tp_wait(spawn_hold("long1", long1, NULL, "1")) == 78, "a 70-byte name is refused");
  CHECK(tp_wait(spawn_hold("long2", long2, NULL, "1")) == 78, "another 70-byte name is refused");
  /* ... unless the operator chose passthrough: then nothing is enforced. */
  pid_t pt = spawn_hold("pass", long1, "VRAMSHIM_ON_ERROR=passthrough", "100");
  tp_sleep_ms(50);
  int pst = 0;
  for (int i = 0; i < 600 && !tp_exited(pt, &pst); i++) {
    char *out = tp_read("pass.out");
    int held = strstr(out, "result=0") != NULL;
    free(out);
    if (held) break;
    tp_sleep_ms(50);
  }
  kill(pt, SIGTERM);
  CHECK(tp_wait(pt) == 0, "passthrough: the program runs (100 MiB over a 64 MiB default, not enforced)");
  /* Two 63-byte names differing in the last byte: two tenants (cut to a
   * common prefix they would be one). */
  char n1[64], n2[64];
  memset(n1, 'm', 63), n1[63] = 0;
  memcpy(n2, n1, sizeof n1);
  n1[62] = '1', n2[62] = '2';
  pid_t a = spawn_hold("n1", n1, NULL, "16"), b = spawn_hold("n2", n2, NULL, "16");
  /* and a tenant without a section, held to [tenant default]'s 64 MiB */
  pid_t o = spawn_hold("other", "other", NULL, "16");
  static vs_ledger_snapshot snap;
  pid_t who[3] = {a, b, o};
  for (int i = 0; i < 3; i++)
    if (tp_wait_held(who[i], 16 * MiB, TP_EVENTUALLY_MS) != 0) {
      if (tp_snapshot(&snap) == 0)
        for (int k = 0; k < snap.nprocs; k++)
          SAY("ledger: pid %d tenant %s held %llu alive %d", snap.procs[k].pid, snap.procs[k].tenant,
              (unsigned long long)snap.procs[k].held, snap.procs[k].alive);
      CHECK(0, "holder %d (pid %d) holds 16 MiB", i, (int)who[i]);
    }
  CHECK(tp_snapshot(&snap) == 0, "snapshot");
  const vs_snap_tenant *t1 = tp_tenant(&snap, n1), *t2 = tp_tenant(&snap, n2), *to = tp_tenant(&snap, "other");
  CHECK(t1 && t2 && t1 != t2, "two tenants");
  CHECK(t1->used >= 16 * MiB && t2->used >= 16 * MiB && t1->nprocs == 1 && t2->nprocs == 1,
        "two tenants of one process each: %llu MiB in %d, %llu MiB in %d", (unsigned long long)(t1->used / MiB),
        t1->nprocs, (unsigned long long)(t2->used / MiB), t2->nprocs);
  CHECK(to && to->limit == 64 * MiB, "a tenant without a section shows the limit it is held to: %llu",
        to ? (unsigned long long)to->limit : 0ull);
  kill(a, SIGTERM), kill(b, SIGTERM), kill(o, SIGTERM);
  CHECK(tp_wait(a) == 0 && tp_wait(b) == 0 && tp_wait(o) == 0, "holders exit");
  return 0;
}

/* cvd: CUDA_VISIBLE_DEVICES for the worker (NULL: unset) */
static pid_t spawn_env(const char *tag, const char *cvd, const char *const *args) {
  static char env[160];
  if (cvd) snprintf(env, sizeof env, "CUDA_VISIBLE_DEVICES=%s", cvd);
  else snprintf(env, sizeof env, "VRAMSHIM_TEST_UNUSED=1");
  return tp_spawn(tag, "t", env, args);
}

static int case_visible(void) {
  unsetenv("CUDA_VISIBLE_DEVICES");
  /* the physical card 1's UUID, as a process without the variable sees it */
  CUuuid u;
  CHECK(cuInit(0) == CUDA_SUCCESS && cuDeviceGetUuid(&u, 1) == CUDA_SUCCESS, "uuid of card 1");
  const unsigned char *b = (const unsigned char *)u.bytes;
  char uuid[48];
  snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  /* A: no CUDA_VISIBLE_DEVICES, device 1, holds 128 MiB of the 256 MiB limit */
  const char *hold_a[] = {"hold", "64", "1", NULL};
  pid_t a = spawn_env("a", NULL, hold_a);
  CHECK(tp_wait_held(a, 64 * MiB, TP_EVENTUALLY_MS) == 0, "A holds 64 MiB");
  /* B sees the same card as its device 0: the same tenant, the same limit
   * (sizes leave room for an arena that grows by more than a request) */
  const char *try_b[] = {"try", "0", "224", "oom", NULL};
  int st = tp_wait(spawn_env("b", "1", try_b));
  char *out = tp_read("b.err");
  printf("%s", out);
  free(out);
  CHECK(st == 0, "B (CUDA_VISIBLE_DEVICES=1) is refused 224 MiB next to A's 64 MiB");
  /* C names it by UUID: the index comes from the card's ledger header */
  const char *hold_c[] = {"hold", "32", "0", NULL};
  pid_t c = spawn_env("c", uuid, hold_c);
  CHECK(tp_wait_held(c, 32 * MiB, TP_EVENTUALLY_MS) == 0, "C holds 32 MiB");
  const char *try_c[] = {"try", "0", "192", "oom", NULL};
  CHECK(tp_wait(spawn_env("c2", uuid, try_c)) == 0, "C2 (CUDA_VISIBLE_DEVICES=%s) is refused past the limit", uuid);
  static vs_ledger_snapshot snap;
  CHECK(tp_snapshot(&snap) == 0, "one ledger for the card");
  const vs_snap_tenant *t = tp_tenant(&snap, "t");
  CHECK(t && t->used >= 96 * MiB && t->used <= 256 * MiB && t->limit == 256 * MiB && t->nprocs == 2,
        "one tenant usage (%llu MiB) and one limit", t ? (unsigned long long)(t->used / MiB) : 0ull);
  CHECK(snap.card_index == 1 && snap.headroom == 256 * MiB, "the header keeps the physical index (%d)", snap.card_index);
  CHECK(!strcmp(snap.card_id, uuid), "the ledger is the card's UUID's");
  /* an unknown ordinal/UUID pairing: C's process still on card index 1 */
  kill(a, SIGTERM), kill(c, SIGTERM);
  CHECK(tp_wait(a) == 0 && tp_wait(c) == 0, "holders exit");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  CHECK(argc >= 2, "usage: card_truth case pool KIND MODE WORKDIR | case host MODE WORKDIR | WORKER ARGS");
  if (!strcmp(argv[1], "pool") && argc == 3) return w_pool(argv[2]);
  if (!strcmp(argv[1], "host")) return w_host();
  if (!strcmp(argv[1], "graph")) return w_graph();
  if (!strcmp(argv[1], "graphup")) return w_graphup();
  if (!strcmp(argv[1], "array")) return w_array();
  if (!strcmp(argv[1], "pitch")) return w_pitch();
  if (!strcmp(argv[1], "graphcap")) return w_graphcap();
  if (!strcmp(argv[1], "vmmlife")) return w_vmmlife();
  if (!strcmp(argv[1], "hostpool")) return w_hostpool();
  if (!strcmp(argv[1], "hold") && argc >= 3) {
    tp_worker_signals();
    return w_hold(argv[2], argc > 3 ? atoi(argv[3]) : 0);
  }
  if (!strcmp(argv[1], "try") && argc == 5) return w_try(atoi(argv[2]), argv[3], argv[4]);
  CHECK(!strcmp(argv[1], "case") && argc >= 5, "case NAME ...");
  const char *c = argv[2];
  if (!strcmp(c, "pool")) {
    CHECK(argc == 6, "case pool KIND MODE WORKDIR");
    tp_workdir(argv[5]);
    tp_config(arena_line(argv[4]), "[tenant t]\nlimit = 64MiB\n");
    const char *args[] = {"pool", argv[3], NULL};
    CHECK(run_worker("pool", args) == 0, "the pool worker passed");
  } else if (!strcmp(c, "graph") || !strcmp(c, "graphup") || !strcmp(c, "hostpool") || !strcmp(c, "array") ||
             !strcmp(c, "vmmlife") || !strcmp(c, "pitch") || !strcmp(c, "graphcap")) {
    tp_workdir(argv[4]);
    tp_config(arena_line(argv[3]), "[tenant t]\nlimit = 64MiB\n");
    const char *args[] = {c, NULL};
    CHECK(run_worker(c, args) == 0, "the %s worker passed", c);
  } else if (!strcmp(c, "host")) {
    tp_workdir(argv[4]);
    tp_config(arena_line(argv[3]), "[tenant t]\nlimit = 64MiB\n");
    const char *args[] = {"host", NULL};
    CHECK(run_worker("host", args) == 0, "the host worker passed");
  } else if (!strcmp(c, "visible")) {
    tp_workdir(argv[4]);
    tp_config(arena_line(argv[3]), "[card 1]\nheadroom = 256MiB\n[tenant t]\ncards = 1\nlimit = 256MiB\n");
    CHECK(case_visible() == 0, "visible");
  } else if (!strcmp(c, "names")) {
    tp_workdir(argv[4]);
    tp_config(arena_line(argv[3]), "[tenant t]\nlimit = 64MiB\n[tenant default]\nlimit = 64MiB\n");
    CHECK(case_names() == 0, "names");
  } else {
    CHECK(0, "unknown case %s", c);
  }
  SAY("PASS %s", c);
  return 0;
}

/* The device's graph memory pool charged to the tenant (graph_charge.h),
 * and the hooks that feed it.
 *
 * Two small tables (a program holds few graphs): graphs and executable
 * graphs, each with the bytes of its allocation nodes per device (rounded
 * up to the 2 MiB the driver maps). Per card, `charged` is the pool's
 * reserved bytes as last read; invariant: it is what this process's ledger
 * slot holds for the card's graph pool (each change moves the ledger by
 * the same amount, under g_lock). */
#include "graph_charge.h"

#include "arena_glue.h"
#include "hook_enter.h"
#include "quota.h"
#include "stream_order.h"
#include "vramshim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define GRAPH_ROUND ((uint64_t)2 << 20)
#define NCARDS VRAMSHIM_MAX_CARDS

typedef struct graph_ent {
  void *h;                 /* CUgraph or CUgraphExec */
  uint64_t need[NCARDS];   /* bytes of its allocation nodes per device */
} graph_ent;

typedef struct graph_tab {
  graph_ent *v;
  size_t n, cap;
} graph_tab;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static graph_tab g_graphs, g_execs;
static uint64_t g_charged[NCARDS];
static _Atomic int g_used[NCARDS];   /* a launch with allocation nodes happened on the card */

uint64_t vs_graph_mem_charged(int card) {
  if (card < 0 || card >= NCARDS) return 0;
  pthread_mutex_lock(&g_lock);
  uint64_t n = g_charged[card];
  pthread_mutex_unlock(&g_lock);
  return n;
}

static uint64_t round_up(uint64_t n) {
  uint64_t r = (n + GRAPH_ROUND - 1) / GRAPH_ROUND * GRAPH_ROUND;
  return r < n ? n : r;
}

/* g_lock held */
static graph_ent *tab_find(graph_tab *t, void *h) {
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i].h == h) return &t->v[i];
  return NULL;
}

/* g_lock held: the entry of h, made (all zero) when missing; NULL out of memory. */
static graph_ent *tab_get(graph_tab *t, void *h) {
  graph_ent *e = tab_find(t, h);
  if (e) return e;
  if (t->n == t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 8;
    graph_ent *nv = realloc(t->v, nc * sizeof *nv);
    if (!nv) return NULL;
    t->v = nv;
    t->cap = nc;
  }
  e = &t->v[t->n++];
  memset(e, 0, sizeof *e);
  e->h = h;
  return e;
}

static void tab_drop(graph_tab *t, void *h) {
  graph_ent *e = tab_find(t, h);
  if (e) *e = t->v[--t->n];
}

static int read_attr(const vs_real_table *real, int card, CUgraphMem_attribute attr, uint64_t *out) {
  if (!real || !real->cuDeviceGetGraphMemAttribute) return -1;
  cuuint64_t v = 0;
  vs_guard_enter();
  CUresult r = real->cuDeviceGetGraphMemAttribute((CUdevice)card, attr, &v);
  vs_guard_leave();
  if (r != CUDA_SUCCESS) return -1;
  *out = v;
  return 0;
}

/* g_lock held: the card's charge becomes the pool's reserved bytes; the
 * ledger moves by the difference, less `admitted` (already charged). */
static void settle(const vs_real_table *real, int card, uint64_t admitted) {
  uint64_t now, before = g_charged[card] + admitted;
  if (read_attr(real, card, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &now)) now = before;   /* the driver cannot say: what was admitted stands */
  g_charged[card] = now;
  if (now > before) vs_quota_force(card, now - before);
  else if (now < before) vs_quota_uncharge(card, before - now);
}

void vs_graph_mem_refresh(const vs_real_table *real, int card) {
  if (!real) return;
  pthread_mutex_lock(&g_lock);
  for (int c = 0; c < NCARDS; c++)
    if ((card < 0 || c == card) && atomic_load_explicit(&g_used[c], memory_order_relaxed)) settle(real, c, 0);
  pthread_mutex_unlock(&g_lock);
}

/* A fork child holds no graph pool of the parent's and no charge. */
void vs_graph_mem_atfork_child(void) {
  pthread_mutex_init(&g_lock, NULL);
  free(g_graphs.v);
  free(g_execs.v);
  memset(&g_graphs, 0, sizeof g_graphs);
  memset(&g_execs, 0, sizeof g_execs);
  memset(g_charged, 0, sizeof g_charged);
  for (int c = 0; c < NCARDS; c++) atomic_store(&g_used[c], 0);
}

/* ---- hooks ---- */

/* The allocation bytes per device of graph's nodes and its child graphs'
 * (depth: how far child graphs nest, a guard against a cycle the driver
 * would never make). 0, or -1 when the driver cannot say. */
static int walk(const vs_real_table *real, CUgraph graph, uint64_t need[NCARDS], int depth) {
  size_t n = 0;
  if (depth > 16 || real->cuGraphGetNodes(graph, NULL, &n) != CUDA_SUCCESS) return -1;
  CUgraphNode *v = n ? calloc(n, sizeof *v) : NULL;
  if (n && !v) return -1;
  int rc = n && real->cuGraphGetNodes(graph, v, &n) != CUDA_SUCCESS ? -1 : 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    CUgraphNodeType t;
    if (!v[i] || real->cuGraphNodeGetType(v[i], &t) != CUDA_SUCCESS) continue;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    CUgraph child;
    if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC && real->cuGraphMemAllocNodeGetParams &&
        real->cuGraphMemAllocNodeGetParams(v[i], &p) == CUDA_SUCCESS &&
        p.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE && p.poolProps.location.id >= 0 &&
        p.poolProps.location.id < NCARDS)
      need[p.poolProps.location.id] += round_up(p.bytesize);
    else if (t == CU_GRAPH_NODE_TYPE_GRAPH && real->cuGraphChildGraphNodeGetGraph &&
             real->cuGraphChildGraphNodeGetGraph(v[i], &child) == CUDA_SUCCESS)
      rc = walk(real, child, need, depth + 1);
  }
  free(v);
  return rc;
}

void vs_graph_mem_captured(const vs_real_table *real, CUgraph graph) {
  if (!real || !graph || !real->cuGraphGetNodes || !real->cuGraphNodeGetType) return;
  uint64_t need[NCARDS];
  memset(need, 0, sizeof need);
  vs_guard_enter();
  int rc = walk(real, graph, need, 0);
  vs_guard_leave();
  if (rc != 0) return;
  pthread_mutex_lock(&g_lock);
  graph_ent *e = tab_get(&g_graphs, (void *)graph);
  if (e) memcpy(e->need, need, sizeof need);   /* the whole graph: nodes added before the capture too */
  pthread_mutex_unlock(&g_lock);
}

/* A device-located allocation node of size bytes added to graph. */
static void node_added(CUgraph graph, const CUmemPoolProps *props, size_t bytes) {
  /* host-located graph memory is on no card: only device locations count */
  if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return;
  int card = props->location.id;
  if (card < 0 || card >= NCARDS) return;
  pthread_mutex_lock(&g_lock);
  graph_ent *e = tab_get(&g_graphs, (void *)graph);
  if (e) e->need[card] += round_up(bytes);
  pthread_mutex_unlock(&g_lock);
}

CUresult vs_hook_cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                        size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams) {
  VS_HOOK_ENTER(cuGraphAddMemAllocNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
  vs_guard_enter();
  CUresult r = real->cuGraphAddMemAllocNode(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
  vs_guard_leave();
  if (r == CUDA_SUCCESS && nodeParams) node_added(hGraph, &nodeParams->poolProps, nodeParams->bytesize);
  return r;
}

/* A child graph moved into graph (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE, the
 * only way a child may bring memory nodes): its allocation bytes are the
 * parent's now, and its handle the parent's. */
static void child_moved(CUgraph graph, CUgraph child) {
  pthread_mutex_lock(&g_lock);
  graph_ent *c = tab_find(&g_graphs, (void *)child);
  uint64_t need[NCARDS];
  if (c) memcpy(need, c->need, sizeof need);
  tab_drop(&g_graphs, (void *)child);
  graph_ent *e = c ? tab_get(&g_graphs, (void *)graph) : NULL;
  for (int k = 0; e && k < NCARDS; k++) e->need[k] += need[k];
  pthread_mutex_unlock(&g_lock);
}

/* What a generic node adds: an allocation node, or a child graph moved in. */
static void generic_added(CUgraph graph, const CUgraphNodeParams *p) {
  if (p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) node_added(graph, &p->alloc.poolProps, p->alloc.bytesize);
  else if (p->type == CU_GRAPH_NODE_TYPE_GRAPH && p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
    child_moved(graph, p->graph.graph);
}

/* The generic node functions (CUDA 12.2, and 12.3's with edge data) add
 * allocation nodes too, and child graphs. */
CUresult vs_hook_cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                size_t numDependencies, CUgraphNodeParams *nodeParams) {
  VS_HOOK_ENTER(cuGraphAddNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
  vs_guard_enter();
  CUresult r = real->cuGraphAddNode(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
  vs_guard_leave();
  if (r == CUDA_SUCCESS && nodeParams) generic_added(hGraph, nodeParams);
  return r;
}

CUresult vs_hook_cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                   CUgraphNodeParams *nodeParams) {
  VS_HOOK_ENTER(cuGraphAddNode_v2, (phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams));
  vs_guard_enter();
  CUresult r = real->cuGraphAddNode_v2(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
  vs_guard_leave();
  if (r == CUDA_SUCCESS && nodeParams) generic_added(hGraph, nodeParams);
  return r;
}

CUresult vs_hook_cuGraphDestroy(CUgraph hGraph) {
  VS_HOOK_ENTER(cuGraphDestroy, (hGraph));
  vs_guard_enter();
  CUresult r = real->cuGraphDestroy(hGraph);
  vs_guard_leave();
  if (r == CUDA_SUCCESS) {
    pthread_mutex_lock(&g_lock);
    tab_drop(&g_graphs, (void *)hGraph);
    pthread_mutex_unlock(&g_lock);
  }
  return r;
}

/* An executable graph takes its graph's allocation bytes. */
static void instantiated(CUresult r, CUgraphExec *exec, CUgraph graph) {
  if (r != CUDA_SUCCESS || !exec) return;
  pthread_mutex_lock(&g_lock);
  graph_ent *g = tab_find(&g_graphs, (void *)graph);
  uint64_t need[NCARDS];
  if (g) memcpy(need, g->need, sizeof need);
  tab_drop(&g_execs, (void *)*exec);   /* a handle the driver reused */
  if (g) {
    graph_ent *e = tab_get(&g_execs, (void *)*exec);
    if (e) memcpy(e->need, need, sizeof need);
  }
  pthread_mutex_unlock(&g_lock);
}

#define INSTANTIATE_BODY(name, params, args, per_thread)                                  \
  CUresult vs_hook_##name params {                                                        \
    VS_HOOK_ENTER(name, args);                                                            \
    if (per_thread) vs_stream_order_ptds("the program used the per-thread default stream (" #name ")"); \
    vs_guard_enter();                                                                     \
    CUresult r = real->name args;                                                         \
    vs_guard_leave();                                                                     \
    instantiated(r, phGraphExec, hGraph);                                                 \
    return r;                                                                             \
  }
INSTANTIATE_BODY(cuGraphInstantiateWithFlags, (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags),
                 (phGraphExec, hGraph, flags), 0)
INSTANTIATE_BODY(cuGraphInstantiate_v2,
                 (CUgraphExec * phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize),
                 (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize), 0)
INSTANTIATE_BODY(cuGraphInstantiate,
                 (CUgraphExec * phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize),
                 (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize), 0)
#undef INSTANTIATE_BODY

CUresult vs_hook_cuGraphExecDestroy(CUgraphExec hGraphExec) {
  VS_HOOK_ENTER(cuGraphExecDestroy, (hGraphExec));
  vs_guard_enter();
  CUresult r = real->cuGraphExecDestroy(hGraphExec);
  vs_guard_leave();
  if (r == CUDA_SUCCESS) {
    pthread_mutex_lock(&g_lock);
    tab_drop(&g_execs, (void *)hGraphExec);
    pthread_mutex_unlock(&g_lock);
  }
  return r;
}

/* The growth running h (an executable graph in g_execs, or a graph in
 * g_graphs about to be instantiated) may cause on each card: its
 * allocation bytes less what the pool reserves and does not use (0 where
 * it has none). */
static void growth(const vs_real_table *real, graph_tab *tab, void *h, uint64_t grow[NCARDS]) {
  pthread_mutex_lock(&g_lock);
  graph_ent *e = tab_find(tab, h);
  uint64_t need[NCARDS];
  if (e) memcpy(need, e->need, sizeof need);
  else memset(need, 0, sizeof need);
  pthread_mutex_unlock(&g_lock);
  for (int c = 0; c < NCARDS; c++) {
    grow[c] = 0;
    if (!need[c]) continue;
    uint64_t used = 0, reserved = 0;
    if (read_attr(real, c, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used) ||
        read_attr(real, c, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) || reserved < used)
      used = reserved = 0;
    uint64_t spare = reserved - used;
    grow[c] = need[c] > spare ? round_up(need[c] - spare) : 0;
  }
}

/* Admits each card's growth (the arena's cache on the card given back
 * first when refused; on_limit = wait waits); CUDA_ERROR_OUT_OF_MEMORY
 * with nothing charged when a refusal stands. */
static CUresult admit(const uint64_t grow[NCARDS]) {
  for (int c = 0; c < NCARDS; c++) {
    if (!grow[c]) continue;
    CUresult q = vs_quota_charge(c, grow[c]);
    if (q == CUDA_ERROR_OUT_OF_MEMORY) {
      vs_arena_glue_trim_card(c, 0);
      q = vs_quota_charge(c, grow[c]);
    }
    uint64_t deadline = 0;
    while (q == CUDA_ERROR_OUT_OF_MEMORY && vs_quota_wait(c, grow[c], &deadline)) q = vs_quota_charge(c, grow[c]);
    if (q != CUDA_SUCCESS) {
      for (int u = 0; u < c; u++)
        if (grow[u]) vs_quota_uncharge(u, grow[u]);
      return q;
    }
  }
  return CUDA_SUCCESS;
}

/* After a call that may have grown the graph pool (r its result, grow[]
 * what was admitted for it): each card's charge settles on what the pool
 * reserves. */
static void settle_after(const vs_real_table *real, const uint64_t grow[NCARDS], CUresult r) {
  pthread_mutex_lock(&g_lock);
  for (int c = 0; c < NCARDS; c++) {
    if (grow[c]) atomic_store_explicit(&g_used[c], 1, memory_order_relaxed);
    if (grow[c] || atomic_load_explicit(&g_used[c], memory_order_relaxed)) settle(real, c, grow[c]);
  }
  pthread_mutex_unlock(&g_lock);
  /* A captured graph's allocation nodes were not seen: the pool of the
   * current context's device, read once it holds something. */
  CUdevice dev = -1;
  if (r == CUDA_SUCCESS && real->cuCtxGetDevice) {
    vs_guard_enter();
    if (real->cuCtxGetDevice(&dev) != CUDA_SUCCESS) dev = -1;
    vs_guard_leave();
  }
  uint64_t now;
  if (dev >= 0 && dev < NCARDS && !atomic_load_explicit(&g_used[dev], memory_order_relaxed) &&
      !read_attr(real, (int)dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &now) && now) {
    atomic_store_explicit(&g_used[dev], 1, memory_order_relaxed);
    vs_graph_mem_refresh(real, (int)dev);
  }
}

/* A launch, or an upload (which backs the graph's allocations from the
 * pool ahead of its launch: the pool grows as for one). */
static CUresult launch(const vs_real_table *real, CUresult (*fn)(CUgraphExec, CUstream), CUgraphExec exec,
                       CUstream stream) {
  uint64_t grow[NCARDS];
  growth(real, &g_execs, (void *)exec, grow);
  CUresult q = admit(grow);
  if (q != CUDA_SUCCESS) return q;
  vs_guard_enter();
  CUresult r = fn(exec, stream);
  vs_guard_leave();
  settle_after(real, grow, r);
  return r;
}

/* With CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD the instantiation uploads: its
 * growth is admitted first, as an upload's. */
static CUresult instantiate_with_params(const vs_real_table *real,
                                        CUresult (*fn)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *),
                                        CUgraphExec *phGraphExec, CUgraph hGraph,
                                        CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
  uint64_t grow[NCARDS] = {0};
  int upload = params && (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
  if (upload) {
    growth(real, &g_graphs, (void *)hGraph, grow);
    CUresult q = admit(grow);
    if (q != CUDA_SUCCESS) {
      params->hErrNode_out = NULL;
      params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
      return q;
    }
  }
  vs_guard_enter();
  CUresult r = fn(phGraphExec, hGraph, params);
  vs_guard_leave();
  instantiated(r, phGraphExec, hGraph);
  if (upload) settle_after(real, grow, r);
  return r;
}

CUresult vs_hook_cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
  VS_HOOK_ENTER(cuGraphInstantiateWithParams, (phGraphExec, hGraph, instantiateParams));
  return instantiate_with_params(real, real->cuGraphInstantiateWithParams, phGraphExec, hGraph, instantiateParams);
}

CUresult vs_hook_cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
  VS_HOOK_ENTER(cuGraphInstantiateWithParams_ptsz, (phGraphExec, hGraph, instantiateParams));
  vs_stream_order_ptds("the program used the per-thread default stream (cuGraphInstantiateWithParams_ptsz)");
  return instantiate_with_params(real, real->cuGraphInstantiateWithParams_ptsz, phGraphExec, hGraph,
                                 instantiateParams);
}

CUresult vs_hook_cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  VS_HOOK_ENTER(cuGraphLaunch, (hGraphExec, hStream));
  return launch(real, real->cuGraphLaunch, hGraphExec, hStream);
}

CUresult vs_hook_cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  VS_HOOK_ENTER(cuGraphLaunch_ptsz, (hGraphExec, hStream));
  vs_stream_order_ptds("the program used the per-thread default stream (cuGraphLaunch_ptsz)");
  return launch(real, real->cuGraphLaunch_ptsz, hGraphExec, hStream);
}

CUresult vs_hook_cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  VS_HOOK_ENTER(cuGraphUpload, (hGraphExec, hStream));
  return launch(real, real->cuGraphUpload, hGraphExec, hStream);
}

CUresult vs_hook_cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  VS_HOOK_ENTER(cuGraphUpload_ptsz, (hGraphExec, hStream));
  vs_stream_order_ptds("the program used the per-thread default stream (cuGraphUpload_ptsz)");
  return launch(real, real->cuGraphUpload_ptsz, hGraphExec, hStream);
}

/* What the pool gave back leaves the tenant's charge. */
CUresult vs_hook_cuDeviceGraphMemTrim(CUdevice device) {
  VS_HOOK_ENTER(cuDeviceGraphMemTrim, (device));
  vs_guard_enter();
  CUresult r = real->cuDeviceGraphMemTrim(device);
  vs_guard_leave();
  if (r == CUDA_SUCCESS) vs_graph_mem_refresh(real, (int)device);
  return r;
}

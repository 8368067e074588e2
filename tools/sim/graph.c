/* CUDA graphs, as far as their memory nodes go (issue 22).
 *
 * A graph here is a list of memory-allocation and memory-free nodes (added
 * by their own functions or by cuGraphAddNode); no other node kind is
 * modelled, nothing runs on the stream. What is modelled is the device's
 * graph memory pool, as the driver keeps it:
 *   - an allocation node gets its fixed address when it is added (a
 *     mapping of its own, uncharged: address space, not memory); the
 *     address is not a device record, so copies do not accept it;
 *   - cuGraphLaunch takes the graph's allocations from the device's graph
 *     pool: the pool reserves physical memory on the card (charged to the
 *     card like any allocation) when what it reserves and does not use is
 *     too little; the graph's free nodes give their bytes back to the pool,
 *     which keeps them reserved;
 *   - cuGraphUpload (and instantiation with CUDA_GRAPH_INSTANTIATE_FLAG_
 *     UPLOAD) backs the graph's allocations ahead of its launch: the pool
 *     grows as for a launch, nothing is in use;
 *   - an allocation no free node of the graph frees stays in use until the
 *     next launch of the same executable graph with
 *     CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH (without it that
 *     launch is CUDA_ERROR_INVALID_VALUE, as the driver says) or the end
 *     of the context (freeing it with cuMemFree/cuMemFreeAsync is not
 *     modelled);
 *   - the reserved memory goes back to the card on cuDeviceGraphMemTrim
 *     (what is not in use) and when the context that launched ends (all
 *     of it);
 *   - cuDeviceGetGraphMemAttribute answers the pool's USED/RESERVED
 *     CURRENT/HIGH; cuDeviceSetGraphMemAttribute resets a HIGH (value 0)
 *     to the current value.
 * Sizes are rounded up to the VMM granule (2 MiB), as the driver maps. */
#include "sim_internal.h"
#include <stdlib.h>
#include <string.h>

#define GRAPH_MAGIC 0x47524150u
#define GEXEC_MAGIC 0x47455845u

/* An allocation node's address range, held by its graph, by each
 * executable graph made from it and by each launched allocation in use:
 * cuda.h keeps the address fixed across instantiations and launches, and an
 * allocation no free node frees lives until the program frees it, after its
 * graphs are gone. Released with the last reference. */
struct gback {
    sim_os_obj obj;
    uintptr_t dptr;
    size_t len;
    int refs;           /* atomic */
};
static struct gback *gback_get(struct gback *b)
{
    __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
    return b;
}
static void gback_put(struct gback *b)
{
    if (!b || __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    sim_backing_destroy(b->obj, (void *)b->dptr, b->len);
    free(b);
}

struct gnode {
    int is_free;        /* a free node; else an allocation node (or a child graph's node) */
    int is_child;       /* a child graph's node: its memory nodes moved into the parent */
    int dev;
    size_t charge;      /* allocation: bytes taken from the graph pool */
    size_t bytesize;    /* allocation: as asked */
    uintptr_t dptr;
    struct gback *back; /* allocation: its address range */
    int freed;          /* allocation: a free node of the graph frees it */
};

struct sim_graph {
    uint32_t magic;
    struct sim_graph *grave_next;   /* destroyed: kept on the graveyard list */
    struct gnode **nodes;
    size_t n, cap;
};

struct sim_gexec {
    uint32_t magic;
    struct sim_gexec *grave_next;   /* destroyed: kept on the graveyard list */
    unsigned long long flags;
    uint64_t need[SIM_MAX_CARDS];   /* bytes of its allocation nodes, per device */
    uint64_t keep[SIM_MAX_CARDS];   /* of which no free node of the graph frees */
    uint64_t held[SIM_MAX_CARDS];   /* still in use from its last launch */
    uint64_t epoch[SIM_MAX_CARDS];  /* the pool's epoch of `held` */
    struct kept { struct gback *back; int dev; size_t charge; int freed; } *kept;   /* its allocation nodes */
    size_t nkept;
};

/* Allocations of launched graphs that no free node of theirs freed: in use
 * until the program passes them to cuMemFreeAsync or cuMemFree (cuda.h,
 * cuGraphAddMemAllocNode), an auto-free relaunch of their graph, or the end
 * of the pool's context (an entry of an older epoch is void). */
struct glive {
    struct gback *back;    /* a reference of its own */
    int dev;
    size_t charge;
    struct sim_gexec *e;   /* never freed while handed out (destroyed ones stay on the graveyard) */
    uint64_t epoch;
};
static struct glive *glive;
static size_t nglive, capglive;

/* The graph memory pool of one device. */
struct gpool {
    uint64_t reserved, reserved_high, used, used_high;
    struct sim_ctx *ctx;   /* the context that launched into it last: its end releases the pool */
    uint64_t epoch;        /* bumped when the pool is released: older `held` counts are void */
};

static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;   /* guards gpools and every exec */
static struct gpool gpools[SIM_MAX_CARDS];
/* Destroyed graphs and executable graphs are never freed, only marked
 * (magic 0) and kept here: a handle used after its destroy (a double
 * destroy, a launch of a destroyed graph) then reads memory that is still
 * the sim's and gets CUDA_ERROR_INVALID_VALUE, where a freed struct would
 * be a use after free. A few hundred bytes per destroyed graph; under
 * graph_lock. */
static struct sim_graph *graph_grave;
static struct sim_gexec *gexec_grave;

static struct sim_graph *graph_get(CUgraph h)
{
    struct sim_graph *g = (struct sim_graph *)h;
    return g && g->magic == GRAPH_MAGIC ? g : NULL;
}

static struct sim_gexec *exec_get(CUgraphExec h)
{
    struct sim_gexec *e = (struct sim_gexec *)h;
    return e && e->magic == GEXEC_MAGIC ? e : NULL;
}

CUresult sim_graph_new(CUgraph *phGraph)
{
    struct sim_graph *g = calloc(1, sizeof *g);
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = GRAPH_MAGIC;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    SIM_COUNT(cuGraphCreate);
    SIM_REQUIRE_INIT();
    if (!phGraph || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    return sim_graph_new(phGraph);
}

static CUresult graph_destroy(CUgraph hGraph)
{
    struct sim_graph *g = graph_get(hGraph);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    g->magic = 0;
    for (size_t i = 0; i < g->n; i++) {
        struct gnode *x = g->nodes[i];
        if (!x->is_free && !x->is_child) gback_put(x->back);
        free(x);
    }
    free(g->nodes);
    g->nodes = NULL;
    g->n = g->cap = 0;
    pthread_mutex_lock(&graph_lock);
    g->grave_next = graph_grave;
    graph_grave = g;
    pthread_mutex_unlock(&graph_lock);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphDestroy(CUgraph hGraph)
{
    SIM_COUNT(cuGraphDestroy);
    SIM_REQUIRE_INIT();
    return graph_destroy(hGraph);
}

void sim_graph_drop(CUgraph g) { (void)graph_destroy(g); }

/* Room in g for `more` nodes; 0, or -1 out of host memory. */
static int graph_room(struct sim_graph *g, size_t more)
{
    if (g->n + more <= g->cap) return 0;
    size_t nc = g->cap ? g->cap * 2 : 8;
    while (nc < g->n + more) nc *= 2;
    struct gnode **nv = realloc(g->nodes, nc * sizeof *nv);
    if (!nv) return -1;
    g->nodes = nv;
    g->cap = nc;
    return 0;
}

static CUresult add_node(struct sim_graph *g, struct gnode *x, CUgraphNode *out)
{
    if (graph_room(g, 1)) return CUDA_ERROR_OUT_OF_MEMORY;
    g->nodes[g->n++] = x;
    *out = (CUgraphNode)x;
    return CUDA_SUCCESS;
}

static CUresult add_alloc(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                          size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    SIM_REQUIRE_INIT();
    struct sim_graph *g = graph_get(hGraph);
    if (!phGraphNode || !g || !p || (numDependencies && !dependencies) || p->bytesize == 0 ||
        p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        p->poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE || p->poolProps.location.id < 0 ||
        p->poolProps.location.id >= sim_cfg.ncards)
        return CUDA_ERROR_INVALID_VALUE;
    struct gnode *x = calloc(1, sizeof *x);
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    x->dev = p->poolProps.location.id;
    x->bytesize = p->bytesize;
    x->charge = SIM_ROUND_UP(p->bytesize, SIM_VMM_GRANULE);
    struct gback *b = calloc(1, sizeof *b);
    void *m = NULL;
    CUresult r = b ? sim_backing_create(x->charge, sim_next_id(), x->dev, &b->obj, &m) : CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        b->dptr = x->dptr = (uintptr_t)m;
        b->len = x->charge;
        b->refs = 1;
        x->back = b;
        r = add_node(g, x, phGraphNode);
        if (r != CUDA_SUCCESS) gback_put(b);
    } else {
        free(b);
    }
    if (r != CUDA_SUCCESS) {
        free(x);
        return r;
    }
    p->dptr = (CUdeviceptr)x->dptr;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                        size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    SIM_COUNT(cuGraphAddMemAllocNode);
    return add_alloc(phGraphNode, hGraph, dependencies, numDependencies, p);
}

/* Only an allocation of the same graph, freed once (the driver also takes
 * allocations of other graphs: not modelled). */
static CUresult add_free(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                         size_t numDependencies, CUdeviceptr dptr)
{
    SIM_REQUIRE_INIT();
    struct sim_graph *g = graph_get(hGraph);
    if (!phGraphNode || !g || (numDependencies && !dependencies)) return CUDA_ERROR_INVALID_VALUE;
    struct gnode *a = NULL;
    for (size_t i = 0; i < g->n; i++)
        if (!g->nodes[i]->is_free && !g->nodes[i]->is_child && g->nodes[i]->dptr == (uintptr_t)dptr) a = g->nodes[i];
    if (!a || a->freed) return CUDA_ERROR_INVALID_VALUE;
    struct gnode *x = calloc(1, sizeof *x);
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    x->is_free = 1;
    x->dev = a->dev;
    x->dptr = a->dptr;
    CUresult r = add_node(g, x, phGraphNode);
    if (r != CUDA_SUCCESS) {
        free(x);
        return r;
    }
    a->freed = 1;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       size_t numDependencies, CUdeviceptr dptr)
{
    SIM_COUNT(cuGraphAddMemFreeNode);
    return add_free(phGraphNode, hGraph, dependencies, numDependencies, dptr);
}

/* A stream-ordered allocation captured into g: an allocation node of the
 * device's default pool kind; its free, a free node. */
CUresult sim_graph_capture_alloc(CUgraph g, int dev, size_t bytes, CUdeviceptr *dptr)
{
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = dev;
    p.bytesize = bytes;
    CUgraphNode n;
    CUresult r = add_alloc(&n, g, NULL, 0, &p);
    if (r == CUDA_SUCCESS) *dptr = p.dptr;
    return r;
}

CUresult sim_graph_capture_free(CUgraph g, CUdeviceptr dptr)
{
    CUgraphNode n;
    return add_free(&n, g, NULL, 0, dptr);
}

/* The generic node API (CUDA 12.2; _v2 with edge data, 12.3): only the
 * memory node kinds are modelled, the same as their own functions. */
/* A child graph node: the child's memory nodes move into the parent
 * (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE: the child's handle is the parent's
 * from now on, void to the program); a child with memory nodes cannot be
 * cloned (cuda.h), and one without any adds nothing the sim models. */
static CUresult add_child(CUgraphNode *out, CUgraph hGraph, const CUgraphNode *dependencies, size_t numDependencies,
                          const CUDA_CHILD_GRAPH_NODE_PARAMS *p)
{
    struct sim_graph *g = graph_get(hGraph), *child = graph_get(p->graph);
    if (!out || !g || !child || child == g || (numDependencies && !dependencies) ||
        (p->ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE && p->ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) ||
        (p->ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE && child->n))
        return CUDA_ERROR_INVALID_VALUE;
    struct gnode *x = calloc(1, sizeof *x);
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    x->is_child = 1;
    if (graph_room(g, child->n + 1)) {
        free(x);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (p->ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) {
        for (size_t i = 0; i < child->n; i++) g->nodes[g->n++] = child->nodes[i];
        child->n = 0;
        child->magic = 0;   /* the parent's now */
        free(child->nodes);
        child->nodes = NULL;
        pthread_mutex_lock(&graph_lock);
        child->grave_next = graph_grave;
        graph_grave = child;
        pthread_mutex_unlock(&graph_lock);
    }
    return add_node(g, x, out);   /* room was made above */
}

static CUresult add_node_generic(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                 size_t numDependencies, CUgraphNodeParams *np)
{
    SIM_REQUIRE_INIT();
    if (!np) return CUDA_ERROR_INVALID_VALUE;
    if (np->type == CU_GRAPH_NODE_TYPE_GRAPH)
        return add_child(phGraphNode, hGraph, dependencies, numDependencies, &np->graph);
    if (np->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
        return add_free(phGraphNode, hGraph, dependencies, numDependencies, np->free.dptr);
    if (np->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_NOT_SUPPORTED;
    CUDA_MEM_ALLOC_NODE_PARAMS p = {.poolProps = np->alloc.poolProps, .accessDescs = np->alloc.accessDescs,
                                    .accessDescCount = np->alloc.accessDescCount, .bytesize = np->alloc.bytesize};
    CUresult r = add_alloc(phGraphNode, hGraph, dependencies, numDependencies, &p);
    if (r == CUDA_SUCCESS) np->alloc.dptr = p.dptr;
    return r;
}

SIM_API CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    SIM_COUNT(cuGraphAddNode);
    return add_node_generic(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

SIM_API CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                   CUgraphNodeParams *nodeParams)
{
    SIM_COUNT(cuGraphAddNode_v2);
    (void)dependencyData;   /* edges carry no memory */
    return add_node_generic(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

#define KNOWN_INSTANTIATE_FLAGS                                                              \
    (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | \
     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

/* ---- a graph's nodes, as the program reads them back (the shim counts the
 * memory nodes of a graph made by stream capture so). A child graph moved
 * in is flattened here: its nodes are the parent's, beside a node of type
 * CU_GRAPH_NODE_TYPE_GRAPH whose graph cannot be asked for
 * (cuGraphChildGraphNodeGetGraph stays CUDA_ERROR_NOT_SUPPORTED). Node
 * handles are not checked: a node of a destroyed graph is the program's
 * fault, as for the driver's other node calls here. ---- */
SIM_API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    SIM_COUNT(cuGraphGetNodes);
    SIM_REQUIRE_INIT();
    struct sim_graph *g = graph_get(hGraph);
    if (!g || !numNodes) return CUDA_ERROR_INVALID_VALUE;
    if (nodes) {   /* cuda.h: entries past the graph's nodes are NULL, and the count is what was given */
        for (size_t i = 0; i < *numNodes; i++) nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
        if (*numNodes > g->n) *numNodes = g->n;
    } else {
        *numNodes = g->n;
    }
    return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    SIM_COUNT(cuGraphNodeGetType);
    SIM_REQUIRE_INIT();
    const struct gnode *x = (const struct gnode *)hNode;
    if (!x || !type) return CUDA_ERROR_INVALID_VALUE;
    *type = x->is_child  ? CU_GRAPH_NODE_TYPE_GRAPH
            : x->is_free ? CU_GRAPH_NODE_TYPE_MEM_FREE
                         : CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    SIM_COUNT(cuGraphMemAllocNodeGetParams);
    SIM_REQUIRE_INIT();
    const struct gnode *x = (const struct gnode *)hNode;
    if (!x || !params_out || x->is_child || x->is_free) return CUDA_ERROR_INVALID_VALUE;
    memset(params_out, 0, sizeof *params_out);
    params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params_out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params_out->poolProps.location.id = x->dev;
    params_out->bytesize = x->bytesize;
    params_out->dptr = (CUdeviceptr)x->dptr;
    return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *out, CUgraph hGraph, unsigned long long flags)
{
    SIM_REQUIRE_INIT();
    struct sim_graph *g = graph_get(hGraph);
    if (!out || !g || (flags & ~(unsigned long long)KNOWN_INSTANTIATE_FLAGS)) return CUDA_ERROR_INVALID_VALUE;
    struct sim_gexec *e = calloc(1, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = GEXEC_MAGIC;
    e->flags = flags;
    e->kept = calloc(g->n ? g->n : 1, sizeof *e->kept);
    if (!e->kept) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < g->n; i++) {
        struct gnode *x = g->nodes[i];
        if (x->is_free || x->is_child) continue;
        e->need[x->dev] += x->charge;
        if (!x->freed) e->keep[x->dev] += x->charge;
        struct kept k = {gback_get(x->back), x->dev, x->charge, x->freed};
        e->kept[e->nkept++] = k;
    }
    *out = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    SIM_COUNT(cuGraphInstantiateWithFlags);
    return instantiate(phGraphExec, hGraph, flags);
}
/* The CUDA 10 and 11 signatures (an error node and log): no errors to tell. */
SIM_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                    char *logBuffer, size_t bufferSize)
{
    SIM_COUNT(cuGraphInstantiate);
    if (phErrorNode) *phErrorNode = NULL;
    if (logBuffer && bufferSize) logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph, 0);
}
SIM_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize)
{
    SIM_COUNT(cuGraphInstantiate_v2);
    if (phErrorNode) *phErrorNode = NULL;
    if (logBuffer && bufferSize) logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph, 0);
}

/* e's references to its nodes' address ranges (its destroy). */
static void exec_drop_backs(struct sim_gexec *e)
{
    for (size_t k = 0; k < e->nkept; k++) gback_put(e->kept[k].back);
    free(e->kept);
    e->kept = NULL;
    e->nkept = 0;
}

SIM_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    SIM_COUNT(cuGraphExecDestroy);
    SIM_REQUIRE_INIT();
    pthread_mutex_lock(&graph_lock);
    struct sim_gexec *e = exec_get(hGraphExec);
    if (e) {
        e->magic = 0;   /* what it holds stays in use (until freed, or the context's end) */
        exec_drop_backs(e);
        e->grave_next = gexec_grave;
        gexec_grave = e;
    }
    pthread_mutex_unlock(&graph_lock);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* graph_lock held: e's allocations in use go (an auto-free relaunch), with
 * every entry of an older epoch; then, for a launch, its kept ones come in.
 * 0, or -1 out of host memory (nothing changed). */
static int glive_relaunch(struct sim_gexec *e, int add)
{
    if (add && nglive + e->nkept > capglive) {
        size_t nc = capglive ? capglive * 2 : 16;
        while (nc < nglive + e->nkept) nc *= 2;
        struct glive *nv = realloc(glive, nc * sizeof *nv);
        if (!nv) return -1;
        glive = nv;
        capglive = nc;
    }
    size_t j = 0;
    for (size_t i = 0; i < nglive; i++)
        if (glive[i].e != e && glive[i].epoch == gpools[glive[i].dev].epoch) glive[j++] = glive[i];
        else gback_put(glive[i].back);
    nglive = j;
    for (size_t k = 0; add && k < e->nkept; k++) {
        if (e->kept[k].freed) continue;
        struct glive l = {gback_get(e->kept[k].back), e->kept[k].dev, e->kept[k].charge, e,
                          gpools[e->kept[k].dev].epoch};
        glive[nglive++] = l;
    }
    return 0;
}

int sim_graph_free(CUdeviceptr dptr)
{
    pthread_mutex_lock(&graph_lock);
    int found = -1;
    for (size_t i = 0; i < nglive && found < 0; i++) {
        struct glive *l = &glive[i];
        if (l->back->dptr != (uintptr_t)dptr || l->epoch != gpools[l->dev].epoch) continue;
        gpools[l->dev].used -= l->charge;   /* back to the pool, still reserved */
        l->e->held[l->dev] -= l->charge;
        gback_put(l->back);
        glive[i] = glive[--nglive];
        found = 0;
    }
    pthread_mutex_unlock(&graph_lock);
    return found;
}

/* graph_lock held: what e still holds in the pool of dev. */
static uint64_t held_of(const struct sim_gexec *e, int dev)
{
    return e->epoch[dev] == gpools[dev].epoch ? e->held[dev] : 0;
}

/* graph_lock held: charges each device's growth for e's launch; 0, or the
 * device that could not grow (nothing charged then). grow[] receives it. */
static int charge_growth(const struct sim_gexec *e, int auto_free, uint64_t grow[SIM_MAX_CARDS])
{
    for (int d = 0; d < sim_cfg.ncards; d++) {
        grow[d] = 0;
        if (!e->need[d]) continue;
        struct gpool *p = &gpools[d];
        uint64_t used = p->used - (auto_free ? held_of(e, d) : 0);
        uint64_t spare = p->reserved - used;
        grow[d] = e->need[d] > spare ? e->need[d] - spare : 0;
        if (grow[d] && sim_charge(d, grow[d]) != CUDA_SUCCESS) {
            for (int u = 0; u < d; u++) sim_uncharge(u, grow[u]);
            return d + 1;
        }
    }
    return 0;
}

/* graph_lock held, e valid: charges the growth e's launch (or upload)
 * needs, retrying once after the pools gave back their cached memory (as
 * before any failing allocation). *pe is e again afterwards, NULL when the
 * program destroyed it meanwhile; CUDA_ERROR_OUT_OF_MEMORY with nothing
 * charged when the card cannot. */
static CUresult charge_launch(CUgraphExec h, struct sim_gexec **pe, int auto_free, uint64_t grow[SIM_MAX_CARDS])
{
    if (!charge_growth(*pe, auto_free, grow)) return CUDA_SUCCESS;
    pthread_mutex_unlock(&graph_lock);
    sim_pools_sync_trim();
    pthread_mutex_lock(&graph_lock);
    *pe = exec_get(h);
    if (!*pe) return CUDA_ERROR_INVALID_VALUE;
    return charge_growth(*pe, auto_free, grow) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

/* graph_lock held: the pool of each device e uses grew by grow[] for ctx. */
static void pools_grew(const struct sim_gexec *e, const uint64_t grow[SIM_MAX_CARDS], struct sim_ctx *ctx)
{
    for (int d = 0; d < sim_cfg.ncards; d++) {
        if (!e->need[d]) continue;
        struct gpool *p = &gpools[d];
        p->reserved += grow[d];
        if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
        p->ctx = ctx;
    }
}

/* launch: run the graph's memory nodes; else upload: back its allocations
 * from the pool ahead of a launch (the pool reserves, nothing is in use). */
static CUresult launch_or_upload(CUgraphExec hGraphExec, CUstream hStream, int launch)
{
    SIM_REQUIRE_INIT();
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (!sim_stream_get(hStream)) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&graph_lock);
    struct sim_gexec *e = exec_get(hGraphExec);
    if (!e) {
        pthread_mutex_unlock(&graph_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    int auto_free = (e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
    for (int d = 0; d < sim_cfg.ncards && launch; d++)
        if (held_of(e, d) && !auto_free) {   /* cuda.h: its allocations must be freed before */
            pthread_mutex_unlock(&graph_lock);
            return CUDA_ERROR_INVALID_VALUE;
        }
    uint64_t grow[SIM_MAX_CARDS];
    r = charge_launch(hGraphExec, &e, auto_free, grow);
    if (r == CUDA_SUCCESS && launch && glive_relaunch(e, 1) != 0) {
        for (int d = 0; d < sim_cfg.ncards; d++) sim_uncharge(d, grow[d]);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&graph_lock);
        return r;
    }
    pools_grew(e, grow, ctx);
    for (int d = 0; d < sim_cfg.ncards && launch; d++) {
        if (!e->need[d]) continue;
        struct gpool *p = &gpools[d];
        if (auto_free) p->used -= held_of(e, d);
        if (p->used + e->need[d] > p->used_high) p->used_high = p->used + e->need[d];
        p->used += e->keep[d];   /* the graph's free nodes gave the rest back to the pool */
        e->held[d] = e->keep[d];
        e->epoch[d] = p->epoch;
    }
    pthread_mutex_unlock(&graph_lock);
    return CUDA_SUCCESS;
}

static CUresult launch(CUgraphExec hGraphExec, CUstream hStream) { return launch_or_upload(hGraphExec, hStream, 1); }

SIM_API CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_COUNT(cuGraphUpload);
    return launch_or_upload(hGraphExec, hStream, 0);
}
SIM_API CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_COUNT(cuGraphUpload_ptsz);
    return launch_or_upload(hGraphExec, hStream, 0);
}

SIM_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_COUNT(cuGraphLaunch);
    return launch(hGraphExec, hStream);
}
SIM_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_COUNT(cuGraphLaunch_ptsz);
    return launch(hGraphExec, hStream);
}

/* Instantiation with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD uploads to
 * hUploadStream as cuGraphUpload does; an upload the card cannot back
 * fails the call, the executable graph destroyed. */
static CUresult instantiate_with_params(CUgraphExec *out, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *ip)
{
    SIM_REQUIRE_INIT();
    if (!ip) return CUDA_ERROR_INVALID_VALUE;
    ip->hErrNode_out = NULL;
    ip->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
    CUresult r = instantiate(out, hGraph, ip->flags);
    if (r == CUDA_SUCCESS && (ip->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)) {
        r = launch_or_upload(*out, ip->hUploadStream, 0);
        if (r != CUDA_SUCCESS) {   /* never handed out */
            exec_drop_backs((struct sim_gexec *)*out);
            free((struct sim_gexec *)*out);
            *out = NULL;
        }
    }
    if (r == CUDA_SUCCESS) ip->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    return r;
}

SIM_API CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    SIM_COUNT(cuGraphInstantiateWithParams);
    return instantiate_with_params(phGraphExec, hGraph, instantiateParams);
}
SIM_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    SIM_COUNT(cuGraphInstantiateWithParams_ptsz);
    return instantiate_with_params(phGraphExec, hGraph, instantiateParams);
}

SIM_API CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    SIM_COUNT(cuDeviceGraphMemTrim);
    SIM_REQUIRE_INIT();
    CHECK_DEV(device);
    pthread_mutex_lock(&graph_lock);
    struct gpool *p = &gpools[device];
    uint64_t back = p->reserved - p->used;
    p->reserved = p->used;
    pthread_mutex_unlock(&graph_lock);
    if (back) sim_uncharge(device, back);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    SIM_COUNT(cuDeviceGetGraphMemAttribute);
    SIM_REQUIRE_INIT();
    CHECK_DEV(device);
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&graph_lock);
    const struct gpool *p = &gpools[device];
    CUresult r = CUDA_SUCCESS;
    cuuint64_t v = 0;
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: v = p->used; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: v = p->used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: v = p->reserved_high; break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&graph_lock);
    if (r == CUDA_SUCCESS) *(cuuint64_t *)value = v;
    return r;
}

/* Only the high watermarks may be set, and only to 0: they become the
 * current values. */
SIM_API CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    SIM_COUNT(cuDeviceSetGraphMemAttribute);
    SIM_REQUIRE_INIT();
    CHECK_DEV(device);
    if (!value || *(const cuuint64_t *)value != 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&graph_lock);
    struct gpool *p = &gpools[device];
    CUresult r = CUDA_SUCCESS;
    if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH) p->used_high = p->used;
    else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) p->reserved_high = p->reserved;
    else r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&graph_lock);
    return r;
}

/* The end of ctx: a graph pool it launched into goes back to the card,
 * with every allocation still in use in it. */
void sim_graph_ctx_end(struct sim_ctx *ctx)
{
    for (int d = 0; d < SIM_MAX_CARDS; d++) {
        pthread_mutex_lock(&graph_lock);
        struct gpool *p = &gpools[d];
        uint64_t back = 0;
        if (p->ctx == ctx) {
            back = p->reserved;
            p->reserved = p->used = 0;
            p->ctx = NULL;
            p->epoch++;
            (void)glive_relaunch(NULL, 0);   /* its allocations in use go with it */
        }
        pthread_mutex_unlock(&graph_lock);
        if (back) sim_uncharge(d, back);
    }
}

void sim_graph_after_fork_child(void)
{
    pthread_mutex_init(&graph_lock, NULL);
    memset(gpools, 0, sizeof gpools);
    nglive = 0;   /* the parent's graphs' memory is not the child's */
}

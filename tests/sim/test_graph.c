/* Graphs' memory nodes (graph.c): the device's graph pool reserves memory
 * on the card at launch, keeps it after the graph's free nodes ran, gives
 * what it does not use back on cuDeviceGraphMemTrim and everything at the
 * context's end; the attributes; allocations a graph keeps (and the program
 * frees); uploads and
 * the generic node function; stream capture; the lookup of the entry
 * points. Cards: 1GiB, 1GiB. */
#include "sim_test.h"
#include <stdint.h>
#include <string.h>

static uint64_t gattr(int dev, CUgraphMem_attribute a)
{
    cuuint64_t v = 0;
    CU_OK(cuDeviceGetGraphMemAttribute(dev, a, &v));
    return v;
}

static CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(int dev, size_t n)
{
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof a);
    a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.poolProps.location.id = dev;
    a.bytesize = n;
    return a;
}

/* alloc n bytes on dev, then free it (free 1) or keep it */
static CUgraphExec one_alloc(int dev, size_t n, int free_it, unsigned long long flags)
{
    CUgraph g;
    CUgraphNode an, fn;
    CU_OK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS a = alloc_params(dev, n);
    CU_OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &a));
    assert_true(a.dptr != 0);
    if (free_it) CU_OK(cuGraphAddMemFreeNode(&fn, g, &an, 1, a.dptr));
    CUgraphExec e;
    CU_OK(cuGraphInstantiateWithFlags(&e, g, flags));
    CU_OK(cuGraphDestroy(g));
    return e;
}

static void pool_reserve_keep_trim(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUgraphExec e = one_alloc(0, 100 * MiB + 1, 1, 0);   /* rounded up to 2 MiB */
    assert_int_equal(vramsim_card_used(0), 0);                /* nothing before the launch */
    CU_OK(cuGraphLaunch(e, 0));
    CU_OK(cuStreamSynchronize(0));
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 102 * MiB);
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 102 * MiB);
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 102 * MiB);
    assert_int_equal(vramsim_card_used(0), 102 * MiB);        /* kept after the free node */
    CU_OK(cuGraphLaunch(e, 0));                               /* reuses it */
    assert_int_equal(vramsim_card_used(0), 102 * MiB);
    /* high watermarks reset to the current values; only to 0 */
    cuuint64_t zero = 0, one = 1;
    CU_OK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 0);
    CU_ERR(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuDeviceGraphMemTrim(0));
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 102 * MiB);
    assert_int_equal(vramsim_card_used(0), 0);
    CU_OK(cuGraphExecDestroy(e));
    CU_ERR(cuGraphExecDestroy(e), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuDeviceGraphMemTrim(7), CUDA_ERROR_INVALID_DEVICE);
}

static void kept_allocation_and_context_end(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUgraphExec k = one_alloc(0, 64 * MiB, 0, 0);
    CU_OK(cuGraphLaunch(k, 0));
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 64 * MiB);
    CU_ERR(cuGraphLaunch(k, 0), CUDA_ERROR_INVALID_VALUE);   /* not freed since */
    CU_OK(cuDeviceGraphMemTrim(0));                         /* in use: stays */
    assert_int_equal(vramsim_card_used(0), 64 * MiB);
    CUgraphExec af = one_alloc(0, 32 * MiB, 0, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
    CU_OK(cuGraphLaunch(af, 0));
    CU_OK(cuGraphLaunch(af, 0));   /* its last allocation freed on launch */
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 96 * MiB);
    assert_int_equal(vramsim_card_used(0), 96 * MiB);
    /* a graph larger than the card */
    CUgraphExec big = one_alloc(0, 2 * GiB, 1, 0);
    CU_ERR(cuGraphLaunch(big, 0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(vramsim_card_used(0), 96 * MiB);
    /* the context's end gives the graph pool back */
    CU_OK(cuDevicePrimaryCtxReset(0));
    assert_int_equal(vramsim_card_used(0), 0);
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
    sim_test_setup(0);
    CU_OK(cuGraphLaunch(k, 0));   /* its allocation went with the context */
    assert_int_equal(vramsim_card_used(0), 64 * MiB);
    CU_OK(cuDevicePrimaryCtxReset(0));
    assert_int_equal(vramsim_card_used(0), 0);
    CU_OK(cuGraphExecDestroy(k));
    CU_OK(cuGraphExecDestroy(af));
    CU_OK(cuGraphExecDestroy(big));
}

/* cuda.h (cuGraphAddMemAllocNode): an allocation no free node of its graph
 * frees is freed by cuMemFreeAsync or cuMemFree, also after its graphs are
 * destroyed; once freed its graph may run again. */
static void kept_allocation_freed_by_the_program(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUgraph g;
    CUgraphNode an;
    CU_OK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS a = alloc_params(0, 48 * MiB);
    CU_OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &a));
    CUgraphExec k;
    CU_OK(cuGraphInstantiateWithFlags(&k, g, 0));
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuGraphLaunch(k, 0));
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 48 * MiB);
    CU_OK(cuMemFreeAsync(a.dptr, 0));
    CU_OK(cuStreamSynchronize(0));
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    assert_int_equal(vramsim_card_used(0), 48 * MiB);          /* back in the pool, still reserved */
    CU_ERR(cuMemFreeAsync(a.dptr, 0), CUDA_ERROR_INVALID_VALUE);   /* freed once */
    CU_OK(cuGraphLaunch(k, 0));                                 /* freed: may run again, same address */
    CU_OK(cuGraphExecDestroy(k));                               /* the allocation outlives it */
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 48 * MiB);
    CU_OK(cuMemFree(a.dptr));
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    CU_ERR(cuMemFree(a.dptr), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuDeviceGraphMemTrim(0));
    assert_int_equal(vramsim_card_used(0), 0);
    CU_OK(cuDevicePrimaryCtxReset(0));
}

/* A graph's nodes read back: their number, kinds and an allocation's
 * parameters (what the shim counts in a graph made by stream capture). */
static void nodes_read_back(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUgraph g;
    CUgraphNode an, fn, v[4];
    CU_OK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS a = alloc_params(0, 3 * MiB + 5);
    CU_OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &a));
    CU_OK(cuGraphAddMemFreeNode(&fn, g, &an, 1, a.dptr));
    size_t n = 0;
    CU_OK(cuGraphGetNodes(g, NULL, &n));
    assert_int_equal(n, 2);
    n = 4;
    CU_OK(cuGraphGetNodes(g, v, &n));
    assert_int_equal(n, 2);
    assert_true(v[0] == an && v[1] == fn && v[2] == NULL && v[3] == NULL);
    CUgraphNodeType t;
    CU_OK(cuGraphNodeGetType(an, &t));
    assert_int_equal(t, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    CU_OK(cuGraphNodeGetType(fn, &t));
    assert_int_equal(t, CU_GRAPH_NODE_TYPE_MEM_FREE);
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    CU_OK(cuGraphMemAllocNodeGetParams(an, &p));
    assert_int_equal(p.bytesize, 3 * MiB + 5);
    assert_true(p.dptr == a.dptr && p.poolProps.location.id == 0 &&
                p.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE);
    CU_ERR(cuGraphMemAllocNodeGetParams(fn, &p), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuDevicePrimaryCtxReset(0));
}

/* cuGraphUpload and instantiation with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD
 * back the allocations before the launch (reserved, none in use); the
 * generic cuGraphAddNode adds the memory node kinds. */
static void upload_and_generic_nodes(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUgraph g;
    CU_OK(cuGraphCreate(&g, 0));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    np.alloc.bytesize = 40 * MiB;
    CUgraphNode an, fn;
    CU_OK(cuGraphAddNode(&an, g, NULL, NULL, 0, &np));
    assert_true(np.alloc.dptr != 0);
    CUdeviceptr p = np.alloc.dptr;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    np.free.dptr = p;
    CU_OK(cuGraphAddNode(&fn, g, &an, NULL, 1, &np));
    CU_ERR(cuGraphAddNode(&fn, g, &an, NULL, 1, &np), CUDA_ERROR_INVALID_VALUE);   /* freed twice */
    np.type = CU_GRAPH_NODE_TYPE_EMPTY;
    CU_ERR(cuGraphAddNode(&fn, g, NULL, NULL, 0, &np), CUDA_ERROR_NOT_SUPPORTED);
    CUgraphExec e;
    CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    CU_OK(cuGraphUpload(e, 0));
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 40 * MiB);
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    assert_int_equal(vramsim_card_used(0), 40 * MiB);
    CU_OK(cuGraphLaunch(e, 0));   /* takes what the upload reserved */
    assert_int_equal(vramsim_card_used(0), 40 * MiB);
    CU_OK(cuDeviceGraphMemTrim(0));
    assert_int_equal(vramsim_card_used(0), 0);
    /* instantiation that uploads; result_out says how it went */
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    memset(&ip, 0, sizeof ip);
    ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    ip.result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
    CUgraphExec u;
    CU_OK(cuGraphInstantiateWithParams(&u, g, &ip));
    assert_int_equal(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
    assert_int_equal(vramsim_card_used(0), 40 * MiB);
    CU_ERR(cuGraphInstantiateWithParams(&u, g, NULL), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuGraphUpload(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    /* an upload the card cannot back */
    CUgraphExec big = one_alloc(0, 2 * GiB, 1, 0);
    CU_ERR(cuGraphUpload(big, 0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(vramsim_card_used(0), 40 * MiB);
    CU_OK(cuDevicePrimaryCtxReset(0));
    assert_int_equal(vramsim_card_used(0), 0);
    CU_OK(cuGraphExecDestroy(e));
    CU_OK(cuGraphExecDestroy(u));
    CU_OK(cuGraphExecDestroy(big));
    /* a child graph: cloned only without memory nodes; moved, its memory
     * nodes are the parent's (and its handle too) */
    sim_test_setup(0);
    CUgraph parent, empty;
    CU_OK(cuGraphCreate(&parent, 0));
    CU_OK(cuGraphCreate(&empty, 0));
    CUgraphNodeParams cp;
    memset(&cp, 0, sizeof cp);
    cp.type = CU_GRAPH_NODE_TYPE_GRAPH;
    cp.graph.graph = g;
    cp.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
    CUgraphNode cn;
    CU_ERR(cuGraphAddNode(&cn, parent, NULL, NULL, 0, &cp), CUDA_ERROR_INVALID_VALUE);
    cp.graph.graph = empty;
    CU_OK(cuGraphAddNode(&cn, parent, NULL, NULL, 0, &cp));
    cp.graph.graph = g;
    cp.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    CU_OK(cuGraphAddNode(&cn, parent, NULL, NULL, 0, &cp));
    CU_ERR(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);   /* the parent's now */
    CU_OK(cuGraphInstantiateWithFlags(&e, parent, 0));
    CU_OK(cuGraphLaunch(e, 0));
    assert_int_equal(vramsim_card_used(0), 40 * MiB);
    CU_OK(cuGraphExecDestroy(e));
    CU_OK(cuGraphDestroy(parent));
    CU_OK(cuGraphDestroy(empty));
    CU_OK(cuDevicePrimaryCtxReset(0));
}

/* Stream capture (stream.c): stream-ordered allocations become the
 * graph's memory nodes; a sync while a stream captures is refused and
 * invalidates the capture. */
static void stream_capture(void **state)
{
    (void)state;
    sim_test_setup(0);
    CUstream s;
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUstreamCaptureStatus st;
    CU_ERR(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_ERR(cuStreamBeginCapture(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    CUgraph g = NULL;
    CU_ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_ERR(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_ILLEGAL_STATE);
    CU_OK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CUdeviceptr a, other;
    CU_OK(cuMemAllocAsync(&a, 20 * MiB, s));
    assert_int_equal(vramsim_card_used(0), 0);   /* a node: no memory until a launch */
    CU_OK(cuMemAlloc(&other, MiB));             /* memory outside the capture is allowed */
    CU_OK(cuMemFreeAsync(a, s));
    CU_OK(cuStreamEndCapture(s, &g));
    assert_non_null(g);
    CU_OK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CUgraphExec e;
    CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    CU_OK(cuGraphLaunch(e, s));
    assert_int_equal(gattr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 20 * MiB);
    /* syncs during a capture: refused, the capture invalidated */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_ERR(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_OK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CU_ERR(cuMemAllocAsync(&a, MiB, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CUgraph bad = (CUgraph)1;
    CU_ERR(cuStreamEndCapture(s, &bad), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_null(bad);
    CU_OK(cuCtxSynchronize());   /* no capture now */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_ERR(cuMemFree(other), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);   /* its implicit sync */
    CU_ERR(cuStreamEndCapture(s, &bad), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CU_ERR(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_ERR(cuStreamEndCapture(s, &bad), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CU_OK(cuMemFree(other));
    CU_OK(cuGraphExecDestroy(e));
    CU_OK(cuGraphDestroy(g));
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuDevicePrimaryCtxReset(0));
}

static void bad_arguments(void **state)
{
    (void)state;
    sim_test_setup(1);
    CUgraph g;
    CUgraphNode n;
    CU_ERR(cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS a = alloc_params(1, 0);
    CU_ERR(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a), CUDA_ERROR_INVALID_VALUE);
    a = alloc_params(5, MiB);
    CU_ERR(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a), CUDA_ERROR_INVALID_VALUE);
    a = alloc_params(1, MiB);
    a.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;   /* no IPC */
    CU_ERR(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a), CUDA_ERROR_INVALID_VALUE);
    CU_ERR(cuGraphAddMemFreeNode(&n, g, NULL, 0, 0x1000), CUDA_ERROR_INVALID_VALUE);
    a = alloc_params(1, MiB);
    CU_OK(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a));
    CUgraphNode f;
    CU_OK(cuGraphAddMemFreeNode(&f, g, &n, 1, a.dptr));
    CU_ERR(cuGraphAddMemFreeNode(&f, g, &f, 1, a.dptr), CUDA_ERROR_INVALID_VALUE);   /* freed twice */
    CUgraphExec e;
    CU_ERR(cuGraphInstantiateWithFlags(&e, g, 1ull << 40), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
    CU_ERR(cuGraphLaunch(e, (CUstream)(uintptr_t)0x99), CUDA_ERROR_INVALID_HANDLE);
    CU_OK(cuGraphLaunch(e, 0));
    assert_int_equal(gattr(1, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
    assert_int_equal(vramsim_card_used(1), 2 * MiB);
    assert_int_equal(vramsim_card_used(0), 0);
    CU_OK(cuDeviceGraphMemTrim(1));
    CU_OK(cuGraphExecDestroy(e));
    CU_OK(cuGraphDestroy(g));
    CU_ERR(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    cuuint64_t v;
    CU_ERR(cuDeviceGetGraphMemAttribute(1, (CUgraphMem_attribute)99, &v), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuDevicePrimaryCtxReset(1));
}

/* cuGetProcAddress: "cuGraphInstantiate" is the flags signature from CUDA
 * 12 on, the error-node one before; the per-thread launch. */
static void lookup(void **state)
{
    (void)state;
    CU_OK(cuInit(0));
    void *fn = NULL;
    CU_OK(cuGetProcAddress("cuGraphInstantiate", &fn, 13000, 0, NULL));
    assert_ptr_equal(fn, (void *)cuGraphInstantiateWithFlags);
    CU_OK(cuGetProcAddress("cuGraphInstantiate", &fn, 11040, 0, NULL));
    assert_ptr_not_equal(fn, (void *)cuGraphInstantiateWithFlags);
    CU_OK(cuGetProcAddress("cuGraphInstantiateWithFlags", &fn, 11040, 0, NULL));
    assert_ptr_equal(fn, (void *)cuGraphInstantiateWithFlags);
    CU_OK(cuGetProcAddress("cuGraphLaunch", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    void *pt = NULL;
    CU_OK(cuGetProcAddress("cuGraphLaunch", &pt, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    assert_ptr_not_equal(fn, pt);
    CU_OK(cuGetProcAddress("cuGraphUpload", &fn, 13000, 0, NULL));
    assert_ptr_equal(fn, (void *)cuGraphUpload);
    CU_OK(cuGetProcAddress("cuGraphAddNode", &fn, 12020, 0, NULL));
    assert_ptr_not_equal(fn, (void *)cuGraphAddNode);   /* cuda.h's name is the 12.3 signature */
    CU_OK(cuGetProcAddress("cuGraphAddNode", &fn, 12030, 0, NULL));
    assert_ptr_equal(fn, (void *)cuGraphAddNode);
    CU_OK(cuGetProcAddress("cuDeviceGraphMemTrim", &fn, 13000, 0, NULL));
    assert_ptr_equal(fn, (void *)cuDeviceGraphMemTrim);
    CUdriverProcAddressQueryResult st;
    CU_ERR(cuGetProcAddress("cuGraphAddMemAllocNode", &fn, 11000, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_reserve_keep_trim), cmocka_unit_test(kept_allocation_and_context_end),
        cmocka_unit_test(kept_allocation_freed_by_the_program), cmocka_unit_test(nodes_read_back),
        cmocka_unit_test(upload_and_generic_nodes), cmocka_unit_test(stream_capture), cmocka_unit_test(bad_arguments),
        cmocka_unit_test(lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Internals of the simulated driver: shared by its translation units only.
 *
 * __CUDA_API_VERSION_INTERNAL makes cuda.h declare every ABI variant under
 * its own name (cuMemAlloc = the legacy 32-bit one, cuMemAlloc_v2,
 * cuMemcpyHtoD_v2_ptds, ...), which is what a driver has to define. */
#ifndef VRAMSIM_INTERNAL_H
#define VRAMSIM_INTERNAL_H
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "os.h"
#include "vramsim.h"

/* What marks an exported function. The Windows build defines it empty on
 * the command line: there a .def file (made from sim_api.def and the
 * stubs) lists the exports. */
#ifndef SIM_API
#define SIM_API __attribute__((visibility("default")))
#endif
#define SIM_MAX_CARDS 16
/* What a context takes of the card by default (docs/sim.md, "Context
 * overhead"): a mid-range figure of what nvidia-smi shows a process with a
 * bare CUDA 12 context holding. */
#define SIM_DEFAULT_CONTEXT_OVERHEAD ((uint64_t)300 << 20)
#define SIM_VMM_GRANULE ((size_t)2 << 20)
#define SIM_PAGE ((size_t)4096)
#define SIM_BIG_PAGE ((size_t)2 << 20)   /* where allocations of this size or more start */
#define SIM_ROUND_UP(x, a) ((((x) + (a) - 1) / (a)) * (a))

/* ---- call counters (config.c) ---- */
enum sim_fn_id {
#define SIM_FN(name) SIM_FN_##name,
#include "sim_api.def"
#undef SIM_FN
    SIM_FN_COUNT
};
/* The generated stubs (sim_stubs.c from gen_stubs.sh): every function
 * cuda.h declares that sim_api.def does not list. */
extern const char *const sim_stub_names[];
extern void *const sim_stub_fns[];
extern const unsigned sim_stub_count;
extern _Atomic uint64_t sim_call_counts[SIM_FN_COUNT];
#define SIM_COUNT(name) \
    atomic_fetch_add_explicit(&sim_call_counts[SIM_FN_##name], 1, memory_order_relaxed)

/* ---- configuration, read once at cuInit (config.c) ---- */
struct sim_config {
    int ncards;                       /* cards this process sees (CUDA_VISIBLE_DEVICES) */
    uint64_t capacity[SIM_MAX_CARDS]; /* by ordinal */
    int phys[SIM_MAX_CARDS];          /* ordinal -> physical index (the state file's card) */
    int nphys;                        /* physical cards (VRAMSIM_CARDS) */
    uint64_t phys_capacity[SIM_MAX_CARDS];
    int vmm;                    /* cards report VMM support */
    int map_offset;             /* cuMemMap honours a non-zero offset (VRAMSIM_MAP_OFFSET=1) */
    uint64_t async_delay_us;    /* before each async op on a stream worker */
    uint64_t alloc_latency_us;  /* per cuMemAlloc/Free/Create/Release */
    uint64_t end_latency_us;    /* an ending call, after the context's memory is freed */
    uint64_t alloc_granule;     /* cuMemAlloc charge rounding */
    uint64_t context_overhead;  /* card memory each context takes (VRAMSIM_CONTEXT_OVERHEAD) */
};
extern struct sim_config sim_cfg;
int sim_driver_version(void);   /* VRAMSIM_DRIVER_VERSION, default 13000 */
int sim_initialized(void);
CUresult sim_init(void);        /* cuInit's work: config and shared state, once */
#define SIM_REQUIRE_INIT() \
    do { if (!sim_initialized()) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
/* a device ordinal out of range is CUDA_ERROR_INVALID_DEVICE */
#define CHECK_DEV(d) \
    do { if ((d) < 0 || (d) >= sim_cfg.ncards) return CUDA_ERROR_INVALID_DEVICE; } while (0)
int sim_parse_size(const char *s, uint64_t *out);
/* A physical card's UUID (stable per physical index and capacity). */
void sim_phys_uuid(int phys, uint64_t capacity, CUuuid *u);
struct sim_ctx;
CUresult sim_ipc_record(void *m, size_t map_len, size_t size, int card, int32_t pid, int32_t id, struct sim_ctx *ctx,
                        int pool_import, CUdeviceptr *out);   /* ipc.c */
/* The cards CUDA_VISIBLE_DEVICES (value cvd; NULL: all) shows, as the driver
 * reads it: comma-separated indexes, GPU UUIDs ("GPU-..." or without the
 * prefix, any unique prefix of one); the first entry that names no card, or
 * one already listed, ends the list. Fills phys[] and returns the count. */
int sim_visible_devices(const char *cvd, int nphys, const uint64_t *phys_capacity, int phys[SIM_MAX_CARDS]);
void sim_sleep_us(uint64_t us);   /* the whole time, across signals */
void sim_latency(void);             /* VRAMSIM_ALLOC_LATENCY_US */

/* ---- a card's identity (device.c): what CUDA and the sim's NVML both say ---- */
void sim_card_name(int phys, char *name, size_t len);   /* phys: a physical index (sim_cfg.phys[ordinal]) */
void sim_card_uuid(int phys, unsigned char out[16]);
void sim_card_pci(int phys, char *out, size_t len);   /* "00000000:10:00.0" */

/* ---- shared state across processes (state.c) ---- */
CUresult sim_state_open(const char *path, const struct sim_config *want, struct sim_config *got);
/* card: the ordinal; the state file counts by physical card */
CUresult sim_charge(int card, uint64_t bytes);   /* CUDA_ERROR_OUT_OF_MEMORY when full */
void sim_uncharge(int card, uint64_t bytes);
uint64_t sim_state_used(int card);               /* all live processes, dead ones reclaimed */
/* A context begins/ends on card in this process: its overhead charged
 * (CUDA_ERROR_OUT_OF_MEMORY when the card is full) and the process counted
 * as one with a context there (what NVML lists). */
CUresult sim_state_ctx_begin(int card, uint64_t overhead);
void sim_state_ctx_end(int card, uint64_t overhead);
/* The live processes with a context on card: pid and bytes held there
 * (allocations and overhead); returns how many there are (up to max filled). */
unsigned sim_state_processes(int card, int32_t *pids, uint64_t *used, unsigned max);
void sim_state_after_fork_child(void);

/* ---- contexts (context.c) ---- */
struct sim_ctx {
    int dev;
    unsigned flags;
    int primary;
    int active;      /* regular: until destroyed; primary: while retained */
    int retain;      /* primary contexts only */
};
CUresult sim_ctx_current(struct sim_ctx **out);   /* INVALID_CONTEXT if none/inactive */
/* A live context of device dev was given access to owner's memory (cuCtxEnablePeerAccess). */
int sim_ctx_peer_enabled(int dev, struct sim_ctx *owner);
struct sim_ctx *sim_ctx_lookup(CUcontext c);      /* NULL if not a live context */
void sim_ctx_after_fork_child(void);

/* ---- device memory records (memtable.c) ---- */
enum sim_kind {
    SIM_K_DEVICE,   /* cuMemAlloc, cuMemAllocPitch */
    SIM_K_MANAGED,  /* cuMemAllocManaged */
    SIM_K_POOL,     /* cuMemAllocAsync / FromPool */
    SIM_K_HOST,     /* cuMemHostAlloc: pinned host memory, never charged */
    SIM_K_IPC,      /* opened from another process: charged there */
    SIM_K_VA,       /* a cuMemAddressReserve range (vmm.c tracks its mappings) */
    SIM_K_ARRAY     /* a CUDA array or mipmapped array (array.c): the handle is its base */
};
struct sim_pool;
struct sim_alloc {
    uintptr_t base;
    size_t size;        /* requested (pitch*height for pitch allocations) */
    size_t map_len;     /* bytes mapped at base */
    size_t charged;     /* bytes charged to the card for it (host: what its pool counts) */
    int host;           /* a block of a host-located pool: host memory, on no card's charge */
    sim_os_obj obj;     /* memory object backing it (os.h), SIM_OS_NO_OBJ if none */
    int card;
    enum sim_kind kind;
    struct sim_ctx *ctx;
    uint64_t id;        /* BUFFER_ID, unique per process */
    struct sim_pool *pool;
    int free_pending;   /* cuMemFreeAsync queued */
    int sync_memops;    /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS as cuPointerSetAttribute set it */
    int ipc_refs;       /* SIM_K_IPC: opens of the same handle */
    int pool_import;    /* SIM_K_IPC: imported from an exported pool (cuMemPoolImportPointer):
                           freed by cuMemFree / cuMemFreeAsync, not cuIpcCloseMemHandle */
    int32_t ipc_pid;
    uint64_t ipc_id;
    CUDA_ARRAY3D_DESCRIPTOR adesc;   /* SIM_K_ARRAY: as created (2D and 1D arrays with Depth 0) */
    unsigned alevels;                /* SIM_K_ARRAY: mipmap levels; 0 for a plain array */
};
extern pthread_mutex_t sim_mem_lock;    /* guards the table and every record */
uint64_t sim_next_id(void);
void sim_mem_insert(struct sim_alloc *a);
void sim_mem_remove(struct sim_alloc *a);
struct sim_alloc *sim_mem_find(uintptr_t p);       /* record containing p */
struct sim_alloc *sim_mem_find_base(uintptr_t p);  /* record starting at p */
/* an open IPC record of buffer (pid, id); sim_mem_lock held */
struct sim_alloc *sim_mem_find_ipc(int32_t pid, uint64_t id);
size_t sim_mem_collect_ctx(struct sim_ctx *ctx, struct sim_alloc ***out);
/* shared mapping of len bytes (page-rounded) backed by a memory object
 * (os.h: a memfd named "vramsim-<pid>-<id>.<card>" so another process can
 * tell what it opened; a section on Windows); with addr NULL only the
 * object is made, nothing is mapped */
CUresult sim_backing_create(size_t len, uint64_t id, int card, sim_os_obj *obj, void **addr);
void sim_backing_destroy(sim_os_obj obj, void *addr, size_t len);
void sim_live_add(int card, int64_t bytes, int64_t count);
/* Allocate/free a device record of the given kind on the current context. */
CUresult sim_alloc_device(enum sim_kind kind, size_t size, size_t charge_size,
                          struct sim_alloc **out);
/* The same; host 1: host memory (a host-located pool's block), charged to
 * no card and not counted as the card's live memory. */
CUresult sim_alloc_record(enum sim_kind kind, size_t size, size_t charge_size, int host, struct sim_alloc **out);
/* Frees a record the caller removed from the table; a SIM_K_POOL block
 * goes back to its pool (sim_pool_free_now). */
void sim_free_record(struct sim_alloc *a);
/* the kinds cuMemFree and cuMemFreeAsync accept */
static inline int sim_kind_freeable(enum sim_kind k)
{
    return k == SIM_K_DEVICE || k == SIM_K_MANAGED || k == SIM_K_POOL;
}
/* what cuMemFree and cuMemFreeAsync accept: the kinds above, and a
 * pointer imported from another process's pool (cuda.h: "The pointer may
 * be freed with cuMemFree or cuMemFreeAsync") */
static inline int sim_alloc_freeable(const struct sim_alloc *a)
{
    return sim_kind_freeable(a->kind) || (a->kind == SIM_K_IPC && a->pool_import);
}
/* 1 when [p, p+n) lies in device memory this process may touch */
int sim_dev_range_ok(uintptr_t p, size_t n);
/* same, but an address outside every record counts as host memory */
int sim_range_ok(uintptr_t p, size_t n, int any_host);
void sim_mem_after_fork_child(void);

/* ---- streams (stream.c) and events (event.c) ---- */
struct sim_stream;
typedef void (*sim_op_fn)(void *arg);
/* Resolve a handle (0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are the
 * process's default stream); NULL if invalid. */
struct sim_stream *sim_stream_get(CUstream s);
/* Queue fn(arg) (arg is copied, argsz bytes) to run later on the stream. */
CUresult sim_stream_enqueue(struct sim_stream *st, sim_op_fn fn, const void *arg, size_t argsz);
void sim_default_stream_sync(void);
void sim_sync_all(void);
void sim_stream_after_fork_child(void);
void sim_event_after_fork_child(void);
#define GET_STREAM(var, h) \
    struct sim_stream *var = sim_stream_get(h); \
    if (!var) return CUDA_ERROR_INVALID_HANDLE
/* Graph capture (stream.c): CU_STREAM_CAPTURE_STATUS_* of st, and with
 * ACTIVE its graph in *g. */
CUstreamCaptureStatus sim_stream_capture(struct sim_stream *st, CUgraph *g);
/* A call that would wait for a capturing stream (cuCtxSynchronize, the
 * implicit sync of cuMemFree): CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, every
 * capture in progress invalidated, when one is; else CUDA_SUCCESS. */
CUresult sim_capture_forbids_sync(void);

/* ---- pools (pool.c), vmm (vmm.c) ---- */
void sim_pool_free_now(struct sim_alloc *a);   /* a removed from the table */
/* returns cached pool memory above each pool's release threshold */
void sim_pools_sync_trim(void);
void sim_pool_after_fork_child(void);
/* graph memory (graph.c): the end of ctx releases the graph pools it launched into */
void sim_graph_ctx_end(struct sim_ctx *ctx);
/* the graphs of stream capture (graph.c): made, destroyed, and the
 * stream-ordered allocations and frees captured into them */
CUresult sim_graph_new(CUgraph *g);
void sim_graph_drop(CUgraph g);
CUresult sim_graph_capture_alloc(CUgraph g, int dev, size_t bytes, CUdeviceptr *dptr);
CUresult sim_graph_capture_free(CUgraph g, CUdeviceptr dptr);
/* A launched graph's allocation no free node of the graph freed, given back
 * to the graph pool (cuMemFreeAsync, cuMemFree); 0, or -1 when dptr is none. */
int sim_graph_free(CUdeviceptr dptr);
void sim_graph_after_fork_child(void);
/* all three with sim_mem_lock held */
int sim_vmm_range_ok(uintptr_t p, size_t n);           /* mapped read-write */
int sim_vmm_range_mapped_locked(uintptr_t p, size_t n); /* mapped at all */
/* [p, p+n) in one reservation, mapped with some access for device dev:
 * 1, else 0; -1 when p is in no reservation */
int sim_vmm_dev_access_locked(uintptr_t p, size_t n, int dev);
int sim_vmm_ptr_info(uintptr_t p, int *dev, uintptr_t *base, size_t *size);
void sim_vmm_after_fork_child(void);
#endif

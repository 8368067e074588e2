/* The arena's backend over the real driver table (see arena_backend.h). */
#include "arena_backend.h"

#include "accounting.h"
#include "driver_table.h"
#include "guard.h"
#include "log.h"
#include "procenv.h"
#include "quota.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* One per arena (one arena per context): the card, and what the arena's
 * context has come to. */
typedef struct backend_card {
  int card;
  CUcontext ctx;           /* the arena's context: its sync is that context's */
  int unsafe_reuse;
  int shareable;           /* physical memory is created exportable as a POSIX fd (IPC) */
  int rdma;                /* ... and GPUDirect RDMA capable, as cuMemAlloc memory is on such a card */
  _Atomic int va_failed;   /* a cuMemAddressReserve was refused */
  _Atomic int ended;       /* the context ended: the driver already freed its cuMemAlloc chunks */
  _Atomic(CUevent) lane_event;   /* order_after_lane's, made on first use; the context's to free */
  _Atomic uint32_t peers;  /* VMM: other cards given access to every mapping (bit per card) */
} backend_card;
static __thread CUresult t_last_error __attribute__((tls_model("initial-exec")));

/* Driver memory the arenas hold (chunks and VMM ranges), for
 * vs_backend_holds(). Touched only when the arena grows or shrinks and on
 * a free of an unknown pointer, so one lock is enough. */
typedef struct region {
  uint64_t base, size;
  const void *owner;   /* the backend_card: a chunk of an ended context may be the driver's again */
  int chunk;           /* a cuMemAlloc chunk (charged), not an address range */
  UT_hash_handle hh;
} region;
static region *g_regions;
static region *g_orphan_regions;   /* a forked child's inheritance: reachable, never used */
static pthread_mutex_t g_region_lock = PTHREAD_MUTEX_INITIALIZER;

/* The same ranges for readers without the lock (the pointer queries ask
 * about every pointer, most of them not the arena's): merged and sorted,
 * republished under g_region_lock after every change, read under a
 * sequence count (odd while a writer rewrites them; a reader that saw it
 * move reads again). Beyond FAST_MAX merged ranges only their envelope is
 * published (g_fast_coarse): an address outside it is certainly not held,
 * one inside is asked of the table under the lock. */
#define FAST_MAX 64
static _Atomic unsigned g_fast_seq;
static _Atomic unsigned g_fast_n;
static _Atomic int g_fast_coarse;
static _Atomic uint64_t g_fast_lo[FAST_MAX], g_fast_hi[FAST_MAX];

static int by_base(const void *x, const void *y) {
  uint64_t a = ((const uint64_t *)x)[0], b = ((const uint64_t *)y)[0];
  return a < b ? -1 : a > b;
}

/* Under g_region_lock. */
static void fast_publish(void) {
  unsigned n = HASH_COUNT(g_regions), m = 0;
  uint64_t(*v)[2] = n ? malloc(n * sizeof *v) : NULL;
  int coarse = n && !v;   /* no room to sort: the envelope alone */
  uint64_t lo = UINT64_MAX, hi = 0;
  unsigned i = 0;
  for (region *r = g_regions; r; r = r->hh.next, i++) {
    if (r->base < lo) lo = r->base;
    if (r->base + r->size > hi) hi = r->base + r->size;
    if (v) { v[i][0] = r->base; v[i][1] = r->base + r->size; }
  }
  if (v) {
    qsort(v, n, sizeof *v, by_base);
    for (i = 0; i < n; i++) {
      if (m && v[i][0] <= v[m - 1][1]) { if (v[i][1] > v[m - 1][1]) v[m - 1][1] = v[i][1]; }
      else { v[m][0] = v[i][0]; v[m][1] = v[i][1]; m++; }
    }
    if (m > FAST_MAX) coarse = 1;
  }
  atomic_fetch_add_explicit(&g_fast_seq, 1, memory_order_relaxed);   /* odd: being rewritten */
  atomic_thread_fence(memory_order_release);
  if (coarse || !v) {
    atomic_store_explicit(&g_fast_lo[0], n ? lo : 0, memory_order_relaxed);
    atomic_store_explicit(&g_fast_hi[0], n ? hi : 0, memory_order_relaxed);
    atomic_store_explicit(&g_fast_n, n ? 1u : 0u, memory_order_relaxed);
  } else {
    for (i = 0; i < m; i++) {
      atomic_store_explicit(&g_fast_lo[i], v[i][0], memory_order_relaxed);
      atomic_store_explicit(&g_fast_hi[i], v[i][1], memory_order_relaxed);
    }
    atomic_store_explicit(&g_fast_n, m, memory_order_relaxed);
  }
  atomic_store_explicit(&g_fast_coarse, coarse, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_fast_seq, 1, memory_order_release);   /* even again */
  free(v);
}

/* A base is in the table at most once: the driver can hand an ended
 * context's chunk address to another arena before the ended one has let go
 * of it (the newer owner wins; the older one's delete leaves it alone). */
static void region_add(uint64_t base, uint64_t size, const void *owner, int chunk) {
  region *r = malloc(sizeof *r), *old = NULL;
  if (!r) return;   /* only the double-free guard loses this range */
  r->base = base;
  r->size = size;
  r->owner = owner;
  r->chunk = chunk;
  pthread_mutex_lock(&g_region_lock);
  HASH_FIND(hh, g_regions, &base, sizeof base, old);
  if (old) HASH_DEL(g_regions, old);
  HASH_ADD(hh, g_regions, base, sizeof r->base, r);
  fast_publish();
  pthread_mutex_unlock(&g_region_lock);
  free(old);
}

static void region_del(uint64_t base, const void *owner) {
  region *r;
  pthread_mutex_lock(&g_region_lock);
  HASH_FIND(hh, g_regions, &base, sizeof base, r);
  if (r && r->owner == owner) {
    HASH_DEL(g_regions, r);
    fast_publish();
  } else {
    r = NULL;
  }
  pthread_mutex_unlock(&g_region_lock);
  free(r);
}

/* 0: addr is in no published range; 1: in one; -1: ask the table (only
 * the envelope is published, or a writer kept moving). */
static int fast_holds(uint64_t addr) {
  for (int tries = 0; tries < 4; tries++) {
    unsigned s = atomic_load_explicit(&g_fast_seq, memory_order_acquire);
    if (s & 1) continue;
    /* Acquire loads (plain loads on x86) keep the re-read of the sequence
     * below after them, as a fence would; GCC's ThreadSanitizer does not
     * support atomic_thread_fence. */
    unsigned n = atomic_load_explicit(&g_fast_n, memory_order_acquire);
    int coarse = atomic_load_explicit(&g_fast_coarse, memory_order_acquire), hit = 0;
    for (unsigned i = 0; i < n && i < FAST_MAX && !hit; i++)
      hit = addr >= atomic_load_explicit(&g_fast_lo[i], memory_order_acquire) &&
            addr < atomic_load_explicit(&g_fast_hi[i], memory_order_acquire);
    if (atomic_load_explicit(&g_fast_seq, memory_order_relaxed) != s) continue;
    return hit && coarse ? -1 : hit;
  }
  return -1;
}

int vs_backend_holds(uint64_t addr) {
  int fast = fast_holds(addr);
  if (fast >= 0) return fast;
  int found = 0;
  pthread_mutex_lock(&g_region_lock);
  for (region *r = g_regions; r && !found; r = r->hh.next) found = addr >= r->base && addr - r->base < r->size;
  pthread_mutex_unlock(&g_region_lock);
  return found;
}

CUresult vs_backend_last_error(void) { return t_last_error; }
void vs_backend_clear_error(void) { t_last_error = CUDA_SUCCESS; }

/* The driver's answer as the arena reads it; the CUresult is kept for the hook. */
#define verdict(r) verdict_of(r, __func__)
static int verdict_of(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS) return VS_BACKEND_OK;
  VS_DEBUG("arena backend: %s: the driver said %d", what, (int)r);
  t_last_error = r;
  return r == CUDA_ERROR_OUT_OF_MEMORY ? VS_BACKEND_OOM : VS_BACKEND_ERROR;
}

/* The table, already loaded: the arena is only reached from a hook. */
#define REAL_OR_FAIL(fn)                                                      \
  const vs_real_table *real = vs_driver_if_loaded();                          \
  if (!real || !real->fn) return verdict(CUDA_ERROR_NOT_INITIALIZED)

/* A driver call under the recursion guard: a driver that implements it
 * with its own exported entry points must not be counted twice. */
#define GUARDED(r, call) \
  do {                   \
    vs_guard_enter();    \
    r = call;            \
    vs_guard_leave();    \
  } while (0)

/* Before device memory is taken: the tenant is charged; a refusal is an
 * OOM so the arena runs its ladder (it trims itself before a quota says no). */
static int charge(int card, uint64_t n) {
  if (vs_quota_charge(card, n) == CUDA_SUCCESS) return VS_BACKEND_OK;
  t_last_error = CUDA_ERROR_OUT_OF_MEMORY;
  return VS_BACKEND_OOM;
}

static int chunk_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  backend_card *c = ctx;
  REAL_OR_FAIL(cuMemAlloc_v2);
  if (charge(c->card, size) != VS_BACKEND_OK) return VS_BACKEND_OOM;
  CUdeviceptr p = 0;
  CUresult r;
  GUARDED(r, real->cuMemAlloc_v2(&p, (size_t)size));
  vs_acct_call(c->card, VRAMSHIM_CALL_MEM_ALLOC);
  if (r != CUDA_SUCCESS) {
    vs_quota_uncharge(c->card, size);
    return verdict(r);
  }
  vs_acct_reserved_add(c->card, size);
  region_add((uint64_t)p, size, c, 1);
  *addr = (uint64_t)p;
  return VS_BACKEND_OK;
}

static int chunk_free(void *ctx, uint64_t addr, uint64_t size) {
  backend_card *c = ctx;
  region_del(addr, c);
  if (atomic_load(&c->ended)) {
    /* The driver freed it with the context: only the shim's books move
     * (asking the driver now could free whatever it has put there since). */
    vs_acct_reserved_sub(c->card, size);
    vs_quota_uncharge(c->card, size);
    return VS_BACKEND_OK;
  }
  REAL_OR_FAIL(cuMemFree_v2);
  CUresult r;
  GUARDED(r, real->cuMemFree_v2((CUdeviceptr)addr));
  vs_acct_call(c->card, VRAMSHIM_CALL_MEM_FREE);
  if (r != CUDA_SUCCESS) {
    /* Perhaps still the driver's to hold: kept guarded and charged until
     * the context ends (vs_backend_free). */
    char b[32];
    VS_WARN("card %d: the driver refused to free an arena chunk of %s at 0x%llx (error %d); it stays charged "
            "until its context ends", c->card, vs_fmt_bytes(size, b, sizeof b), (unsigned long long)addr, (int)r);
    region_add(addr, size, c, 1);
    return verdict(r);
  }
  vs_acct_reserved_sub(c->card, size);
  vs_quota_uncharge(c->card, size);
  return VS_BACKEND_OK;
}

static int va_reserve(void *ctx, uint64_t size, uint64_t *va) {
  backend_card *c = ctx;
  REAL_OR_FAIL(cuMemAddressReserve);
  CUdeviceptr p = 0;
  CUresult r;
  GUARDED(r, real->cuMemAddressReserve(&p, (size_t)size, 0, 0, 0));
  vs_acct_call(c->card, VRAMSHIM_CALL_ADDRESS_RESERVE);
  if (r != CUDA_SUCCESS) {
    atomic_store(&c->va_failed, 1);
    return verdict(r);
  }
  region_add((uint64_t)p, size, c, 0);
  *va = (uint64_t)p;
  return VS_BACKEND_OK;
}

static int va_free(void *ctx, uint64_t va, uint64_t size) {
  backend_card *c = ctx;
  REAL_OR_FAIL(cuMemAddressFree);
  region_del(va, c);
  CUresult r;
  GUARDED(r, real->cuMemAddressFree((CUdeviceptr)va, (size_t)size));
  vs_acct_call(c->card, VRAMSHIM_CALL_ADDRESS_FREE);
  if (r != CUDA_SUCCESS) region_add(va, size, c, 0);
  return verdict(r);
}

/* shareable: created so that it can be exported as a POSIX file
 * descriptor, which IPC of arena blocks needs (ipc_vmm.h). rdma: created
 * GPUDirect RDMA capable where the card allows it with VMM: the driver
 * answers CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE 1 for a
 * cuMemAlloc block on such a card and, without the flag, 0 for memory of
 * cuMemCreate, so an arena block would answer otherwise than the block it
 * stands for (measured on an H200, driver 580.159.04:
 * docs/gpu-validation.md). */
static void device_prop(int card, int shareable, int rdma, CUmemAllocationProp *prop) {
  memset(prop, 0, sizeof *prop);
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = card;
  if (shareable) prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  if (rdma) prop->allocFlags.gpuDirectRDMACapable = 1;
}

/* A device attribute of the card, 0 where it cannot be read. */
static int card_attr(const vs_real_table *real, int card, CUdevice_attribute a) {
  CUdevice dev = 0;
  int v = 0;
  CUresult r = CUDA_ERROR_NOT_SUPPORTED;
  if (!real->cuDeviceGet || !real->cuDeviceGetAttribute) return 0;
  GUARDED(r, real->cuDeviceGet(&dev, card));
  if (r == CUDA_SUCCESS) GUARDED(r, real->cuDeviceGetAttribute(&v, a, dev));
  return r == CUDA_SUCCESS && v != 0;
}

/* Whether the card can export physical memory as a POSIX fd. */
static int card_shareable(const vs_real_table *real, int card) {
  return real->cuMemExportToShareableHandle &&
         card_attr(real, card, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
}

/* Per card (a property of the device, the same for each context's arena):
 * set once a VMM backend of the card creates exportable memory. */
static _Atomic int g_shareable[VRAMSHIM_MAX_CARDS];

int vs_backend_shareable(int card) {
  return card >= 0 && card < VRAMSHIM_MAX_CARDS && atomic_load(&g_shareable[card]);
}

static int phys_create(void *ctx, uint64_t size, uint64_t *handle) {
  backend_card *c = ctx;
  REAL_OR_FAIL(cuMemCreate);
  if (charge(c->card, size) != VS_BACKEND_OK) return VS_BACKEND_OOM;
  CUmemAllocationProp prop;
  device_prop(c->card, c->shareable, c->rdma, &prop);
  CUmemGenericAllocationHandle h = 0;
  CUresult r;
  GUARDED(r, real->cuMemCreate(&h, (size_t)size, &prop, 0));
  vs_acct_call(c->card, VRAMSHIM_CALL_MEM_CREATE);
  if (r != CUDA_SUCCESS) {
    vs_quota_uncharge(c->card, size);
    return verdict(r);
  }
  vs_acct_reserved_add(c->card, size);
  *handle = (uint64_t)h;
  return VS_BACKEND_OK;
}

static int phys_release(void *ctx, uint64_t handle, uint64_t size) {
  backend_card *c = ctx;
  REAL_OR_FAIL(cuMemRelease);
  CUresult r;
  GUARDED(r, real->cuMemRelease((CUmemGenericAllocationHandle)handle));
  vs_acct_call(c->card, VRAMSHIM_CALL_MEM_RELEASE);
  if (r != CUDA_SUCCESS) return verdict(r);
  vs_acct_reserved_sub(c->card, size);
  vs_quota_uncharge(c->card, size);
  return VS_BACKEND_OK;
}

/* Read-write access for device `card`. */
static CUmemAccessDesc rw_for(int card) {
  CUmemAccessDesc d;
  memset(&d, 0, sizeof d);
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = card;
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return d;
}

static int map(void *ctx, uint64_t va, uint64_t size, uint64_t handle) {
  backend_card *c = ctx;
  REAL_OR_FAIL(cuMemMap);
  if (!real->cuMemSetAccess || !real->cuMemUnmap) return verdict(CUDA_ERROR_NOT_SUPPORTED);
  CUresult r;
  GUARDED(r, real->cuMemMap((CUdeviceptr)va, (size_t)size, 0, (CUmemGenericAllocationHandle)handle, 0));
  vs_acct_call(c->card, VRAMSHIM_CALL_MEM_MAP);
  if (r != CUDA_SUCCESS) return verdict(r);
  /* The arena's card, and the peers its context gave access to (as
   * cuMemAlloc memory is reachable from them once peer access is on). */
  CUmemAccessDesc acc[VRAMSHIM_MAX_CARDS];
  size_t n = 0;
  uint32_t peers = atomic_load_explicit(&c->peers, memory_order_acquire);
  acc[n++] = rw_for(c->card);
  for (int d = 0; d < VRAMSHIM_MAX_CARDS; d++)
    if (d != c->card && (peers & (1u << d))) acc[n++] = rw_for(d);
  GUARDED(r, real->cuMemSetAccess((CUdeviceptr)va, (size_t)size, acc, n));
  vs_acct_call(c->card, VRAMSHIM_CALL_SET_ACCESS);
  if (r != CUDA_SUCCESS) {
    CUresult u;
    GUARDED(u, real->cuMemUnmap((CUdeviceptr)va, (size_t)size));
    vs_acct_call(c->card, VRAMSHIM_CALL_MEM_UNMAP);
    (void)u;
    return verdict(r);
  }
  return VS_BACKEND_OK;
}

static int unmap(void *ctx, uint64_t va, uint64_t size) {
  backend_card *c = ctx;
  REAL_OR_FAIL(cuMemUnmap);
  CUresult r;
  GUARDED(r, real->cuMemUnmap((CUdeviceptr)va, (size_t)size));
  vs_acct_call(c->card, VRAMSHIM_CALL_MEM_UNMAP);
  return verdict(r);
}

/* Graph captures in progress in the process (arena_backend.h). While any
 * is, every arena holds (vs_arena_backend.hold): the driver's sync and
 * release calls would break the program's capture. Process-wide, not per
 * context: a capture's rules reach other threads (global mode) and the
 * arena cannot tell which mode a capture runs in. */
static _Atomic int g_captures;

void vs_backend_capture_begin(void) { atomic_fetch_add(&g_captures, 1); }

void vs_backend_capture_end(void) {
  int n = atomic_load(&g_captures);
  while (n > 0 && !atomic_compare_exchange_weak(&g_captures, &n, n - 1)) {
  }
}

/* Sequentially consistent: the read of vs_arena_unsafe_enter's Dekker pair (core.h). */
int vs_backend_capturing(void) { return atomic_load(&g_captures) > 0; }

static int hold(void *ctx) {
  (void)ctx;
  return vs_backend_capturing();
}

/* The arena's own context: a thread may free (and so settle or trim) a
 * block of a context other than its current one; then that context is
 * pushed for the sync and popped after. */
static int sync_ctx(void *ctx) {
  backend_card *c = ctx;
  if (c->unsafe_reuse || atomic_load(&c->ended)) return VS_BACKEND_OK;   /* ended: its work is over */
  REAL_OR_FAIL(cuCtxSynchronize);
  CUresult r;
  CUcontext cur = NULL;
  int pushed = 0;
  if (c->ctx && real->cuCtxGetCurrent && real->cuCtxPushCurrent_v2 && real->cuCtxPopCurrent_v2) {
    GUARDED(r, real->cuCtxGetCurrent(&cur));
    if (r == CUDA_SUCCESS && cur != c->ctx) {
      GUARDED(r, real->cuCtxPushCurrent_v2(c->ctx));
      if (r != CUDA_SUCCESS) return verdict(r);
      pushed = 1;
    }
  }
  GUARDED(r, real->cuCtxSynchronize());
  vs_acct_call(c->card, VRAMSHIM_CALL_SYNC);
  if (pushed) {
    CUresult p;
    GUARDED(p, real->cuCtxPopCurrent_v2(&cur));
    (void)p;
  }
  return verdict(r);
}

/* The lane is the legacy stream of the arena's context, which is current
 * here (the arena orders only for an allocation in its own context): an
 * event recorded on it, and `stream` made to wait for that event. Two calls
 * that enqueue and return; the host never waits. The event belongs to the
 * context, which frees it when it ends. */
static int order_after_lane(void *ctx, uint64_t stream) {
  backend_card *c = ctx;
  if (c->unsafe_reuse) return VS_BACKEND_OK;   /* as sync: the test of what ordering prevents */
  if (vs_backend_capturing()) return VS_BACKEND_ERROR;   /* no record on the legacy stream meanwhile */
  REAL_OR_FAIL(cuStreamWaitEvent);
  if (!real->cuEventCreate || !real->cuEventRecord) return verdict(CUDA_ERROR_NOT_INITIALIZED);
  CUresult r;
  CUevent ev = atomic_load(&c->lane_event);
  if (!ev) {
    CUevent made = NULL, none = NULL;
    GUARDED(r, real->cuEventCreate(&made, CU_EVENT_DISABLE_TIMING));
    vs_acct_call(c->card, VRAMSHIM_CALL_OTHER);
    if (r != CUDA_SUCCESS) return verdict(r);
    if (!atomic_compare_exchange_strong(&c->lane_event, &none, made) && real->cuEventDestroy_v2) {
      CUresult d;
      GUARDED(d, real->cuEventDestroy_v2(made));   /* another thread's came first */
      (void)d;
    }
    ev = atomic_load(&c->lane_event);
  }
  /* A record by another thread in between only moves the event later on
   * the lane: the wait then covers more, never less. */
  GUARDED(r, real->cuEventRecord(ev, NULL));
  vs_acct_call(c->card, VRAMSHIM_CALL_OTHER);
  if (r != CUDA_SUCCESS) return verdict(r);
  GUARDED(r, real->cuStreamWaitEvent((CUstream)(uintptr_t)stream, ev, 0));
  vs_acct_call(c->card, VRAMSHIM_CALL_OTHER);
  return verdict(r);
}

/* ---- peer access ---- */
typedef struct grant {
  backend_card *c;
  int card;
  int failed;
} grant;

static void grant_one(void *user, uint64_t va, uint64_t size) {
  grant *g = user;
  const vs_real_table *real = vs_driver_if_loaded();
  if (!real || !real->cuMemSetAccess) {
    g->failed = 1;
    return;
  }
  CUmemAccessDesc acc = rw_for(g->card);
  CUresult r;
  GUARDED(r, real->cuMemSetAccess((CUdeviceptr)va, (size_t)size, &acc, 1));
  vs_acct_call(g->c->card, VRAMSHIM_CALL_SET_ACCESS);
  if (r != CUDA_SUCCESS) g->failed = 1;
}

int vs_backend_peer(void *backend, vs_arena *a, int card, int on) {
  backend_card *c = backend;
  if (!c || card < 0 || card >= VRAMSHIM_MAX_CARDS || card == c->card) return 0;
  if (!on) {
    atomic_fetch_and(&c->peers, ~(1u << card));
    return 0;
  }
  /* The bit first: a mapping made from now on carries it; the walk below
   * (under the heap's lock) then opens every older one. */
  atomic_fetch_or(&c->peers, 1u << card);
  grant g = {c, card, 0};
  if (a) vs_arena_mappings(a, grant_one, &g);
  return g.failed ? -1 : 0;
}

int vs_backend_va_failed(void *backend) { return atomic_load(&((backend_card *)backend)->va_failed); }

void vs_backend_ended(void *backend) { atomic_store(&((backend_card *)backend)->ended, 1); }

/* Once the context has ended: what its arenas gave up while the driver
 * refused to free it is gone too. A chunk whose free was refused stays
 * charged and guarded (chunk_free: the driver may still hold it), but its
 * arena forgets it; when the context ends, the driver has freed every
 * chunk of it, so the books let those go here. Before, such a chunk stayed
 * charged for the rest of the process (seen once in a storm test: a
 * primary context's last release ends it in the driver before the hook
 * learns so, and a trim in between met a chunk already freed; other
 * threads' trims now stay out of a context during that call, contexts.h
 * vs_ctx_quiet, but a trim by the program's own thread may still). */
void vs_backend_free(void *backend) {
  backend_card *c = backend;
  if (c && atomic_load(&c->ended)) {
    uint64_t bytes = 0;
    region *r, *tmp;
    pthread_mutex_lock(&g_region_lock);
    HASH_ITER(hh, g_regions, r, tmp) {
      if (r->owner != c) continue;
      if (r->chunk) bytes += r->size;
      HASH_DEL(g_regions, r);
      free(r);
    }
    fast_publish();
    pthread_mutex_unlock(&g_region_lock);
    if (bytes) {
      char b[32];
      VS_INFO("card %d: %s of arena chunks the driver had refused to free went with their context", c->card,
              vs_fmt_bytes(bytes, b, sizeof b));
      vs_acct_reserved_sub(c->card, bytes);
      vs_quota_uncharge(c->card, bytes);
    }
  }
  free(backend);
}

/* Debug only: VRAMSHIM_DEBUG_UNSAFE_REUSE=1 makes sync return at once,
 * so freed blocks are reused while device work may still touch them. The
 * stream-safety test uses it to show that it catches exactly that. */
static int unsafe_reuse(void) {
  const char *e = vs_plat_getenv("VRAMSHIM_DEBUG_UNSAFE_REUSE");
  return e && *e && strcmp(e, "0") != 0;
}

static int could_fit(void *ctx, uint64_t size) {
  backend_card *c = ctx;
  if (vs_quota_could_fit(c->card, size) == CUDA_SUCCESS) return VS_BACKEND_OK;
  t_last_error = CUDA_ERROR_OUT_OF_MEMORY;
  return VS_BACKEND_OOM;
}

static uint64_t room(void *ctx) { return vs_quota_room(((backend_card *)ctx)->card); }

void vs_backend_chunks(void *backend, vs_arena_backend *be) {
  /* Writes nothing shared: the context may be in use by the VMM arena's
   * threads at this moment (their va_failed flag stays set). */
  backend_card *c = backend;
  memset(be, 0, sizeof *be);
  be->ctx = c;
  be->chunk_alloc = chunk_alloc;
  be->chunk_free = chunk_free;
  be->sync = sync_ctx;
  be->could_fit = could_fit;
  be->room = room;
  be->order_after_lane = order_after_lane;
  be->hold = hold;
}

CUresult vs_backend_init(int card, uint64_t ctx, int vmm, vs_arena_backend *be) {
  static _Atomic int warned;
  memset(be, 0, sizeof *be);
  backend_card *c = calloc(1, sizeof *c);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  c->card = card;
  c->ctx = (CUcontext)(uintptr_t)ctx;
  c->unsafe_reuse = unsafe_reuse();
  if (c->unsafe_reuse && !atomic_exchange(&warned, 1))
    VS_WARN("card %d: VRAMSHIM_DEBUG_UNSAFE_REUSE is set: freed memory is reused without waiting for the "
            "device (unsafe; for testing only)", card);
  vs_backend_chunks(c, be);
  if (!vmm) return CUDA_SUCCESS;
  const vs_real_table *real = vs_driver_if_loaded();
  if (!real || !real->cuMemGetAllocationGranularity || !real->cuMemCreate || !real->cuMemRelease ||
      !real->cuMemMap || !real->cuMemUnmap || !real->cuMemSetAccess || !real->cuMemAddressReserve ||
      !real->cuMemAddressFree)
    return CUDA_ERROR_NOT_SUPPORTED;
  c->shareable = card_shareable(real, card);
  c->rdma = card_attr(real, card, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED);
  CUmemAllocationProp prop;
  device_prop(card, c->shareable, c->rdma, &prop);
  size_t gran = 0;
  CUresult r;
  GUARDED(r, real->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  vs_acct_call(card, VRAMSHIM_CALL_OTHER);
  if (r != CUDA_SUCCESS) return r;
  if (gran == 0) return CUDA_ERROR_NOT_SUPPORTED;
  be->granule = gran;
  be->va_reserve = va_reserve;
  be->va_free = va_free;
  be->phys_create = phys_create;
  be->phys_release = phys_release;
  be->map = map;
  be->unmap = unmap;
  if (card >= 0 && card < VRAMSHIM_MAX_CARDS && c->shareable) atomic_store(&g_shareable[card], 1);
  return CUDA_SUCCESS;
}

void vs_backend_atfork_child(void) {
  /* The parent's ranges are not the child's memory. Kept reachable (a
   * thread of the parent may have been inside the table), never used. */
  if (g_regions) g_orphan_regions = g_regions;
  g_regions = NULL;
  pthread_mutex_init(&g_region_lock, NULL);
  /* A writer of the parent may have left the count odd. */
  atomic_store(&g_fast_n, 0);
  atomic_store(&g_captures, 0);   /* a capture is its stream's, and the child has none */
  atomic_store(&g_fast_coarse, 0);
  atomic_store(&g_fast_seq, 0);
}

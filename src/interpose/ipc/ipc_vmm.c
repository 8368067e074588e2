/* IPC of VMM arena blocks (see ipc_vmm.h). */
#include "ipc_vmm.h"

#include "arena_glue.h"
#include "guard.h"
#include "ipc_channel.h"
#include "ipc_token.h"
#include "interpose.h"
#include "log.h"
#include "random.h"
#include "settings.h"
#include "thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

/* "-v2": pieces carry their handle's size (the importer maps whole
 * handles); an exporter of the first layout is not mistaken for this one. */
static const char k_magic[16] = "vramshim-ipc-v2";

/* The importer's request and the exporter's answer. */
typedef struct request {
  char magic[16];
  uint64_t seq, nonce;
} request;
typedef struct reply {
  int32_t status;   /* CUresult */
  int32_t card;
  uint64_t size;    /* the block's size */
  uint64_t span;    /* bytes of the granules under it */
  uint64_t offset;  /* the block's start in the span */
  uint32_t npieces;
  uint32_t pad;
} reply;
/* One physical handle's run under the block; its descriptor rides along. */
typedef struct piece {
  uint64_t span_off, len, handle_off, handle_size;
} piece;
#define MAX_PIECES 65536   /* a 128 GiB block of 2 MiB handles */

int vs_ipc_vmm_is_handle(const CUipcMemHandle *h) { return memcmp(h->reserved, k_magic, sizeof k_magic) == 0; }

/* ---- exporter ------------------------------------------------------------ */

typedef struct export_rec {
  uint64_t base, size, seq, nonce;
  int card;
  UT_hash_handle hh;   /* by base */
  UT_hash_handle hs;   /* by seq */
} export_rec;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static export_rec *g_by_base, *g_by_seq;
static uint64_t g_next_seq = 1;
static _Atomic int g_any_export;   /* lets a free skip the lock when nothing was exported */
static int g_server = -1;          /* listening channel (ipc_channel.h), once started */
static void *g_orphan;            /* a forked child's inheritance, kept reachable */

typedef struct collect {
  piece *p;
  uint64_t *handle;
  uint32_t n, cap;
  uint64_t first_va;
  int oom;
} collect;

/* Under the heap's lock (vs_arena_vmm_pieces): only memory, no arena call. */
static void collect_piece(void *user, uint64_t va, uint64_t len, uint64_t handle, uint64_t handle_off,
                          uint64_t handle_size) {
  collect *c = user;
  if (c->n == 0) c->first_va = va;
  if (c->n == c->cap) {
    uint32_t cap = c->cap ? c->cap * 2 : 8;
    piece *np = cap <= MAX_PIECES ? realloc(c->p, cap * sizeof *np) : NULL;
    if (np) c->p = np;
    uint64_t *nh = np ? realloc(c->handle, cap * sizeof *nh) : NULL;
    if (!np || !nh) {
      c->oom = 1;
      return;
    }
    c->handle = nh;
    c->cap = cap;
  }
  c->p[c->n] = (piece){va - c->first_va, len, handle_off, handle_size};
  c->handle[c->n++] = handle;
}

/* Answers one request on connection fd. */
static void serve(const vs_real_table *real, int fd) {
  request q;
  reply rp;
  memset(&rp, 0, sizeof rp);
  rp.status = CUDA_ERROR_INVALID_HANDLE;
  if (!vs_plat_chan_peer_ok(fd)) {
    rp.status = CUDA_ERROR_INVALID_VALUE;
    (void)vs_plat_chan_send(fd, &rp, sizeof rp, -1);
    return;
  }
  if (vs_plat_chan_recv(fd, &q, sizeof q, NULL) != 0 || memcmp(q.magic, k_magic, sizeof k_magic) != 0) return;
  collect c;
  memset(&c, 0, sizeof c);
  int *fds = NULL;
  /* The lock keeps the block live (its free ends the export under it
   * first) while its handles are read and exported. */
  pthread_mutex_lock(&g_lock);
  export_rec *e;
  HASH_FIND(hs, g_by_seq, &q.seq, sizeof q.seq, e);
  if (e && e->nonce == q.nonce) {
    if (vs_arena_glue_vmm_pieces(e->base, e->size, collect_piece, &c) != 0 || c.oom || c.n == 0 ||
        !(fds = calloc(c.n, sizeof *fds))) {
      rp.status = c.oom || (c.n && !fds) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_HANDLE;
    } else {
      rp.status = CUDA_SUCCESS;
      for (uint32_t i = 0; i < c.n; i++) fds[i] = -1;
      for (uint32_t i = 0; i < c.n && rp.status == CUDA_SUCCESS; i++) {
        CUresult r = real->cuMemExportToShareableHandle(&fds[i], (CUmemGenericAllocationHandle)c.handle[i],
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        if (r != CUDA_SUCCESS) {
          fds[i] = -1;
          rp.status = r;
          VS_WARN("card %d: cannot export the physical memory of IPC block 0x%llx (driver error %d)", e->card,
                  (unsigned long long)e->base, (int)r);
        }
      }
      rp.card = e->card;
      rp.size = e->size;
      rp.offset = e->base - c.first_va;
      rp.span = c.p[c.n - 1].span_off + c.p[c.n - 1].len;
      rp.npieces = c.n;
    }
  }
  pthread_mutex_unlock(&g_lock);
  if (rp.status != CUDA_SUCCESS) rp.npieces = 0;
  if (vs_plat_chan_send(fd, &rp, sizeof rp, -1) == 0)
    for (uint32_t i = 0; i < rp.npieces; i++)
      if (vs_plat_chan_send(fd, &c.p[i], sizeof c.p[i], fds[i]) != 0) break;
  for (uint32_t i = 0; fds && i < c.n; i++)
    if (fds[i] >= 0) vs_plat_chan_close(fds[i]);
  free(fds);
  free(c.p);
  free(c.handle);
}

static void *server_main(void *arg) {
  int lfd = (int)(intptr_t)arg;
  vs_guard_enter();   /* the driver calls below are the shim's own */
  for (;;) {
    int fd = vs_plat_chan_accept(lfd);
    if (fd < 0) {
      VS_WARN("the IPC export thread stops: accept failed (%s); later cuIpcOpenMemHandle of this process's "
              "blocks fail", strerror(errno));
      return NULL;
    }
    const vs_real_table *real = vs_driver_if_loaded();
    if (real && real->cuMemExportToShareableHandle) serve(real, fd);
    vs_plat_chan_close(fd);
  }
}

/* Under g_lock: the listening socket and its thread, started once. */
static int start_server(void) {
  if (g_server >= 0) return 0;
  int dfd = vs_settings_ledger_dir_open(1);
  if (dfd < 0) return -1;
  int lfd = vs_plat_chan_listen(dfd, (int)getpid());
  int saved = errno;
  close(dfd);
  if (lfd < 0) {
    errno = saved;
    return -1;
  }
  int rc = vs_thread_spawn(server_main, (void *)(intptr_t)lfd, "vramshim-ipc");
  if (rc != 0) {
    vs_plat_chan_close(lfd);
    errno = rc;
    return -1;
  }
  g_server = lfd;
  return 0;
}

CUresult vs_ipc_vmm_export(uint64_t base, uint64_t size, int card, CUipcMemHandle *out) {
  pthread_mutex_lock(&g_lock);
  if (start_server() != 0) {
    int e = errno;
    pthread_mutex_unlock(&g_lock);
    VS_ERROR("card %d: cuIpcGetMemHandle fails: cannot serve IPC exports on a socket in %s (%s)", card,
             vs_settings_get()->config.ledger_dir, strerror(e));
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  export_rec *e;
  HASH_FIND(hh, g_by_base, &base, sizeof base, e);
  if (e && (e->size != size || e->card != card)) {
    /* A block of another size at this address: never the same export. */
    HASH_DELETE(hh, g_by_base, e);
    HASH_DELETE(hs, g_by_seq, e);
    free(e);
    e = NULL;
  }
  if (!e) {
    e = calloc(1, sizeof *e);
    if (!e) {
      pthread_mutex_unlock(&g_lock);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->base = base;
    e->size = size;
    e->card = card;
    e->seq = g_next_seq++;
    if (vs_plat_random(&e->nonce, sizeof e->nonce) != 0)
      e->nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)e ^ ((uint64_t)time(NULL) << 16) ^ e->seq;
    HASH_ADD(hh, g_by_base, base, sizeof e->base, e);
    HASH_ADD(hs, g_by_seq, seq, sizeof e->seq, e);
    atomic_store(&g_any_export, 1);
  }
  vs_ipc_token t;
  memset(&t, 0, sizeof t);
  memcpy(t.magic, k_magic, sizeof k_magic);
  t.pid = (int32_t)getpid();
  t.tag = vs_plat_chan_tag();
  t.seq = e->seq;
  t.nonce = e->nonce;
  pthread_mutex_unlock(&g_lock);
  memset(out, 0, sizeof *out);
  memcpy(out->reserved, &t, sizeof t);
  return CUDA_SUCCESS;
}

void vs_ipc_vmm_block_freed(uint64_t base) {
  if (!atomic_load_explicit(&g_any_export, memory_order_relaxed)) return;
  pthread_mutex_lock(&g_lock);
  export_rec *e;
  HASH_FIND(hh, g_by_base, &base, sizeof base, e);
  if (e) {
    HASH_DELETE(hh, g_by_base, e);
    HASH_DELETE(hs, g_by_seq, e);
    free(e);
  }
  pthread_mutex_unlock(&g_lock);
}

/* ---- importer ------------------------------------------------------------ */

typedef struct import_key {
  int32_t pid;
  uint32_t pad;
  uint64_t tag, seq, nonce;
} import_key;

typedef struct import_rec {
  import_key key;
  uint64_t ptr, va, total, lead, size, refs;   /* the reservation: total bytes at va, the span lead bytes in */
  uint32_t npieces;
  piece *p;
  UT_hash_handle hh;   /* by key */
  UT_hash_handle hp;   /* by ptr */
} import_rec;

static pthread_mutex_t g_imp_lock = PTHREAD_MUTEX_INITIALIZER;
static import_rec *g_imp_by_key, *g_imp_by_ptr;
static void *g_imp_orphan;

/* Connects to pid's export channel after checking that it is this user's
 * private one. -1 with *why set. */
static int connect_exporter(int pid, uint64_t tag, const char **why) {
  int dfd = vs_settings_ledger_dir_open(0);
  if (dfd < 0) {
    *why = "this process has no ledger folder (is the exporter running the shim with the same ledger_dir?)";
    return -1;
  }
  int fd = vs_plat_chan_connect(dfd, pid, tag, why);
  close(dfd);
  return fd;
}

/* Where piece p's handle starts, in bytes from the span's start (before
 * it, negative, when the run is not at the handle's start). */
static int64_t handle_at(const piece *p) { return (int64_t)p->span_off - (int64_t)p->handle_off; }

/* Unmaps what map_import mapped and frees its reservation (total bytes at
 * va; the span starts lead bytes into it). */
static void unmap_import(const vs_real_table *real, uint64_t va, uint64_t total, uint64_t lead, const piece *p,
                         uint32_t mapped) {
  for (uint32_t i = 0; i < mapped; i++)
    (void)real->cuMemUnmap((CUdeviceptr)(va + (uint64_t)((int64_t)lead + handle_at(&p[i]))), (size_t)p[i].handle_size);
  if (va) (void)real->cuMemAddressFree((CUdeviceptr)va, (size_t)total);
}

/* Receives the pieces and maps them at a fresh reservation: CUDA_SUCCESS
 * with *va (the reservation, *total bytes) and *lead (where the span starts
 * in it). Each handle is mapped whole, from its offset 0, where the
 * exporter has it relative to the span: a driver may map a handle from
 * offset 0 only (CUDA 13's header: the offset "currently must be zero"; an
 * H200 with driver 580.159.04 refuses any other with
 * CUDA_ERROR_NOT_SUPPORTED, and so does the sim by default). The importer
 * therefore also maps whatever else of the exporter's shares those handles,
 * as the driver's own IPC maps a whole cuMemAlloc allocation; the channel
 * only serves the exporter's own user (ipc_channel.h). */
static CUresult map_import(const vs_real_table *real, int fd, const reply *rp, int dev, piece *p, uint64_t *va,
                           uint64_t *total, uint64_t *lead) {
  CUmemGenericAllocationHandle *hs = calloc(rp->npieces, sizeof *hs);
  if (!hs) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = CUDA_SUCCESS;
  uint32_t got = 0;
  int64_t lo = 0, hi = (int64_t)rp->span;
  for (uint32_t i = 0; i < rp->npieces && r == CUDA_SUCCESS; i++) {
    int pfd = -1;
    if (vs_plat_chan_recv(fd, &p[i], sizeof p[i], &pfd) != 0 || pfd < 0 || p[i].span_off + p[i].len > rp->span ||
        p[i].handle_off + p[i].len > p[i].handle_size || p[i].handle_size > rp->span + (1ull << 40)) {
      if (pfd >= 0) vs_plat_chan_close(pfd);
      r = CUDA_ERROR_INVALID_HANDLE;   /* the exporter went away mid-answer */
      break;
    }
    r = real->cuMemImportFromShareableHandle(&hs[i], (void *)(intptr_t)pfd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    vs_plat_chan_close(pfd);
    if (r != CUDA_SUCCESS) break;
    got++;
    int64_t s = handle_at(&p[i]);
    if (s < lo) lo = s;
    if (s + (int64_t)p[i].handle_size > hi) hi = s + (int64_t)p[i].handle_size;
  }
  CUdeviceptr base = 0;
  uint32_t mapped = 0;
  if (r == CUDA_SUCCESS) r = real->cuMemAddressReserve(&base, (size_t)(hi - lo), 0, 0, 0);
  for (uint32_t i = 0; i < got && r == CUDA_SUCCESS; i++) {
    r = real->cuMemMap(base + (uint64_t)(handle_at(&p[i]) - lo), (size_t)p[i].handle_size, 0, hs[i], 0);
    if (r == CUDA_SUCCESS) mapped++;
  }
  for (uint32_t i = 0; i < got; i++) (void)real->cuMemRelease(hs[i]);   /* the mappings hold the memory now */
  free(hs);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = real->cuMemSetAccess(base, (size_t)(hi - lo), &acc, 1);
  }
  if (r != CUDA_SUCCESS) {
    if (base) unmap_import(real, (uint64_t)base, (uint64_t)(hi - lo), (uint64_t)-lo, p, mapped);
    return r;
  }
  *va = (uint64_t)base;
  *total = (uint64_t)(hi - lo);
  *lead = (uint64_t)-lo;
  return CUDA_SUCCESS;
}

CUresult vs_ipc_vmm_open(const vs_real_table *real, const CUipcMemHandle *h, unsigned flags, CUdeviceptr *ptr,
                         uint64_t *size) {
  vs_ipc_token t;
  memcpy(&t, h->reserved, sizeof t);
  if (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) return CUDA_ERROR_INVALID_VALUE;
  CUdevice dev = 0;
  CUresult r = real->cuCtxGetDevice ? real->cuCtxGetDevice(&dev) : CUDA_ERROR_INVALID_CONTEXT;
  if (r != CUDA_SUCCESS) return r;
  /* The driver opens no handle in the process that made it (the sim: INVALID_CONTEXT). */
  if (t.pid == (int32_t)getpid() && t.tag == vs_plat_chan_tag()) return CUDA_ERROR_INVALID_CONTEXT;
  if (t.pid <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!real->cuMemImportFromShareableHandle || !real->cuMemAddressReserve || !real->cuMemAddressFree ||
      !real->cuMemMap || !real->cuMemUnmap || !real->cuMemSetAccess || !real->cuMemRelease) {
    VS_WARN("cuIpcOpenMemHandle: a vramshim handle of a VMM block from process %d cannot be opened: the driver "
            "lacks the VMM functions", (int)t.pid);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  import_key key = {t.pid, 0, t.tag, t.seq, t.nonce};
  /* The lock is held across the exchange: two threads opening one handle
   * get one mapping (opens are rare; the socket has timeouts). */
  pthread_mutex_lock(&g_imp_lock);
  import_rec *o;
  HASH_FIND(hh, g_imp_by_key, &key, sizeof key, o);
  if (o) {
    o->refs++;
    *ptr = (CUdeviceptr)o->ptr;
    *size = o->size;
    pthread_mutex_unlock(&g_imp_lock);
    return CUDA_SUCCESS;
  }
  const char *why = NULL;
  int fd = connect_exporter(t.pid, t.tag, &why);
  reply rp;
  memset(&rp, 0, sizeof rp);
  request q;
  memset(&q, 0, sizeof q);
  memcpy(q.magic, k_magic, sizeof k_magic);
  q.seq = t.seq;
  q.nonce = t.nonce;
  if (fd >= 0 && (vs_plat_chan_send(fd, &q, sizeof q, -1) != 0 || vs_plat_chan_recv(fd, &rp, sizeof rp, NULL) != 0))
    why = "the exporting process did not answer";
  r = CUDA_ERROR_INVALID_HANDLE;   /* the sim's word for a handle whose memory is gone */
  if (!why && rp.status != CUDA_SUCCESS) {
    r = (CUresult)rp.status;
    why = r == CUDA_ERROR_INVALID_HANDLE ? "the block was freed (or the handle is forged)" : "the exporter refused";
  }
  if (!why && (rp.npieces == 0 || rp.npieces > MAX_PIECES || rp.offset + rp.size > rp.span)) why = "a bad answer";
  piece *p = NULL;
  uint64_t va = 0, total = 0, lead = 0;
  if (!why && !(p = calloc(rp.npieces, sizeof *p))) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
    why = "out of host memory";
  }
  if (!why && (r = map_import(real, fd, &rp, (int)dev, p, &va, &total, &lead)) != CUDA_SUCCESS)
    why = "mapping it failed";
  if (fd >= 0) vs_plat_chan_close(fd);
  if (!why && !(o = calloc(1, sizeof *o))) {
    unmap_import(real, va, total, lead, p, rp.npieces);
    r = CUDA_ERROR_OUT_OF_MEMORY;
    why = "out of host memory";
  }
  if (why) {
    pthread_mutex_unlock(&g_imp_lock);
    free(p);
    VS_WARN("cuIpcOpenMemHandle: a vramshim handle from process %d cannot be opened: %s (error %d)", (int)t.pid,
            why, (int)r);
    return r;
  }
  o->key = key;
  o->va = va;
  o->total = total;
  o->lead = lead;
  o->ptr = va + lead + rp.offset;
  o->size = rp.size;
  o->refs = 1;
  o->npieces = rp.npieces;
  o->p = p;
  HASH_ADD(hh, g_imp_by_key, key, sizeof o->key, o);
  HASH_ADD(hp, g_imp_by_ptr, ptr, sizeof o->ptr, o);
  pthread_mutex_unlock(&g_imp_lock);
  *ptr = (CUdeviceptr)o->ptr;
  *size = o->size;
  return CUDA_SUCCESS;
}

/* Drops one reference of the import at ptr (all of them when all), and
 * the import with the last; 1 when ptr is one. */
static int release_import(const vs_real_table *real, uint64_t ptr, int all) {
  pthread_mutex_lock(&g_imp_lock);
  import_rec *o;
  HASH_FIND(hp, g_imp_by_ptr, &ptr, sizeof ptr, o);
  if (!o) {
    pthread_mutex_unlock(&g_imp_lock);
    return 0;
  }
  if (all) o->refs = 1;
  if (--o->refs == 0) {
    HASH_DELETE(hh, g_imp_by_key, o);
    HASH_DELETE(hp, g_imp_by_ptr, o);
  } else {
    o = NULL;
  }
  pthread_mutex_unlock(&g_imp_lock);
  if (o) {
    unmap_import(real, o->va, o->total, o->lead, o->p, o->npieces);
    free(o->p);
    free(o);
  }
  return 1;
}

int vs_ipc_vmm_close(const vs_real_table *real, uint64_t ptr, CUresult *r) {
  if (!release_import(real, ptr, 0)) return 0;
  *r = CUDA_SUCCESS;
  return 1;
}

void vs_ipc_vmm_drop(const vs_real_table *real, uint64_t ptr) {
  if (real) (void)release_import(real, ptr, 1);
}

void vs_ipc_vmm_atfork_child(void) {
  /* The parent's exports are not the child's (its server thread is not
   * running here), nor are its mappings. Kept reachable, never used. */
  if (g_by_base) g_orphan = g_by_base;
  if (g_imp_by_key) g_imp_orphan = g_imp_by_key;
  g_by_base = g_by_seq = NULL;
  g_imp_by_key = g_imp_by_ptr = NULL;
  g_next_seq = 1;
  atomic_store(&g_any_export, 0);
  if (g_server >= 0) vs_plat_chan_close(g_server);
  g_server = -1;
  pthread_mutex_init(&g_lock, NULL);
  pthread_mutex_init(&g_imp_lock, NULL);
}

/* The socket goes with its exporter (a killed one leaves it: the next
 * process with that pid in that pid namespace replaces it, an importer's
 * connect is refused). */
__attribute__((destructor)) static void remove_socket(void) {
  if (g_server < 0 || !vs_plat_exit_work_ok()) return;
  vs_settings_ledger_dir_unlink(vs_plat_chan_unlink);
}

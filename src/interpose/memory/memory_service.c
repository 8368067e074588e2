/* The device memory service (see memory_service.h): cuMemAlloc from the
 * arena where it is on, every other request for device memory charged to
 * the tenant and passed through, every record accounted. */
#include "memory_service.h"

#include "accounting.h"
#include "arena_glue.h"
#include "contexts.h"
#include "driver_table.h"
#include "ipc_record.h"
#include "ipc_vmm.h"
#include "log.h"
#include "observe.h"
#include "graph_charge.h"
#include "pool_charge.h"
#include "quota.h"
#include "spill.h"
#include "vmm_life.h"

#include <stdatomic.h>
#include <stdlib.h>

static vs_space space_of(vs_mem_kind kind) {
  if (kind == VS_MEM_VMM_PHYS) return VS_SPACE_HANDLE;
  if (kind == VS_MEM_VA_RANGE) return VS_SPACE_VA;
  if (kind == VS_MEM_ARRAY) return VS_SPACE_ARRAY;
  return VS_SPACE_DEVPTR;
}

/* Requests and refusals are counted for device memory only, not for
 * address ranges or peer memory. */
static int holds_device_memory(int kind) { return kind != VS_MEM_VA_RANGE && kind != VS_MEM_IPC; }

/* Which counters a record moves. Device memory of this process is "live";
 * passed through, it is also "reserved" from the driver. An arena block is
 * live only: the arena's backend moves "reserved" when it grows or shrinks. */
static void account(const vs_alloc_info *rec, int sign) {
  switch ((vs_mem_kind)rec->kind) {
  case VS_MEM_VA_RANGE: vs_acct_va_add(rec->card, sign * (int64_t)rec->size); break;
  case VS_MEM_IPC: vs_acct_ipc_add(rec->card, sign * (int64_t)rec->size); break;
  default:
    /* the default pool's view (pool_view.c): what the arena serves for it */
    if (rec->kind == VS_MEM_ASYNC && rec->owner == VS_OWNER_ARENA)
      vs_acct_pool_add(rec->card, sign * (int64_t)rec->size);
    if (sign > 0) {
      vs_acct_live_add(rec->card, rec->size);
      if (rec->owner == VS_OWNER_DRIVER) vs_acct_reserved_add(rec->card, rec->size);
    } else {
      vs_acct_live_sub(rec->card, rec->size);
      if (rec->owner == VS_OWNER_DRIVER) vs_acct_reserved_sub(rec->card, rec->size);
    }
  }
}

/* A request for device memory that failed with r: counted. Observed as a
 * refusal (a dump may follow) only for want of memory (refused by the quota
 * or the arena, the driver's OOM): CUDA_ERROR_NOT_INITIALIZED before
 * cuInit, say, is no refusal (issue 23). */
static void failed(const vs_mem_op *op, CUresult r) {
  vs_acct_failed(op->rec.card);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) vs_observe_refused(op->rec.card, op->rec.size);
  else vs_observe_failed(op->rec.card, op->rec.size);
}

/* Arena blocks' CU_POINTER_ATTRIBUTE_BUFFER_ID: one counter for the
 * process, far above any driver's own (which count allocations from 1),
 * so an id is never repeated, also when an address is reused, and never
 * one the driver gave a pass-through allocation. */
#define VS_BUFFER_ID_BASE (1ull << 62)
static _Atomic uint64_t g_next_buffer = 1;
/* Each thread takes the ids in runs of VS_BUFFER_ID_RUN, so an arena hit
 * makes no locked add of its own for one; ids stay unique, not ordered
 * across threads (nothing promises that of the driver's either). */
#define VS_BUFFER_ID_RUN 1024
static __thread struct {
  uint64_t next, end;
} t_ids __attribute__((tls_model("initial-exec")));

static uint64_t next_buffer_id(void) {
  if (t_ids.next == t_ids.end) {
    t_ids.next = atomic_fetch_add_explicit(&g_next_buffer, VS_BUFFER_ID_RUN, memory_order_relaxed);
    t_ids.end = t_ids.next + VS_BUFFER_ID_RUN;
  }
  return VS_BUFFER_ID_BASE + t_ids.next++;
}

/* Ends the request's hold on its context; what a hook returns next. */
static int done(vs_mem_op *op) {
  vs_ctx_put(op->ctx);
  op->ctx = NULL;
  return VS_MEM_DONE;
}

/* Records a fresh allocation and moves the counters. */
static void record(vs_mem_op *op) {
  vs_alloc_info stale;
  int ins = vs_tracker_insert(op->space, &op->rec, &stale);
  if (ins == 1) {
    /* The driver handed out a key the shim still held: its free went by a
     * path the shim does not see. Drop the stale record's bytes. A second
     * opening of an IPC handle already open is not that: the driver (and
     * ipc_vmm.c) answer it with the same pointer, reference counted. */
    if (!(stale.kind == VS_MEM_IPC && op->rec.kind == VS_MEM_IPC))
      VS_WARN("card %d: the driver reused 0x%llx, which the shim never saw freed; accounting corrected",
              stale.card, (unsigned long long)stale.key);
    account(&stale, -1);
    if (stale.charged) vs_quota_uncharge(stale.card, stale.size);
  } else if (ins < 0) {
    VS_ERROR("card %d: out of host memory tracking 0x%llx; its free will not be accounted",
             op->rec.card, (unsigned long long)op->rec.key);
  }
  account(&op->rec, +1);
  if (op->rec.kind == VS_MEM_VMM_PHYS) vs_vmm_life_created(op->rec.key);
  if (holds_device_memory(op->rec.kind)) {
    /* The ledger's per-process "live" column, refreshed where the ledger
     * was touched anyway: this request's charge (a driver allocation, or
     * an arena growth) was admitted. An arena hit makes no ledger call. */
    if (vs_quota_live_due()) vs_quota_refresh_live(op->rec.card);
    vs_observe_alloc(op->rec.card, op->rec.key, op->rec.size);
  }
}


/* on_limit = spill (spill.h): a refused cuMemAlloc served from host memory
 * the device can address. 1 when served (op answers it: success, the
 * address); the block is neither in the tracker nor in the device counters
 * (spill.c keeps it and counts it apart), so it never counts against the card. */
static int spilled(vs_mem_op *op, uint64_t size, int by_driver) {
  uint64_t addr = 0;
  if (!vs_spill_alloc(op->rec.card, op->rec.ctx_id, size, by_driver, &addr)) return 0;
  op->result = CUDA_SUCCESS;
  op->addr = addr;
  return 1;
}

/* Waits under on_limit = wait (vs_quota_wait), or for other processes'
 * answers to a trim round (WAIT_ROUND: vs_quota_trim_round; WAIT_CARD:
 * every cache on the card, vs_quota_ask_card), without holding the
 * request's context: ending a context waits for every hold on it
 * (contexts.h), and that end may be what frees the memory waited for, so
 * a hold kept across the wait would stall the end until the wait ran out.
 * 1: go on, the context held again; 0: stop (the wait ran out, or the
 * context ended meanwhile: then op->ctx is NULL with op->rec.ctx_id set). */
enum { WAIT_QUOTA, WAIT_ROUND, WAIT_CARD };
static int wait_unheld(vs_mem_op *op, uint64_t size, uint64_t *deadline, int what) {
  uint64_t id = op->ctx ? op->ctx->id : 0;
  vs_ctx_put(op->ctx);
  op->ctx = NULL;
  int go = what == WAIT_ROUND  ? vs_quota_trim_round(op->rec.card, deadline)
           : what == WAIT_CARD ? vs_quota_ask_card(op->rec.card) > 0
                               : vs_quota_wait(op->rec.card, size, deadline);
  if (id && !(op->ctx = vs_ctx_acquire_id(id))) return 0;
  return go;
}

/* The request's context ended while it waited: the driver's answer for a
 * request in a destroyed context, nothing charged, no refusal. */
static int ended_while_waiting(vs_mem_op *op) {
  if (op->ctx || !op->rec.ctx_id) return 0;
  op->result = CUDA_ERROR_CONTEXT_IS_DESTROYED;
  return 1;
}

/* serve: how the arena may serve it (VS_ROUTE_*; a cuMemAlloc is OFF_LANE:
 * its memory may be used on any stream at once). */
/* A request the driver's pool serves: charged by what the pool grows
 * (pool_charge.h), not block by block. */
static int pool_served(vs_mem_kind kind) { return kind == VS_MEM_POOL || kind == VS_MEM_ASYNC; }

/* The charge before the driver is asked: the pool's growth for a pool
 * request, else the request itself. */
static CUresult charge(vs_mem_op *op, vs_mem_kind kind, uint64_t size, CUmemoryPool pool) {
  if (pool_served(kind)) {
    CUresult q = vs_pool_alloc_begin(vs_driver_if_loaded(), &op->pool, pool, op->rec.card, size);
    if (q != CUDA_SUCCESS || !op->pool.per_block) return q;
  }
  CUresult q = vs_quota_charge(op->rec.card, size);
  if (q == CUDA_SUCCESS) op->rec.charged = 1;
  return q;
}

static int alloc_begin(vs_mem_op *op, vs_mem_kind kind, int card, uint64_t size, vramshim_driver_call call,
                       int serve, CUstream stream, CUmemoryPool pool) {
  op->space = space_of(kind);
  op->pool.pool = NULL;
  op->pool.admitted = 0;
  op->pool.serial = 0;
  op->pool.per_block = 0;
  op->call = call;
  op->known = 0;
  op->rec.key = 0;
  op->rec.size = size;
  op->rec.card = card < 0 ? 0 : card;
  op->rec.kind = (int32_t)kind;
  op->rec.owner = VS_OWNER_DRIVER;
  op->rec.charged = 0;
  op->rec.sync_memops = 0;
  op->rec.ctx_id = 0;
  op->rec.buffer_id = 0;
  op->rec.pool = 0;
  op->result = CUDA_SUCCESS;
  op->addr = 0;
  op->ctx = NULL;
  op->zero = 0;
  /* The context the memory will belong to, held until the request is
   * recorded: an end of that context waits for it (contexts.h). */
  if ((VS_KIND_BIT(kind) & VS_CTX_OWNED) || serve != VS_ROUTE_DRIVER) {
    op->ctx = vs_ctx_acquire_current(vs_driver_if_loaded());
    if (op->ctx) op->rec.ctx_id = op->ctx->id;
  }
  if (!holds_device_memory(kind)) return VS_MEM_PASS;
  vs_acct_request(op->rec.card, 1);
  /* Zero bytes: the driver says what it says of that (cuMemAlloc(0) is
   * CUDA_ERROR_INVALID_VALUE); nothing to charge, and no refusal. */
  if (size == 0) {
    op->zero = 1;
    return VS_MEM_PASS;
  }

  /* cuMemAlloc is served by the arena of its context where the arena is
   * on for the card. With no current context the driver gives its own
   * answer. */
  if (serve != VS_ROUTE_DRIVER && card >= 0 && op->ctx) {
    uint64_t addr = 0, deadline = 0;
    CUresult res = CUDA_SUCCESS;
    int served;
    /* A quota refusal inside the arena (its ladder already trimmed) waits
     * here, outside the arena's locks, under on_limit = wait; under spill
     * it is served from host memory; with fail (or spill past MAX),
     * vs_quota_wait logs the one refusal line and says stop. */
    int others_trimmed = 0;
    for (;;) {
      served = vs_arena_glue_alloc(op->ctx, size, serve == VS_ROUTE_LANE, (uint64_t)(uintptr_t)stream, &addr, &res);
      if (served != VS_MEM_DONE || res != CUDA_ERROR_OUT_OF_MEMORY) break;
      /* The arena's ladder gave back its own cache; the other contexts'
       * arenas on the card hold the tenant's too (the view counts it). */
      if (!others_trimmed++ && vs_arena_glue_trim_others(op->ctx)) continue;
      /* Host memory only once other processes' caches had their chance. */
      if (kind == VS_MEM_DEVICE && vs_quota_spill_max(op->rec.card)) {
        if (wait_unheld(op, size, &deadline, WAIT_ROUND)) continue;
        if (ended_while_waiting(op)) return done(op);
      }
      if (kind == VS_MEM_DEVICE && spilled(op, size, !vs_quota_refusal_pending())) return done(op);
      if (!wait_unheld(op, size, &deadline, WAIT_QUOTA)) break;
    }
    if (ended_while_waiting(op)) return done(op);
    if (served == VS_MEM_DONE) {
      op->result = res;
      if (res == CUDA_SUCCESS) {
        op->rec.key = addr;
        op->rec.owner = VS_OWNER_ARENA;
        op->rec.buffer_id = next_buffer_id();
        op->addr = addr;
        record(op);
      } else {
        failed(op, res);
      }
      return done(op);
    }
  }
  /* A stream-ordered block the driver's pool serves after all (the arena
   * is off for the card) belongs to the device, not to the context. */
  if (!(VS_KIND_BIT(kind) & VS_CTX_OWNED) && op->ctx) {
    vs_ctx_put(op->ctx);
    op->ctx = NULL;
    op->rec.ctx_id = 0;
  }
  /* Passed through: the tenant is charged before the driver is asked
   * (waiting for others to give memory back under on_limit = wait). */
  CUresult q;
  uint64_t deadline = 0;
  int trimmed = 0;
  for (;;) {
    q = charge(op, kind, size, card < 0 ? NULL : pool);
    if (q == CUDA_SUCCESS) break;
    /* What this process's arenas cache on the card is the tenant's too
     * (charged when they grew): given back once before a refusal stands,
     * as the arena's own OOM ladder does for its requests. */
    if (!trimmed && card >= 0) {
      trimmed = 1;
      vs_arena_glue_trim_card(card, 0);
      continue;
    }
    if (kind == VS_MEM_DEVICE && card >= 0 && vs_quota_spill_max(card)) {
      if (wait_unheld(op, size, &deadline, WAIT_ROUND)) continue;
      if (ended_while_waiting(op)) return done(op);
    }
    if (kind == VS_MEM_DEVICE && card >= 0 && spilled(op, size, 0)) return done(op);
    if (!wait_unheld(op, size, &deadline, WAIT_QUOTA)) break;
  }
  if (ended_while_waiting(op)) return done(op);
  if (q != CUDA_SUCCESS) {
    op->result = q;
    failed(op, q);
    return done(op);
  }
  return VS_MEM_PASS;
}

int vs_mem_alloc_begin(vs_mem_op *op, vs_mem_kind kind, int card, uint64_t size, vramshim_driver_call call) {
  return alloc_begin(op, kind, card, size, call, kind == VS_MEM_DEVICE ? VS_ROUTE_OFF_LANE : VS_ROUTE_DRIVER, NULL,
                     NULL);
}

int vs_mem_alloc_pool_begin(vs_mem_op *op, int card, uint64_t size, vramshim_driver_call call, CUmemoryPool pool) {
  return alloc_begin(op, VS_MEM_POOL, card, size, call, VS_ROUTE_DRIVER, NULL, pool);
}

int vs_mem_alloc_stream_begin(vs_mem_op *op, int card, uint64_t size, vramshim_driver_call call, int route,
                              CUstream stream) {
  if (route != VS_ROUTE_LANE && route != VS_ROUTE_OFF_LANE) route = VS_ROUTE_DRIVER;
  return alloc_begin(op, VS_MEM_ASYNC, card, size, call, route, stream, NULL);
}

int vs_mem_retry_refused(vs_mem_op *op, CUresult r) {
  int kind = op->rec.kind, card = op->rec.card;
  if (r != CUDA_ERROR_OUT_OF_MEMORY || op->zero || card < 0 || !holds_device_memory(kind)) return 0;
  /* This process's arenas first (their cache is the tenant's, and a
   * refusal the books did not make is not what their ladders see), then
   * every other process's cache on the card. */
  int again = vs_arena_glue_reclaimable(card) != 0;
  if (again) vs_arena_glue_trim_card(card, 0);
  uint64_t unused = 0;
  if (wait_unheld(op, op->rec.size, &unused, WAIT_CARD)) again = 1;
  /* The request's context ended meanwhile: the driver's refusal stands. */
  if (!op->ctx && op->rec.ctx_id) return 0;
  return again;
}

CUresult vs_mem_alloc_end_sized(vs_mem_op *op, CUresult r, uint64_t addr, uint64_t size) {
  vs_acct_call(op->rec.card, op->call);
  /* a pool's block: the pool's charge becomes what it now reserves */
  op->rec.pool = op->pool.serial;
  vs_pool_alloc_end(vs_driver_if_loaded(), &op->pool, r);
  if (r != CUDA_SUCCESS) {
    if (op->rec.charged) vs_quota_uncharge(op->rec.card, op->rec.size);
    op->rec.charged = 0;
    /* The driver itself refused a cuMemAlloc the tenant was admitted for:
     * under on_limit = spill, host memory instead (the hook reads op->addr). */
    if (r == CUDA_ERROR_OUT_OF_MEMORY && op->rec.kind == VS_MEM_DEVICE && spilled(op, op->rec.size, 1)) {
      done(op);
      return CUDA_SUCCESS;
    }
    if (holds_device_memory(op->rec.kind) && !op->zero) failed(op, r);
    done(op);
    return r;
  }
  /* The driver's size can differ from the estimate charged (pitch). */
  if (op->rec.charged && size > op->rec.size) vs_quota_force(op->rec.card, size - op->rec.size);
  if (op->rec.charged && size < op->rec.size) vs_quota_uncharge(op->rec.card, op->rec.size - size);
  op->rec.key = addr;
  op->rec.size = size;
  record(op);
  done(op);
  return r;
}

CUresult vs_mem_alloc_end(vs_mem_op *op, CUresult r, uint64_t addr) {
  return vs_mem_alloc_end_sized(op, r, addr, op->rec.size);
}

static int free_begin(vs_mem_op *op, vs_space space, unsigned kind_mask, uint64_t key, vramshim_driver_call call,
                      int route);

int vs_mem_free_begin(vs_mem_op *op, vs_space space, unsigned kind_mask, uint64_t key,
                      vramshim_driver_call call) {
  return free_begin(op, space, kind_mask, key, call, VS_ROUTE_OFF_LANE);
}

static _Atomic int g_said_captured_free;

int vs_mem_free_stream_begin(vs_mem_op *op, uint64_t key, vramshim_driver_call call, int route) {
  vs_alloc_info rec;
  if (route == VS_ROUTE_CAPTURED && vs_tracker_find(VS_SPACE_DEVPTR, key, &rec) == 0 &&
      rec.owner == VS_OWNER_ARENA) {
    if (!atomic_exchange(&g_said_captured_free, 1))
      VS_WARN("cuMemFreeAsync of arena block 0x%llx on a stream capturing a graph: the block stays allocated "
              "(a graph cannot free memory the driver did not allocate); set VRAMSHIM_ARENA_ASYNC=off for this "
              "program to give stream-ordered allocations to the driver's pool", (unsigned long long)key);
    op->space = VS_SPACE_DEVPTR;
    op->call = call;
    op->known = 0;
    op->ctx = NULL;
    op->addr = 0;
    op->result = CUDA_SUCCESS;
    return VS_MEM_DONE;
  }
  return free_begin(op, VS_SPACE_DEVPTR, VS_FREE_MEM_FREE_ASYNC, key, call, route);
}

/* route VS_ROUTE_LANE: a cuMemFreeAsync on the current context's legacy
 * stream; anything else frees off the lane. */
static int free_begin(vs_mem_op *op, vs_space space, unsigned kind_mask, uint64_t key, vramshim_driver_call call,
                      int route) {
  op->space = space;
  op->call = call;
  op->result = CUDA_SUCCESS;
  op->addr = 0;
  op->ctx = NULL;
  op->deferred = 0;
  /* A release after which the handle's memory stays (another reference,
   * a mapping): the record and the charge stay too; the driver is asked. */
  if (space == VS_SPACE_HANDLE && !vs_vmm_life_release(key)) {
    op->known = 0;
    op->deferred = 1;
    op->rec.key = key;
    return VS_MEM_PASS;
  }
  /* Removed before the driver frees it: see tracker.h. */
  op->known = vs_tracker_remove(space, key, kind_mask, &op->rec) == 0;
  /* A spilled block (on_limit = spill) goes back to the host: spill.c
   * gives its bytes back to the ledger. One relaxed load when none lives. */
  if (!op->known && space == VS_SPACE_DEVPTR && (kind_mask & VS_KIND_BIT(VS_MEM_DEVICE)) &&
      vs_spill_free(key, &op->result))
    return VS_MEM_DONE;
  if (!op->known) {
    op->rec.key = key;
    op->rec.size = 0;
    op->rec.card = -1;
    op->rec.kind = -1;
    op->rec.owner = VS_OWNER_DRIVER;
    op->rec.charged = 0;
    /* An unknown key inside the arena's own driver memory (a double free
     * of an arena block at a chunk's base, say) must not reach the driver:
     * it would free memory that other blocks live in. */
    if (space == VS_SPACE_DEVPTR && (kind_mask & VS_KIND_BIT(VS_MEM_DEVICE)) && vs_arena_glue_holds(key)) {
      op->result = CUDA_ERROR_INVALID_VALUE;
      return VS_MEM_DONE;
    }
    return VS_MEM_PASS;
  }
  if (op->rec.owner == VS_OWNER_ARENA) {
    /* The arena keeps the block pending until device work before this
     * free has finished (src/arena: stream safety); no driver call. Its
     * context may have ended since this thread took the record: then the
     * driver freed it, and says so. */
    vs_ipc_block_freed(key);   /* its IPC handles end with it (ipc_record.h) */
    /* Observed (the trace's free line) before the arena may hand the
     * address to another thread, whose allocate line must come after it
     * (issue 23: a trace recorded from several threads replays). */
    vs_observe_free(op->rec.card, op->rec.key, op->rec.size);
    vs_ctx *c = vs_ctx_acquire_id(op->rec.ctx_id);
    /* The lane is the legacy stream of the block's own context. */
    int lane = route == VS_ROUTE_LANE && vs_ctx_is_current(vs_driver_if_loaded(), c);
    if (c && vs_arena_glue_free(c, key, op->rec.size, lane) != 0)
      VS_ERROR("card %d: arena lost block 0x%llx; accounting kept", op->rec.card, (unsigned long long)key);
    /* No driver call counted: the backend counts the ones it makes. */
    vs_acct_request(op->rec.card, 0);
    account(&op->rec, -1);
    /* Someone on this card waits for memory (on_limit = wait): what this
     * process caches is charged to it, so give the cache back now rather
     * than at the next growth or exit. One load of the ledger when nobody waits. */
    if (c && vs_quota_waiters(op->rec.card)) vs_arena_glue_trim(c);
    vs_ctx_put(c);
    op->result = c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    return VS_MEM_DONE;
  }
  /* The driver frees it. Its context is held across the call: an end of
   * the context waits for the hold, so its sweep finds the record again if
   * the driver refuses. If the context ended since this thread took the
   * record (the sweep could not see it), the driver has freed that memory
   * with the context: the record's bytes go here, with the driver's answer
   * for a pointer of a destroyed context. */
  if (op->rec.ctx_id && !(op->ctx = vs_ctx_acquire_id(op->rec.ctx_id))) {
    account(&op->rec, -1);
    if (op->rec.charged) vs_quota_uncharge(op->rec.card, op->rec.size);
    if (holds_device_memory(op->rec.kind)) vs_observe_free(op->rec.card, op->rec.key, op->rec.size);
    op->result = CUDA_ERROR_INVALID_VALUE;
    return VS_MEM_DONE;
  }
  /* Observed before the driver may hand the address out again (see the
   * arena's case above); vs_mem_free_end observes it again if the driver
   * refuses the free. */
  if (holds_device_memory(op->rec.kind)) vs_observe_free(op->rec.card, op->rec.key, op->rec.size);
  return VS_MEM_PASS;
}

/* A record the driver has freed leaves the counters and the tenant's books. */
static void freed(const vs_alloc_info *rec) {
  if (holds_device_memory(rec->kind)) vs_acct_request(rec->card, 0);
  account(rec, -1);
  if (rec->charged) vs_quota_uncharge(rec->card, rec->size);
  else if (holds_device_memory(rec->kind)) vs_quota_refresh_live(rec->card);
}

CUresult vs_mem_free_end(vs_mem_op *op, CUresult r) {
  if (op->deferred) {
    vs_alloc_info rec;
    vs_acct_call(vs_tracker_find(VS_SPACE_HANDLE, op->rec.key, &rec) == 0 ? rec.card : 0, op->call);
    if (r != CUDA_SUCCESS) vs_vmm_life_retained(op->rec.key);   /* the reference was not given back */
    return r;
  }
  if (!op->known) {
    /* Never ours (or already freed): the driver's answer, nothing to undo. */
    VS_DEBUG("free of 0x%llx, unknown to the shim, forwarded: driver said %d",
             (unsigned long long)op->rec.key, (int)r);
    return r;
  }
  vs_acct_call(op->rec.card, op->call);
  if (r != CUDA_SUCCESS) {
    /* Still live in the driver, so nobody can have been handed the key.
     * vs_mem_free_begin observed the free: observed live again (a trace
     * shows the refused free as a free and an allocate of the block). */
    vs_tracker_insert(op->space, &op->rec, NULL);
    if (holds_device_memory(op->rec.kind)) vs_observe_alloc(op->rec.card, op->rec.key, op->rec.size);
    vs_ctx_put(op->ctx);
    op->ctx = NULL;
    return r;
  }
  vs_ctx_put(op->ctx);
  op->ctx = NULL;
  freed(&op->rec);
  /* A pool's block went back to its pool (at once, or in stream order): the
   * pool may keep it reserved or give it back; what it holds is read again
   * (and at the program's next synchronisation, stream_syncs.c). */
  if (op->rec.owner == VS_OWNER_DRIVER && pool_served((vs_mem_kind)op->rec.kind))
    vs_pool_block_freed(op->rec.pool, op->rec.size);
  /* cuMemFree synchronises the device, where pools give back what is above
   * their threshold: one relaxed load when this process charges no pool. */
  if (op->rec.owner == VS_OWNER_DRIVER) vs_pool_refresh(vs_driver_if_loaded(), op->rec.card);
  return r;
}

void vs_mem_vmm_mapped(uint64_t handle, uint64_t va, uint64_t size) { vs_vmm_life_mapped(handle, va, size); }

void vs_mem_vmm_retained(uint64_t handle) { vs_vmm_life_retained(handle); }

/* The memory of released handles whose last mapping this unmap removed
 * leaves the books now, as a release of an unmapped handle would. */
void vs_mem_vmm_unmapped(uint64_t va, uint64_t size) {
  uint64_t *ended = NULL;
  size_t n = vs_vmm_life_unmapped(va, size, &ended);
  for (size_t i = 0; i < n; i++) {
    vs_alloc_info rec;
    if (vs_tracker_remove(VS_SPACE_HANDLE, ended[i], VS_FREE_RELEASE, &rec) != 0) continue;
    vs_observe_free(rec.card, rec.key, rec.size);
    freed(&rec);
  }
  free(ended);
}

int vs_mem_lookup(vs_space space, uint64_t key, vs_alloc_info *out) {
  return vs_tracker_find(space, key, out);
}

int vs_mem_info(int card, uint64_t *free_bytes, uint64_t *total_bytes) {
  return vs_quota_view(card, free_bytes, total_bytes);
}

int vs_mem_info_driver(int card, uint64_t drv_free, uint64_t drv_total, uint64_t *free_bytes, uint64_t *total_bytes) {
  return vs_quota_view_driver(card, drv_free, drv_total, free_bytes, total_bytes);
}

int vs_mem_range(uint64_t ptr, uint64_t *base, uint64_t *size) { return vs_arena_glue_range(ptr, base, size); }

int vs_mem_block_at(uint64_t ptr, vs_mem_block *out) {
  int card = 0;
  uint64_t h = 0, b = 0, sz = 0;
  /* Memory no arena holds (most pointers asked about) is the driver's:
   * known without the context lock (arena_backend.c's published ranges). */
  if (!vs_arena_glue_holds(ptr)) return VS_AT_DRIVER;
  if (vs_arena_glue_find(ptr, &card, &h, &b, &sz) == 0) {
    vs_alloc_info rec;
    out->base = b;
    out->size = sz;
    out->ctx_handle = h;
    out->card = card;
    /* 0 only if a racing free took it in between (the program's race). */
    int found = vs_tracker_find(VS_SPACE_DEVPTR, b, &rec) == 0;
    out->buffer_id = found ? rec.buffer_id : 0;
    out->stream_ordered = found && rec.kind == VS_MEM_ASYNC;
    out->sync_memops = found && rec.sync_memops;
    return VS_AT_BLOCK;
  }
  return vs_arena_glue_holds(ptr) ? VS_AT_GAP : VS_AT_DRIVER;   /* released meanwhile: the driver's */
}

int vs_mem_block_set_sync_memops(uint64_t base, int on) {
  return vs_tracker_set_sync_memops(VS_SPACE_DEVPTR, base, on);
}

/* The records context c owned in one key space leave every book. */
static void sweep_space(vs_ctx *c, vs_space space, size_t *count, uint64_t *bytes_out) {
  vs_alloc_info *v = NULL;
  size_t n = vs_tracker_take_ctx(space, c->id, VS_CTX_SWEPT, &v);
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; i++) {
    account(&v[i], -1);
    /* The charge stays until the driver has freed the memory (finish):
     * given back before, another process could be admitted for bytes the
     * card still holds. */
    if (v[i].charged && v[i].card == c->card) c->swept_charge += v[i].size;
    else if (v[i].charged) vs_quota_uncharge(v[i].card, v[i].size);
    if (v[i].owner == VS_OWNER_ARENA) vs_ipc_block_freed(v[i].key);   /* its IPC handles end with it */
    if (v[i].kind == VS_MEM_IPC) {   /* an opening ends with the context it was opened in */
      vs_ipc_vmm_drop(vs_driver_if_loaded(), v[i].key);
      vs_ipc_opened_forget(v[i].key);
    }
    if (holds_device_memory(v[i].kind)) {
      vs_observe_free(v[i].card, v[i].key, v[i].size);
      bytes += v[i].size;
    }
  }
  free(v);
  *count += n;
  *bytes_out += bytes;
}

/* c is unlinked with no references: its records leave the tracker (and
 * their counters go; their charges at finish): device pointers and arrays
 * (VMM handles and ranges are no context's: VS_CTX_OWNED). Done before the
 * driver frees the memory where the end is certain, so no address or handle
 * the driver hands out again can meet a record of the old context. */
static void sweep(vs_ctx *c) {
  size_t n = 0;
  uint64_t bytes = 0;
  sweep_space(c, VS_SPACE_DEVPTR, &n, &bytes);
  sweep_space(c, VS_SPACE_ARRAY, &n, &bytes);
  vs_spill_ctx_end(c->id);   /* its spilled blocks (host memory) go with it too */
  if (n) {
    char b[32];
    VS_DEBUG("card %d: context %#llx ends holding %llu allocations (%s) never freed; the driver frees them",
             c->card, (unsigned long long)c->handle, (unsigned long long)n, vs_fmt_bytes(bytes, b, sizeof b));
  }
}

/* After the driver's end: the swept records' charge goes, the arena goes
 * (its VMM memory released now that the device is done with it), then the
 * record. */
static void finish(vs_ctx *c) {
  if (c->swept_charge) vs_quota_uncharge(c->card, c->swept_charge);
  c->swept_charge = 0;
  vs_arena_glue_ctx_end(c);
  vs_pool_refresh(vs_driver_if_loaded(), c->card);   /* what the card's pools hold after the end */
  vs_graph_mem_refresh(vs_driver_if_loaded(), c->card);   /* and its graph pool */
  vs_quota_refresh_live(c->card);
  vs_ctx_free(c);
}

void vs_mem_ctx_begin(uint64_t handle, int dev, int primary) {
  vs_ctx *stale = NULL;
  if (primary) vs_ctx_primary_retained(handle, dev, &stale);
  else vs_ctx_created(handle, dev, &stale);
  if (stale) {   /* its end went by unseen: the driver has let go of it */
    sweep(stale);
    finish(stale);
  }
}

vs_ctx *vs_mem_ctx_ending(uint64_t handle, int primary_dev) {
  vs_ctx *c = vs_ctx_unlink(handle, primary_dev);
  if (c) sweep(c);
  return c;
}

void vs_mem_ctx_ended(vs_ctx *c, CUresult r) {
  if (!c) return;
  if (r != CUDA_SUCCESS)
    VS_WARN("card %d: the driver refused to end context %#llx (error %d) after the shim had let go of its memory; "
            "its allocations are no longer accounted", c->card, (unsigned long long)c->handle, (int)r);
  finish(c);
}

void vs_mem_ctx_end(uint64_t handle, int primary_dev) { vs_mem_ctx_ended(vs_mem_ctx_ending(handle, primary_dev), CUDA_SUCCESS); }

void vs_mem_count_call(int card, vramshim_driver_call call) { vs_acct_call(card < 0 ? 0 : card, call); }

void vs_mem_atfork_prepare(void) {
  vs_tracker_atfork_prepare();
  vs_spill_atfork_prepare();
}
void vs_mem_atfork_parent(void) {
  vs_spill_atfork_parent();
  vs_tracker_atfork_parent();
}

void vs_mem_atfork_child(void) {
  vs_tracker_atfork_child();
  vs_ctx_atfork_child();
  vs_acct_reset();
  vs_arena_glue_atfork_child();
  vs_ipc_atfork_child();
  vs_ipc_vmm_atfork_child();
  vs_quota_atfork_child();
  vs_pool_atfork_child();
  vs_graph_mem_atfork_child();
  vs_vmm_life_atfork_child();
  vs_spill_atfork_child();
  vs_observe_atfork_child();
}

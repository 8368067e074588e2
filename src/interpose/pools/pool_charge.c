/* Driver pools' reserved memory charged to the tenant (pool_charge.h).
 *
 * The table holds one entry per pool this process allocated from (or
 * created, imported, trimmed): its card, whether it is charged at all, and
 * `charged`, the bytes of it the ledger holds for this process. For a live
 * pool `charged` is the driver's RESERVED_MEM_CURRENT as last read; for a
 * destroyed one, what its blocks still allocated use, given back as they
 * are freed. Invariant: the sum of `charged` over the table is what this
 * process's ledger slot holds for pools (each change of an entry moves the
 * ledger by the same amount, under the table's lock).
 * Few pools live in a program (one per device, a handful created), so the
 * table is an array searched linearly. */
#include "pool_charge.h"

#include "arena_glue.h"
#include "guard.h"
#include "log.h"
#include "quota.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct pool_ent {
  CUmemoryPool h;
  uint64_t serial;     /* never reused: a block names its entry by it */
  int card;
  int exempt;          /* host memory or imported: never charged */
  int destroyed;
  uint64_t charged;
  uint64_t blocks;     /* live blocks allocated from it through the shim */
} pool_ent;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_ent *g_ents;
static size_t g_n, g_cap;
static uint64_t g_serial;
static _Atomic size_t g_charging;   /* entries that may hold a charge: 0 makes refresh free */

/* g_lock held. The live entry of h, or NULL. */
static pool_ent *find_live(CUmemoryPool h) {
  for (size_t i = 0; i < g_n; i++)
    if (g_ents[i].h == h && !g_ents[i].destroyed) return &g_ents[i];
  return NULL;
}

static pool_ent *find_serial(uint64_t serial) {
  for (size_t i = 0; i < g_n; i++)
    if (g_ents[i].serial == serial) return &g_ents[i];
  return NULL;
}

/* g_lock held. The live entry of h, made when missing (card may be -1 when
 * unknown yet); NULL out of memory. */
static pool_ent *get(CUmemoryPool h, int card) {
  pool_ent *e = find_live(h);
  if (e) {
    if (e->card < 0) e->card = card;
    return e;
  }
  if (g_n == g_cap) {
    size_t nc = g_cap ? g_cap * 2 : 8;
    pool_ent *nv = realloc(g_ents, nc * sizeof *nv);
    if (!nv) return NULL;
    g_ents = nv;
    g_cap = nc;
  }
  e = &g_ents[g_n++];
  memset(e, 0, sizeof *e);
  e->h = h;
  e->serial = ++g_serial;
  e->card = card;
  atomic_store_explicit(&g_charging, g_n, memory_order_relaxed);
  return e;
}

/* g_lock held: drops e when nothing of it is charged or counted any more. */
static void drop_if_done(pool_ent *e) {
  if (!e->destroyed || e->charged || e->blocks) return;
  *e = g_ents[--g_n];
  atomic_store_explicit(&g_charging, g_n, memory_order_relaxed);
}

static int read_attr(const vs_real_table *real, CUmemoryPool h, CUmemPool_attribute attr, uint64_t *out) {
  if (!real || !real->cuMemPoolGetAttribute) return -1;
  cuuint64_t v = 0;
  vs_guard_enter();
  CUresult r = real->cuMemPoolGetAttribute(h, attr, &v);
  vs_guard_leave();
  if (r != CUDA_SUCCESS) return -1;
  *out = v;
  return 0;
}

/* g_lock held: e->charged becomes `now`; the ledger moves by the
 * difference, less `admitted` (already charged for it). */
static void settle(pool_ent *e, uint64_t now, uint64_t admitted) {
  uint64_t before = e->charged + admitted;
  e->charged = now;
  if (e->card < 0) return;
  if (now > before) vs_quota_force(e->card, now - before);
  else if (now < before) vs_quota_uncharge(e->card, before - now);
}

/* g_lock held: reads a live, charged entry's pool again. */
static void reread(const vs_real_table *real, pool_ent *e) {
  uint64_t now;
  if (e->exempt || e->destroyed || read_attr(real, e->h, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now)) return;
  settle(e, now, 0);
}

/* The pool that cuMemAllocAsync takes on card: the device's current one. */
static CUmemoryPool current_pool(const vs_real_table *real, int card) {
  CUmemoryPool p = NULL;
  if (card < 0 || !real->cuDeviceGetMemPool) return NULL;
  vs_guard_enter();
  CUresult r = real->cuDeviceGetMemPool(&p, (CUdevice)card);
  vs_guard_leave();
  return r == CUDA_SUCCESS ? p : NULL;
}

static uint64_t round_growth(uint64_t n) {
  uint64_t r = (n + VS_POOL_GROWTH_UNIT - 1) / VS_POOL_GROWTH_UNIT * VS_POOL_GROWTH_UNIT;
  return r < n ? n : r;
}

CUresult vs_pool_alloc_begin(const vs_real_table *real, vs_pool_op *op, CUmemoryPool pool, int card, uint64_t size) {
  op->pool = NULL;
  op->card = card;
  op->admitted = 0;
  op->serial = 0;
  op->per_block = 0;
  if (card < 0) return CUDA_SUCCESS;   /* no current context: the driver's error */
  if (!pool) pool = current_pool(real, card);
  if (!pool) {
    op->per_block = 1;
    return CUDA_SUCCESS;
  }
  pthread_mutex_lock(&g_lock);
  pool_ent *e = get(pool, card);
  int exempt = !e || e->exempt;
  uint64_t serial = e ? e->serial : 0;
  pthread_mutex_unlock(&g_lock);
  if (exempt) return CUDA_SUCCESS;
  uint64_t grow = round_growth(size);
  CUresult q = vs_quota_charge(card, grow);
  if (q == CUDA_ERROR_OUT_OF_MEMORY) {
    /* As the driver does before it fails: what this process caches goes
     * back to the card (and to the tenant): the arena's cache on the card,
     * the pool's unused memory; then the growth is asked again. */
    vs_arena_glue_trim_card(card, 0);
    uint64_t used = 0, reserved = 0;
    if (real->cuMemPoolTrimTo && !read_attr(real, pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) &&
        !read_attr(real, pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) && reserved > used) {
      vs_guard_enter();
      real->cuMemPoolTrimTo(pool, (size_t)used);
      vs_guard_leave();
      vs_pool_changed(real, pool);
    }
    q = vs_quota_charge(card, grow);
  }
  if (q != CUDA_SUCCESS) return q;
  op->pool = pool;
  op->admitted = grow;
  op->serial = serial;
  return CUDA_SUCCESS;
}

void vs_pool_alloc_end(const vs_real_table *real, vs_pool_op *op, CUresult r) {
  if (!op->pool) return;
  pthread_mutex_lock(&g_lock);
  pool_ent *e = find_serial(op->serial);
  uint64_t now;
  if (e && !e->destroyed && !read_attr(real, e->h, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now)) {
    settle(e, now, op->admitted);
  } else if (e && r == CUDA_SUCCESS) {
    e->charged += op->admitted;   /* the driver cannot say: the growth admitted stands */
  } else {
    vs_quota_uncharge(op->card, op->admitted);
  }
  if (e && r == CUDA_SUCCESS) e->blocks++;
  pthread_mutex_unlock(&g_lock);
  op->pool = NULL;
}

void vs_pool_refresh(const vs_real_table *real, int card) {
  if (!atomic_load_explicit(&g_charging, memory_order_relaxed) || !real) return;
  pthread_mutex_lock(&g_lock);
  for (size_t i = 0; i < g_n; i++)
    if (card < 0 || g_ents[i].card == card) reread(real, &g_ents[i]);
  pthread_mutex_unlock(&g_lock);
}

void vs_pool_created(CUmemoryPool pool, const CUmemPoolProps *props) {
  pthread_mutex_lock(&g_lock);
  pool_ent *e = get(pool, props && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? props->location.id : -1);
  if (e && props && props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) e->exempt = 1;
  pthread_mutex_unlock(&g_lock);
}

void vs_pool_imported(CUmemoryPool pool) {
  pthread_mutex_lock(&g_lock);
  pool_ent *e = get(pool, -1);
  if (e) e->exempt = 1;
  pthread_mutex_unlock(&g_lock);
}

void vs_pool_changed(const vs_real_table *real, CUmemoryPool pool) {
  if (!atomic_load_explicit(&g_charging, memory_order_relaxed)) return;
  pthread_mutex_lock(&g_lock);
  pool_ent *e = find_live(pool);
  if (e) reread(real, e);
  pthread_mutex_unlock(&g_lock);
}

void vs_pool_destroying(const vs_real_table *real, CUmemoryPool pool, uint64_t *used) {
  *used = 0;
  if (read_attr(real, pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, used)) *used = 0;
}

void vs_pool_destroyed(CUmemoryPool pool, uint64_t used, CUresult r) {
  if (r != CUDA_SUCCESS) return;
  pthread_mutex_lock(&g_lock);
  pool_ent *e = find_live(pool);
  if (e) {
    e->destroyed = 1;
    /* Its cached memory went back to the card; what live blocks use stays
     * charged until they are freed (the driver releases it then). */
    if (!e->exempt) settle(e, used < e->charged ? used : e->charged, 0);
    drop_if_done(e);
  }
  pthread_mutex_unlock(&g_lock);
}

void vs_pool_block_freed(uint64_t serial, uint64_t size) {
  if (!serial) return;
  pthread_mutex_lock(&g_lock);
  pool_ent *e = find_serial(serial);
  if (e) {
    if (e->blocks) e->blocks--;
    if (e->destroyed && !e->exempt) settle(e, e->blocks == 0 ? 0 : e->charged > size ? e->charged - size : 0, 0);
    drop_if_done(e);
  }
  pthread_mutex_unlock(&g_lock);
}

uint64_t vs_pool_charged(int card) {
  uint64_t n = 0;
  pthread_mutex_lock(&g_lock);
  for (size_t i = 0; i < g_n; i++)
    if (g_ents[i].card == card) n += g_ents[i].charged;
  pthread_mutex_unlock(&g_lock);
  return n;
}

/* A fork child holds no pool of the parent's (the driver starts it clean)
 * and no charge in the ledger. */
void vs_pool_atfork_child(void) {
  pthread_mutex_init(&g_lock, NULL);
  free(g_ents);
  g_ents = NULL;
  g_n = g_cap = 0;
  atomic_store(&g_charging, 0);
}

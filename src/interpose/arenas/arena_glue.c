/* The arena inside the shim (see arena_glue.h): one vs_arena per context,
 * created on the context's first cuMemAlloc, with the mode the settings
 * choose for what its card supports and the backend of arena_backend.c. */
#include "arena_glue.h"

#include "arena_backend.h"
#include "driver_table.h"
#include "guard.h"
#include "kept.h"
#include "log.h"
#include "quota.h"
#include "served.h"
#include "settings.h"
#include "spill.h"
#include "stream_order.h"
#include "vramshim.h"

#include <pthread.h>
#include <stdatomic.h>

/* Per card: what the settings decide for it, once (the first request on
 * the card asks the driver whether it has VMM). */
enum { CARD_UNKNOWN = 0, CARD_ARENA, CARD_OFF };
static _Atomic int g_state[VRAMSHIM_MAX_CARDS];
static vs_cfg_arena g_mode[VRAMSHIM_MAX_CARDS];   /* when CARD_ARENA: vmm or chunks, as configured */
static int g_said[VRAMSHIM_MAX_CARDS];             /* the mode was logged for this card */
/* The card reaches host page tables (ATS: Grace Hopper and its kind): the
 * host may then touch device memory outside any stream, so a free is never
 * taken as ordered there (stream_order.h). Set with g_state. */
static int g_coherent[VRAMSHIM_MAX_CARDS];
static _Atomic int g_any;   /* some context has an arena: range lookups need to look */

/* Each card's one piece (the view's free memory) kept while it has one
 * arena, for a program asking cuMemGetInfo in a loop: answered without the
 * registry's lock or the arena. It stands while `fresh` does, which the
 * walk that kept it set before it began and which is cleared by the
 * arena's first change after its walk (vs_arena_set_watch) and by an
 * arena made (publish); and while no context record has been unlinked
 * since (unlinks: an arena ends only after its context's unlink). ver:
 * odd while one walk keeps an answer, 0 before the first. Its own line
 * per card. */
typedef struct {
  _Alignas(64) _Atomic uint32_t ver;
  _Atomic uint32_t fresh;
  _Atomic uint64_t room, answer, unlinks;
} card_view;
static card_view g_view[VRAMSHIM_MAX_CARDS];
static pthread_mutex_t g_create_lock = PTHREAD_MUTEX_INITIALIZER;

#define DEFAULT_RELEASE_THRESHOLD (1ull << 30)

static const char *mode_name(vs_cfg_arena m) {
  return m == VS_CFG_ARENA_VMM ? "vmm" : m == VS_CFG_ARENA_CHUNKS ? "chunks" : "off";
}

/* The config's release_threshold against the card's capacity (default 1 GiB). */
static uint64_t release_threshold(int card, const vs_real_table *real, uint64_t *capacity_out) {
  size_t capacity = 0;
  if (real && real->cuDeviceTotalMem_v2) {
    vs_guard_enter();
    if (real->cuDeviceTotalMem_v2(&capacity, card) != CUDA_SUCCESS) capacity = 0;
    vs_guard_leave();
  }
  if (capacity_out) *capacity_out = capacity;
  const vs_config *cfg = &vs_settings_get()->config;
  return cfg->has_release_threshold ? vs_size_resolve(cfg->release_threshold, capacity) : DEFAULT_RELEASE_THRESHOLD;
}

/* Under g_create_lock: the card's mode, asking the driver the first time.
 * CUDA_SUCCESS with *mode, or the driver's error (no cuInit: the next
 * request tries again). */
static CUresult card_mode(int card, const vs_real_table *real, vs_cfg_arena *mode) {
  int st = atomic_load(&g_state[card]);
  if (st != CARD_UNKNOWN) {
    *mode = st == CARD_OFF ? VS_CFG_ARENA_OFF : g_mode[card];
    return CUDA_SUCCESS;
  }
  int has_vmm = 0;
  if (real->cuDeviceGetAttribute) {
    CUresult r;
    vs_guard_enter();
    r = real->cuDeviceGetAttribute(&has_vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, card);
    vs_guard_leave();
    if (r != CUDA_SUCCESS) return r;
  }
  int ats = 0;
  if (real->cuDeviceGetAttribute) {
    vs_guard_enter();
    if (real->cuDeviceGetAttribute(&ats, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, card) !=
        CUDA_SUCCESS)
      ats = 0;   /* a driver that cannot say predates such cards */
    vs_guard_leave();
  }
  g_coherent[card] = ats != 0;
  *mode = vs_settings_arena(has_vmm);
  if (*mode == VS_CFG_ARENA_OFF) {
    VS_INFO("card %d: arena off, every allocation goes to the driver", card);
    atomic_store(&g_state[card], CARD_OFF);
  } else {
    g_mode[card] = *mode;
    atomic_store(&g_state[card], CARD_ARENA);
  }
  return CUDA_SUCCESS;
}

static vs_arena *arena_of(vs_ctx *c) { return atomic_load_explicit(&c->arena, memory_order_acquire); }
static vs_arena *card_arena(vs_ctx *c, int card) { return c->card == card ? arena_of(c) : NULL; }

/* Spilled host blocks kept for reuse wait for the device as the arena's
 * own freed blocks do (spill.h): the stamp and the sync of the block's
 * context's arena. No arena (off for the card): no stamp, not kept. */
static int spill_stamp(uint64_t ctx_id, uint64_t *stamp) {
  vs_ctx *c = vs_ctx_acquire_id(ctx_id);
  vs_arena *a = c ? arena_of(c) : NULL;
  if (a) *stamp = vs_arena_hold_stamp(a);
  vs_ctx_put(c);
  return a != NULL;
}

static int spill_settled(uint64_t ctx_id, uint64_t stamp) {
  vs_ctx *c = vs_ctx_acquire_id(ctx_id);
  vs_arena *a = c ? arena_of(c) : NULL;
  int done = a && vs_arena_hold_settled(a, stamp);
  vs_ctx_put(c);
  return done;
}

/* What the layers below ask of the arenas, offered before the first arena
 * is published (they lie below and may not call up: src/LAYERS): a leave
 * of stream order syncs them all (vs_arena_glue_leave_order); the ledger's
 * bridge asks what they could serve in one piece (its view of free memory),
 * trims their cache when another process is about to be refused and asks
 * what that would give back (published for the others); spill.c asks when
 * the device is done with a block it keeps.
 * Caller holds g_create_lock. */
static void offer_once(void) {
  static int offered;
  static const vs_quota_cache cache = {vs_arena_glue_one_piece, vs_arena_glue_trim_card, vs_arena_glue_reclaimable};
  static const vs_spill_settle settle = {spill_stamp, spill_settled};
  if (offered) return;
  offered = 1;
  vs_stream_order_set_on_leave(vs_arena_glue_leave_order);
  vs_quota_set_cache(&cache);
  vs_spill_set_settle(&settle);
}

void vs_arena_glue_offer(void) {
  pthread_mutex_lock(&g_create_lock);
  offer_once();
  pthread_mutex_unlock(&g_create_lock);
}

/* ctx's arena becomes a, with its stream order (stream_order.h): set before
 * a is published, and looked at again after, so that an arena published
 * while the process leaves stream order is either walked by the leaver or
 * sees the flag down here (no block of it has been handed out yet). Caller
 * holds g_create_lock; ctx's card is one of VRAMSHIM_MAX_CARDS
 * (vs_arena_glue_alloc, the only way here, asks). */
static void publish(vs_ctx *ctx, vs_arena *a) {
  offer_once();
  vs_arena_set_stream_ordered(a, vs_stream_order_on() && !g_coherent[ctx->card]);
  vs_arena_set_watch(a, &g_view[ctx->card].fresh);
  atomic_store(&ctx->arena, a);
  /* After the store: a walk that begins after this clear sees the arena. */
  atomic_fetch_and(&g_view[ctx->card].fresh, 0);
  if (vs_arena_stream_ordered(a) && !vs_stream_order_on()) vs_arena_set_stream_ordered(a, 0);
}

/* Under g_create_lock. The arena of ctx, created now; NULL with *res set
 * when the driver cannot say what the card is yet, NULL with ctx marked
 * off when the arena is off for its card. */
static vs_arena *create(vs_ctx *ctx, CUresult *res) {
  int card = ctx->card;
  const vs_real_table *real = vs_driver_if_loaded();
  if (!real) {
    *res = vs_driver_missing_error();
    return NULL;
  }
  vs_cfg_arena mode;
  CUresult r = card_mode(card, real, &mode);
  if (r != CUDA_SUCCESS) {
    *res = r;
    return NULL;
  }
  if (mode == VS_CFG_ARENA_OFF) {
    atomic_store(&ctx->arena_off, 1);
    return NULL;
  }
  uint64_t capacity = 0;
  vs_arena_config ac;
  ac.release_threshold = release_threshold(card, real, &capacity);
  vs_arena_backend be;
  vs_arena *a = NULL;
  r = vs_backend_init(card, ctx->handle, mode == VS_CFG_ARENA_VMM, &be);
  if (!be.ctx) {
    *res = CUDA_ERROR_OUT_OF_MEMORY;   /* out of host memory: the next request tries again */
    return NULL;
  }
  if (mode == VS_CFG_ARENA_VMM) {
    ac.mode = VS_ARENA_VMM;
    if (r == CUDA_SUCCESS) a = vs_arena_create(&ac, &be);
    if (!a) {
      VS_INFO("card %d: the VMM arena cannot start (driver said %d, granule %llu); using chunks", card, (int)r,
              (unsigned long long)be.granule);
      mode = VS_CFG_ARENA_CHUNKS;
      vs_backend_chunks(be.ctx, &be);
    }
  }
  if (!a) {
    ac.mode = VS_ARENA_CHUNKS;
    a = vs_arena_create(&ac, &be);
  }
  if (a) vs_arena_set_decay(a, vs_settings_get()->config.release_decay_ms);
  if (!a) {
    VS_ERROR("card %d: the arena cannot start (out of host memory?); this context's allocations go to the driver",
             card);
    vs_backend_free(be.ctx);
    atomic_store(&ctx->arena_off, 1);
    return NULL;
  }
  char b1[32], b2[32];
  if (!g_said[card]) {
    g_said[card] = 1;
    VS_INFO("card %d: arena %s, release threshold %s (card %s)", card, mode_name(mode),
            vs_fmt_bytes(ac.release_threshold, b1, sizeof b1), vs_fmt_bytes(capacity, b2, sizeof b2));
  } else {
    VS_DEBUG("card %d: context %#llx: arena %s", card, (unsigned long long)ctx->handle, mode_name(mode));
  }
  ctx->backend = be.ctx;
  for (int d = 0; d < VRAMSHIM_MAX_CARDS; d++)   /* peer access given before the arena began */
    if (ctx->peer_cards & (1u << d)) (void)vs_backend_peer(be.ctx, NULL, d, 1);
  atomic_store(&ctx->arena_vmm, mode == VS_CFG_ARENA_VMM);
  if (g_coherent[card] && vs_stream_order_on())
    VS_INFO("card %d reaches host page tables (the host may touch device memory outside any stream): freed "
            "memory is reused only after a synchronisation", card);
  publish(ctx, a);
  atomic_store(&g_any, 1);
  return a;
}

/* The ids of the contexts with an arena (on `card`, or on any card when
 * card < 0), the first `skip` of them left out, at most cap; *more (when
 * given) says whether there were others. Under the registry's read lock,
 * so that the callers act on each context outside it (by id, with a
 * reference): their work may sync and call the driver. */
static size_t arena_ctx_ids(int card, size_t skip, uint64_t *ids, size_t cap, int *more) {
  size_t n = 0, seen = 0;
  if (more) *more = 0;
  vs_ctx_read_lock();
  for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c)) {
    if ((card >= 0 && c->card != card) || !atomic_load_explicit(&c->arena, memory_order_acquire)) continue;
    if (seen++ < skip) continue;
    if (n == cap) {
      if (more) *more = 1;
      break;
    }
    ids[n++] = c->id;
  }
  vs_ctx_read_unlock();
  return n;
}

void vs_arena_glue_leave_order(void) {
  /* A reference each for the sync; a process has few contexts. */
  uint64_t ids[64];
  int more;
  size_t n = arena_ctx_ids(-1, 0, ids, sizeof ids / sizeof ids[0], &more);
  for (size_t i = 0; i < n; i++) {
    vs_ctx *c = vs_ctx_acquire_id(ids[i]);
    if (!c) continue;   /* ended meanwhile: its work is over */
    pthread_mutex_lock(&g_create_lock);
    vs_arena *a = atomic_load(&c->arena);
    pthread_mutex_unlock(&g_create_lock);
    if (a) vs_arena_set_stream_ordered(a, 0);
    vs_ctx_put(c);
  }
  if (more) {   /* beyond 64 contexts: the rest under the registry's lock */
    vs_ctx_read_lock();
    for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c)) {
      vs_arena *a = atomic_load_explicit(&c->arena, memory_order_acquire);
      if (a) vs_arena_set_stream_ordered(a, 0);
    }
    vs_ctx_read_unlock();
  }
}

static vs_arena *arena_for(vs_ctx *ctx, CUresult *res) {
  vs_arena *a = atomic_load_explicit(&ctx->arena, memory_order_acquire);
  if (__builtin_expect(a != NULL, 1)) return a;
  if (atomic_load(&ctx->arena_off)) return NULL;
  pthread_mutex_lock(&g_create_lock);
  a = atomic_load(&ctx->arena);
  int made = 0;
  if (!a && !atomic_load(&ctx->arena_off)) made = (a = create(ctx, res)) != NULL;
  pthread_mutex_unlock(&g_create_lock);
  /* A context the shim never saw begin is known from its first request. */
  if (made) vs_stream_order_ctx_begun();
  return a;
}

/* A VMM arena whose address range the driver refused (a driver or a host
 * with little virtual address space) and that holds nothing yet becomes a
 * chunks arena, said once. Returns the context's arena now. */
static vs_arena *fall_back_to_chunks(vs_ctx *ctx, vs_arena *failed) {
  pthread_mutex_lock(&g_create_lock);
  if (atomic_load(&ctx->arena) == failed && !ctx->retired) {
    vs_arena_stats st;
    vs_arena_get_stats(failed, &st);
    if (st.reserved_bytes == 0 && st.live_count == 0) {
      vs_arena_config ac = {VS_ARENA_CHUNKS, release_threshold(ctx->card, vs_driver_if_loaded(), NULL)};
      vs_arena_backend be;
      vs_backend_chunks(ctx->backend, &be);
      vs_arena *a = vs_arena_create(&ac, &be);
      if (a) {
        VS_INFO("card %d: the driver refused the VMM arena its address range; using chunks", ctx->card);
        ctx->retired = failed;   /* a thread may still be inside it; it holds nothing */
        atomic_store(&ctx->arena_vmm, 0);
        publish(ctx, a);
      }
    }
  }
  vs_arena *now = atomic_load(&ctx->arena);
  pthread_mutex_unlock(&g_create_lock);
  return now;
}

static int arena_alloc(vs_arena *a, uint64_t size, int lane, uint64_t stream, uint64_t *addr) {
  if (lane) return vs_arena_alloc_lane(a, size, addr);
  return stream ? vs_arena_alloc_on(a, size, stream, addr) : vs_arena_alloc(a, size, addr);
}

void vs_arena_glue_forget_stream(uint64_t stream) {
  vs_ctx_read_lock();   /* an arena lives while its context is linked */
  for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c))
    vs_arena_forget_stream(atomic_load_explicit(&c->arena, memory_order_acquire), stream);
  vs_ctx_read_unlock();
}

int vs_arena_glue_alloc(vs_ctx *ctx, uint64_t size, int lane, uint64_t stream, uint64_t *addr, CUresult *res) {
  if (!ctx || ctx->card < 0 || ctx->card >= VRAMSHIM_MAX_CARDS) return VS_MEM_PASS;
  CUresult why = CUDA_SUCCESS;
  vs_arena *a = arena_for(ctx, &why);
  if (!a) {
    if (why == CUDA_SUCCESS) return VS_MEM_PASS;   /* off for this card */
    *res = why;                                    /* the driver is not ready: its own error */
    return VS_MEM_DONE;
  }
  vs_backend_clear_error();
  int rc = arena_alloc(a, size, lane, stream, addr);
  if (rc != VS_BACKEND_OK) {
    /* The VMM arena may have been refused its address range: by this
     * request (fall back now), or by another thread's, which already
     * replaced the arena while this one was failing (use it). */
    vs_arena *now = atomic_load(&ctx->arena);
    if (now == a && atomic_load(&ctx->arena_vmm) && vs_backend_va_failed(ctx->backend))
      now = fall_back_to_chunks(ctx, a);
    if (now != a) {
      vs_backend_clear_error();
      rc = arena_alloc(now, size, lane, stream, addr);
    }
  }
  if (rc == VS_BACKEND_OK) {
    *res = CUDA_SUCCESS;
  } else if (rc == VS_BACKEND_OOM) {
    *res = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    /* The driver's own error (no context, say); without one the arena
     * could not place the request at all, which the driver calls OOM. */
    CUresult e = vs_backend_last_error();
    *res = e != CUDA_SUCCESS ? e : CUDA_ERROR_OUT_OF_MEMORY;
  }
  return VS_MEM_DONE;
}

int vs_arena_glue_free(vs_ctx *ctx, uint64_t addr, uint64_t size, int lane) {
  vs_arena *a = ctx ? atomic_load_explicit(&ctx->arena, memory_order_acquire) : NULL;
  if (!a) return -1;
  return vs_arena_free_sized(a, addr, size, lane);
}

static void trim_ctx(vs_ctx *ctx, uint64_t keep_bytes) {
  vs_arena *a = ctx ? atomic_load_explicit(&ctx->arena, memory_order_acquire) : NULL;
  if (a) vs_arena_trim(a, keep_bytes);
}

void vs_arena_glue_trim(vs_ctx *ctx) { trim_ctx(ctx, 0); }

/* Which contexts a walk visits. Work a context can go without (giving
 * memory back: trims, decay ticks, settles) stays out of a quiet one
 * (contexts.h: the driver may be ending it, and its memory may be freed);
 * work every arena must have done (opening mappings to a peer, a fence
 * before a capture) visits them all. */
typedef enum { EVERY_CONTEXT, NOT_QUIET } walk_kind;

/* fn(c, user) on every context with an arena (on `card`, or on every card
 * when card < 0), each with a reference, outside the registry's lock.
 * Ids first, work after: fn may sync and call the driver, which must not
 * happen under the registry's lock (a context's end waits on it). More
 * contexts than the batch holds: the next walk skips those done (a context
 * made or ended between walks may be visited twice or not at all, which
 * every caller allows: trims, decay ticks, settles, opening to a peer). */
static void each_ctx(int card, walk_kind walk, void (*fn)(vs_ctx *c, void *user), void *user) {
  if (!atomic_load_explicit(&g_any, memory_order_relaxed)) return;
  uint64_t ids[32];
  size_t done = 0, n;
  do {
    n = arena_ctx_ids(card, done, ids, sizeof ids / sizeof ids[0], NULL);
    for (size_t i = 0; i < n; i++) {
      vs_ctx *c = vs_ctx_acquire_id(ids[i]);
      if (c && (walk == EVERY_CONTEXT || vs_ctx_walk_enter(c))) {
        fn(c, user);
        if (walk != EVERY_CONTEXT) vs_ctx_walk_leave(c);
      }
      vs_ctx_put(c);
    }
    done += n;
  } while (n == sizeof ids / sizeof ids[0]);
}

static void trim_one(vs_ctx *c, void *keep) { trim_ctx(c, *(const uint64_t *)keep); }
static void decay_one(vs_ctx *c, void *user) {
  (void)user;
  vs_arena *a = arena_of(c);
  if (a) vs_arena_decay(a);
}
static void settle_one(vs_ctx *c, void *user) {
  (void)user;
  vs_arena *a = arena_of(c);
  if (a) (void)vs_arena_settle(a);
}

void vs_arena_glue_trim_card(int card, uint64_t keep_bytes) { each_ctx(card, NOT_QUIET, trim_one, &keep_bytes); }

/* Under the contexts' read lock, as the view's walk (each_ctx may visit a
 * context twice: a sum must not). */
uint64_t vs_arena_glue_reclaimable(int card) {
  uint64_t sum = 0;
  if (!atomic_load_explicit(&g_any, memory_order_relaxed)) return 0;
  vs_ctx_read_lock();
  for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c)) sum += vs_arena_reclaimable(card_arena(c, card));
  vs_ctx_read_unlock();
  return sum;
}

typedef struct trim_beside { const vs_ctx *self; uint64_t released; } trim_beside;
static void trim_other(vs_ctx *c, void *user) {
  trim_beside *t = user;
  vs_arena *a = c == t->self ? NULL : arena_of(c);
  if (a) t->released += vs_arena_trim(a, 0);
}

uint64_t vs_arena_glue_trim_others(vs_ctx *ctx) {
  if (!ctx || ctx->card < 0) return 0;
  trim_beside t = {ctx, 0};
  each_ctx(ctx->card, NOT_QUIET, trim_other, &t);
  return t.released;
}

void vs_arena_glue_decay(void) { each_ctx(-1, NOT_QUIET, decay_one, NULL); }

void vs_arena_glue_settle_all(void) { each_ctx(-1, NOT_QUIET, settle_one, NULL); }

static void fence_one(vs_ctx *c, void *user) {
  (void)user;
  vs_arena_fence(arena_of(c));
}
void vs_arena_glue_fence_all(void) { each_ctx(-1, EVERY_CONTEXT, fence_one, NULL); }

typedef struct open_to {
  int card, closed;
} open_to;

static void open_one(vs_ctx *c, void *user) {
  open_to *o = user;
  pthread_mutex_lock(&g_create_lock);
  vs_arena *a = arena_of(c);
  if (a && c->backend && atomic_load(&c->arena_vmm)) (void)vs_backend_peer(c->backend, a, o->card, 1);
  else if (a) o->closed = 1;
  pthread_mutex_unlock(&g_create_lock);
}

int vs_arena_glue_open_card(int card, int to) {
  if (to < 0 || to >= VRAMSHIM_MAX_CARDS) return 0;
  open_to o = {to, 0};
  each_ctx(card, EVERY_CONTEXT, open_one, &o);
  return o.closed;
}

void vs_arena_glue_peer_access(uint64_t peer_ctx, int card, int on) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return;
  vs_ctx *c = vs_ctx_acquire_handle(peer_ctx);
  if (!c) return;   /* no memory of it seen yet: the driver's own, if any */
  pthread_mutex_lock(&g_create_lock);
  if (on) c->peer_cards |= 1u << card;
  else c->peer_cards &= ~(1u << card);
  vs_arena *a = arena_of(c);
  int failed = c->backend && atomic_load(&c->arena_vmm) && vs_backend_peer(c->backend, a, card, on) != 0;
  pthread_mutex_unlock(&g_create_lock);
  if (failed)
    VS_WARN("card %d: the driver refused to open the arena's memory of context %#llx on card %d to card %d; "
            "kernels on card %d may not reach it (arena = chunks in the config avoids this)",
            c->card, (unsigned long long)c->handle, c->card, card, card);
  vs_ctx_put(c);
}

void vs_arena_glue_ctx_end(vs_ctx *ctx) {
  /* Unlinked with no references (contexts.h): no thread is inside these
   * arenas, and no walk can reach them any more. */
  pthread_mutex_lock(&g_create_lock);
  vs_arena *a = atomic_exchange(&ctx->arena, NULL), *old = ctx->retired;
  ctx->retired = NULL;
  void *be = ctx->backend;
  ctx->backend = NULL;
  pthread_mutex_unlock(&g_create_lock);
  if (!a) return;
  vs_arena_stats st;
  vs_arena_get_stats(a, &st);
  char b1[32], b2[32];
  VS_DEBUG("card %d: context %#llx ended: its arena goes (%s live in %llu blocks, %s held)", ctx->card,
           (unsigned long long)ctx->handle, vs_fmt_bytes(st.live_bytes, b1, sizeof b1),
           (unsigned long long)st.live_count, vs_fmt_bytes(st.reserved_bytes, b2, sizeof b2));
  vs_backend_ended(be);
  vs_arena_destroy(a);
  vs_arena_destroy(old);
  vs_backend_free(be);
}

/* Under vs_ctx_read_lock: the context with a live block around ptr (the
 * block's start and size in *base, *size), or NULL. */
static vs_ctx *find_block(uint64_t ptr, uint64_t *base, uint64_t *size) {
  for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c)) {
    vs_arena *a = atomic_load_explicit(&c->arena, memory_order_acquire);
    if (a && vs_arena_lookup(a, ptr, base, size) == 0) return c;
  }
  return NULL;
}

int vs_arena_glue_find(uint64_t ptr, int *card, uint64_t *ctx_handle, uint64_t *base, uint64_t *size) {
  if (!atomic_load_explicit(&g_any, memory_order_relaxed)) return -1;
  vs_ctx_read_lock();
  vs_ctx *c = find_block(ptr, base, size);
  if (c) {
    if (card) *card = c->card;
    if (ctx_handle) *ctx_handle = c->handle;
  }
  vs_ctx_read_unlock();
  return c ? 0 : -1;
}

int vs_arena_glue_range(uint64_t ptr, uint64_t *base, uint64_t *size) {
  return vs_arena_glue_find(ptr, NULL, NULL, base, size) == 0 ? VS_MEM_DONE : VS_MEM_PASS;
}

int vs_arena_glue_placement(uint64_t ptr, int *card, uint64_t *base, uint64_t *size, uint64_t *chunk_base,
                            uint64_t *offset, int *vmm_backed) {
  if (!atomic_load_explicit(&g_any, memory_order_relaxed)) return -1;
  vs_ctx_read_lock();
  vs_ctx *c = find_block(ptr, base, size);
  vs_arena *a = c ? atomic_load_explicit(&c->arena, memory_order_acquire) : NULL;
  int rc = a && vs_arena_placement(a, *base, chunk_base, offset, vmm_backed) == 0 ? 0 : -1;
  if (rc == 0) *card = c->card;
  vs_ctx_read_unlock();
  return rc;
}

int vs_arena_glue_vmm_pieces(uint64_t base, uint64_t size, vs_arena_piece_fn fn, void *user) {
  if (!atomic_load_explicit(&g_any, memory_order_relaxed)) return -1;
  vs_ctx_read_lock();
  uint64_t b = 0, sz = 0;
  vs_ctx *c = find_block(base, &b, &sz);
  vs_arena *a = c ? atomic_load_explicit(&c->arena, memory_order_acquire) : NULL;
  int rc = a ? vs_arena_vmm_pieces(a, base, size, fn, user) : -1;
  vs_ctx_read_unlock();
  return rc;
}

int vs_arena_glue_holds(uint64_t addr) {
  return atomic_load_explicit(&g_any, memory_order_relaxed) && vs_backend_holds(addr);
}

/* Before its first request makes an arena for the card: the growth that
 * request will cause comes in whole units, granules under VMM (2 MiB, the
 * sim's and current NVIDIA cards' minimum granularity; a card with a larger
 * one would see free memory high by less than a granule until its arena
 * exists) or 512 bytes in chunks mode; nothing when the arena is off. */
static uint64_t first_growth(int card, uint64_t room) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return room;
  int st = atomic_load(&g_state[card]);
  vs_cfg_arena m = st == CARD_OFF ? VS_CFG_ARENA_OFF : st == CARD_ARENA ? g_mode[card] : vs_settings_arena(1);
  uint64_t unit = m == VS_CFG_ARENA_VMM ? 2ull << 20 : m == VS_CFG_ARENA_CHUNKS ? 512 : 1;
  return room / unit * unit;
}

/* The calling thread's current context's handle, 0 without one. */
static uint64_t current_handle(void) {
  const vs_real_table *real = vs_driver_if_loaded();
  CUcontext cur = NULL;
  if (!real || !real->cuCtxGetCurrent) return 0;
  vs_guard_enter();
  if (real->cuCtxGetCurrent(&cur) != CUDA_SUCCESS) cur = NULL;
  vs_guard_leave();
  return (uint64_t)(uintptr_t)cur;
}

/* Caller holds the registry's read lock. a's one piece when the card's
 * other arenas give back `others` bytes. */
static uint64_t piece_beside(vs_arena *a, uint64_t room, uint64_t others) {
  uint64_t r = room + others;
  return vs_arena_one_piece(a, r < room ? UINT64_MAX : r);
}

/* The card's kept one piece for room, if it stands: 1 and *out. */
static int view_kept(int card, uint64_t room, uint64_t *out) {
  card_view *k = &g_view[card];
  uint32_t v = vs_kept_read(&k->ver);
  if (!v || atomic_load_explicit(&k->room, memory_order_relaxed) != room) return 0;
  uint64_t answer = atomic_load_explicit(&k->answer, memory_order_relaxed),
           unlinks = atomic_load_explicit(&k->unlinks, memory_order_relaxed);
  /* Acquire: fresh set by a later walk (after a later ver's odd store)
   * shows that ver below. */
  if (!atomic_load_explicit(&k->fresh, memory_order_acquire) || vs_ctx_unlinks() != unlinks ||
      !vs_kept_still(&k->ver, v))
    return 0;
  *out = answer;
  return 1;
}

/* One walk at a time keeps the card's answer: from before fresh is set
 * until the answer is stored, so that an answer read before a change is
 * never stored after another walk set fresh anew. The odd ver, or 0 where
 * another walk keeps one now. */
static uint32_t view_begin(int card) {
  uint32_t odd = vs_kept_begin(&g_view[card].ver);
  /* Before the walk reads anything: a change after this clears it. */
  if (odd) atomic_fetch_or_explicit(&g_view[card].fresh, 1, memory_order_acq_rel);
  return odd;
}

/* Ends view_begin's section; kept is 1 where `answer` came from the
 * card's one arena (what view_kept may answer), 0 otherwise. */
static void view_end(int card, uint32_t odd, int kept, uint64_t room, uint64_t answer, uint64_t unlinks) {
  card_view *k = &g_view[card];
  if (!kept) atomic_fetch_and_explicit(&k->fresh, 0, memory_order_acq_rel);
  atomic_store_explicit(&k->room, room, memory_order_relaxed);
  atomic_store_explicit(&k->answer, answer, memory_order_relaxed);
  atomic_store_explicit(&k->unlinks, unlinks, memory_order_relaxed);
  vs_kept_end(&k->ver, odd);
}

uint64_t vs_arena_glue_one_piece(int card, uint64_t room) {
  uint64_t bytes = first_growth(card, room);
  if (!atomic_load_explicit(&g_any, memory_order_relaxed)) return bytes;
  uint64_t kept_bytes;
  int viewable = card >= 0 && card < VRAMSHIM_MAX_CARDS;
  if (viewable && view_kept(card, room, &kept_bytes)) return kept_bytes;
  uint32_t odd = viewable ? view_begin(card) : 0;
  int n = 0;
  vs_arena *last = NULL, *cur_arena = NULL;
  uint64_t total = 0;
  vs_ctx_read_lock();
  uint64_t unlinks = vs_ctx_unlinks();   /* under the lock: none unlinked while it is held */
  for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c)) {
    vs_arena *a = card_arena(c, card);
    if (a) n++, last = a;
  }
  if (n == 1) {
    bytes = vs_arena_one_piece(last, room);
  } else if (n > 1) {
    /* Several contexts on the card: the request goes to the current one's
     * arena, which may grow by what the others give back (a refusal trims
     * them: memory_service.c); with another card's context current, the
     * best of the card's arenas. */
    uint64_t cur = current_handle();
    uint64_t cur_own = 0;
    for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c)) {
      vs_arena *a = card_arena(c, card);
      if (!a) continue;
      uint64_t own = vs_arena_reclaimable(a);
      total += own;
      if (c->handle == cur) cur_arena = a, cur_own = own;
    }
    if (cur_arena) {
      bytes = piece_beside(cur_arena, room, total - cur_own);
    } else {
      /* Rare (no context of this card current): each arena walked again for
       * its own share; other threads may have moved it since the sum. */
      bytes = 0;
      for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c)) {
        vs_arena *a = card_arena(c, card);
        if (!a) continue;
        uint64_t own = vs_arena_reclaimable(a), piece = piece_beside(a, room, total > own ? total - own : 0);
        if (piece > bytes) bytes = piece;
      }
    }
  }
  if (odd) view_end(card, odd, n == 1, room, bytes, unlinks);
  vs_ctx_read_unlock();
  return bytes;
}

int vs_arena_glue_on(int card) {
  return card >= 0 && card < VRAMSHIM_MAX_CARDS && atomic_load(&g_state[card]) == CARD_ARENA;
}

void vs_arena_glue_read_lock(void) { vs_ctx_read_lock(); }
void vs_arena_glue_read_unlock(void) { vs_ctx_read_unlock(); }

/* Under the read lock: the context of card whose arena the observer shows. */
static vs_ctx *shown(int card) {
  vs_ctx *pick = NULL;
  for (vs_ctx *c = vs_ctx_next(NULL); c; c = vs_ctx_next(c)) {
    if (c->card != card || !atomic_load_explicit(&c->arena, memory_order_acquire)) continue;
    if (c->primary) return c;
    if (!pick) pick = c;   /* the list is newest first */
  }
  return pick;
}

vs_arena *vs_arena_glue_get(int card) {
  vs_ctx *c = shown(card);
  return c ? atomic_load_explicit(&c->arena, memory_order_acquire) : NULL;
}

int vs_arena_glue_is_vmm(int card) {
  vs_ctx *c = shown(card);
  return c ? atomic_load(&c->arena_vmm) : 0;
}

void vs_arena_glue_atfork_child(void) {
  /* The parent's arenas hang off its contexts, which the child does not
   * have (vs_ctx_atfork_child keeps them reachable, never used). */
  for (int c = 0; c < VRAMSHIM_MAX_CARDS; c++) {
    atomic_store(&g_state[c], CARD_UNKNOWN);
    atomic_store(&g_view[c].fresh, 0);
    atomic_store(&g_view[c].ver, 0);   /* a walk of the parent's may have been inside */
  }
  atomic_store(&g_any, 0);
  pthread_mutex_init(&g_create_lock, NULL);
  vs_stream_order_atfork_child();
  vs_backend_atfork_child();
}

/* Degraded mode on_limit = spill:MAX (see spill.h).
 *
 * Why pinned host memory (cuMemHostAlloc DEVICEMAP | PORTABLE) and not
 * managed memory preferring the host: it never occupies device memory on
 * any card (managed memory may be migrated to the device on a fault or a
 * prefetch, and on cards or systems without concurrent managed access it
 * lives on the device whenever a kernel runs), it works on every card that
 * can map host memory (all with unified addressing: 64-bit, compute >= 2.0),
 * and its pointer attributes and IPC answer plainly "host memory", which
 * docs/config.md ("Spilling") lists for the frameworks that look. */
#include "spill.h"

#include "accounting.h"
#include "contexts.h"

#include "clock.h"
#include "driver_table.h"
#include "log.h"
#include "quota.h"
#include "settings.h"
#include "vramshim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <uthash.h>

#define NCARDS VRAMSHIM_MAX_CARDS
#define EPISODE_LOG_EVERY_NS 10000000000ull  /* one episode line per 10 s per process and card */
#define REFUSAL_LOG_EVERY_NS 10000000000ull  /* one "MAX reached" line per 10 s per process and card */

typedef struct spill_block {
  uint64_t dptr;   /* what the program holds: the key */
  void *host;      /* what cuMemFreeHost takes (with UVA the same address; not assumed) */
  uint64_t size;    /* the host allocation's */
  uint64_t req;     /* what the program asked for: at most size when a kept block serves it again */
  uint64_t ctx_id; /* the context that allocated it: its end frees it */
  int card;
  struct spill_block *gone;   /* vs_spill_ctx_end's list of removed records */
  struct spill_block *kept_next;   /* kept: the card's list */
  uint64_t stamp;             /* kept: its context's arena's stamp at the free */
  UT_hash_handle hh;
} spill_block;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static spill_block *g_blocks;            /* under g_lock */
static _Atomic uint64_t g_count;         /* live blocks: the free path's one load */
/* Live blocks a kept block serves with more bytes than asked for (req <
 * size): the range queries' one load (vs_spill_range). */
static _Atomic uint64_t g_clipped;
/* Freed blocks kept for a spilled request of their size (spill.h), newest
 * first; their bytes, and the live blocks' bytes, per card. Under g_lock;
 * g_kept_n also read without it (0: no list to walk). Each spilled request
 * cost a cuMemHostAlloc, and each free a cuMemFreeHost, which waits for the
 * device: a server at its limit under spill freed and spilled again a dozen
 * blocks per step, 7,384 of its 10,078 driver calls in 300 steps. */
static spill_block *g_kept[NCARDS];
static uint64_t g_kept_bytes[NCARDS], g_live_bytes[NCARDS];
static _Atomic uint64_t g_kept_n;
static const vs_spill_settle *_Atomic g_settle;
/* Log rate limits, under g_lock. */
static uint64_t g_episode_log_ns[NCARDS], g_episodes_unlogged[NCARDS];
static uint64_t g_refusal_log_ns[NCARDS], g_refusals_unlogged[NCARDS];

static int card_ok(int card) { return card >= 0 && card < NCARDS; }

/* Under g_lock: the live table, with its count of clipped blocks. */
static void table_add(spill_block *b) {
  HASH_ADD(hh, g_blocks, dptr, sizeof b->dptr, b);
  if (b->req < b->size) atomic_fetch_add(&g_clipped, 1);
}
static void table_del(spill_block *b) {
  HASH_DEL(g_blocks, b);
  if (b->req < b->size) atomic_fetch_sub(&g_clipped, 1);
}

/* 1 when a line is due now (and the count of those suppressed since, in *more). */
static int due(uint64_t *last_ns, uint64_t *unlogged, uint64_t every, uint64_t *more) {
  uint64_t now = vs_mono_ns();
  pthread_mutex_lock(&g_lock);
  int ok = !*last_ns || now - *last_ns >= every;
  if (ok) {
    *last_ns = now;
    *more = *unlogged;
    *unlogged = 0;
  } else {
    ++*unlogged;
  }
  pthread_mutex_unlock(&g_lock);
  return ok;
}

static void log_episode(int card, uint64_t size, int by_driver, const vs_quota_spill_note *n) {
  uint64_t more = 0;
  if (!due(&g_episode_log_ns[card], &g_episodes_unlogged[card], EPISODE_LOG_EVERY_NS, &more)) return;
  char rq[32], us[32], li[32], sp[32], mx[32], tail[96] = "";
  if (more) snprintf(tail, sizeof tail, " (%llu more episodes began in the last 10 s)", (unsigned long long)more);
  char why[160];
  if (by_driver)
    snprintf(why, sizeof why, "the driver has no device memory left for %s", vs_fmt_bytes(size, rq, sizeof rq));
  else
    snprintf(why, sizeof why, "refused %s of device memory (usage %s, limit %s)", vs_fmt_bytes(size, rq, sizeof rq),
             vs_fmt_bytes(n->used, us, sizeof us), n->limit == UINT64_MAX ? "none" : vs_fmt_bytes(n->limit, li, sizeof li));
  VS_WARN("tenant '%s' on card %d: %s: spilling it to host memory (tenant spilled %s of at most %s); kernels "
          "reach spilled memory over the bus, slowly; new requests go back to the device once it has room%s",
          vs_settings_get()->tenant, card, why, vs_fmt_bytes(n->spilled, sp, sizeof sp),
          vs_fmt_bytes(n->max, mx, sizeof mx), tail);
}

static void log_max_reached(int card, uint64_t size, const vs_quota_spill_note *n) {
  uint64_t more = 0;
  if (!due(&g_refusal_log_ns[card], &g_refusals_unlogged[card], REFUSAL_LOG_EVERY_NS, &more)) return;
  char rq[32], sp[32], mx[32], tail[96] = "";
  if (more) snprintf(tail, sizeof tail, " (%llu more in the last 10 s)", (unsigned long long)more);
  VS_WARN("tenant '%s' on card %d: cannot spill %s to host memory: the tenant has spilled %s of at most %s "
          "(on_limit = spill:MAX); the request fails as with on_limit = fail%s",
          vs_settings_get()->tenant, card, vs_fmt_bytes(size, rq, sizeof rq), vs_fmt_bytes(n->spilled, sp, sizeof sp),
          vs_fmt_bytes(n->max, mx, sizeof mx), tail);
}

/* One block more (sign +1) or fewer (-1): the free path's count, and the
 * card's spilled figures (dumps, timeline). */
static void count(int card, uint64_t dptr, uint64_t size, int sign) {
  if (sign > 0) atomic_fetch_add(&g_count, 1);
  else atomic_fetch_sub(&g_count, 1);
  vs_quota_observe_spill(card, dptr, size, sign);
}

void vs_spill_set_settle(const vs_spill_settle *settle) { atomic_store(&g_settle, settle); }

/* Kept blocks back to the host, each with its context held across the
 * free (an ended context's driver freed it already). */
static void release_kept(spill_block *list) {
  const vs_real_table *real = vs_driver_if_loaded();
  while (list) {
    spill_block *b = list;
    list = b->kept_next;
    vs_ctx *c = b->ctx_id ? vs_ctx_acquire_id(b->ctx_id) : NULL;
    if ((c || !b->ctx_id) && real && real->cuMemFreeHost) {
      CUresult r = real->cuMemFreeHost(b->host);
      vs_acct_call(b->card, VRAMSHIM_CALL_OTHER);
      (void)r;   /* refused: nothing the program holds; the process's end frees it */
    }
    vs_ctx_put(c);
    free(b);
  }
}

/* The records of a list of kept blocks, without their host memory (an
 * ended context's driver freed it; a fork child's is the parent's). */
static void drop_records(spill_block *list) {
  while (list) {
    spill_block *b = list;
    list = b->kept_next;
    free(b);
  }
}

/* Under g_lock: the kept block at *pp (a link of card's list) out of it. */
static spill_block *unlink_kept(int card, spill_block **pp) {
  spill_block *b = *pp;
  *pp = b->kept_next;
  b->kept_next = NULL;
  g_kept_bytes[card] -= b->size;
  atomic_fetch_sub(&g_kept_n, 1);
  return b;
}

/* Under g_lock: the card's kept blocks of context ctx_id (0: all) out of
 * their list, as a list. */
static spill_block *take_kept(int card, uint64_t ctx_id) {
  spill_block *out = NULL, **pp = &g_kept[card];
  while (*pp) {
    if (ctx_id && (*pp)->ctx_id != ctx_id) {
      pp = &(*pp)->kept_next;
      continue;
    }
    spill_block *b = unlink_kept(card, pp);
    b->kept_next = out;
    out = b;
  }
  return out;
}

/* Under g_lock: a live block of size bytes on card left the table. The
 * last one takes the kept blocks with it (the episode is over: none of
 * them is kept past it), returned for release_kept. */
static spill_block *live_gone(int card, uint64_t size) {
  g_live_bytes[card] -= size;
  return g_live_bytes[card] ? NULL : take_kept(card, 0);
}

/* Under g_lock: the link of card's kept list to the block in context
 * ctx_id that serves size bytes best (the smallest of size to size +
 * size / 4: a server's blocks grow with its requests and seldom come back
 * at one size; the oldest of equals) whose stamp is at most `upto`; NULL
 * if none. */
static spill_block **best_kept(int card, uint64_t ctx_id, uint64_t size, uint64_t upto) {
  spill_block **found = NULL;
  for (spill_block **pp = &g_kept[card]; *pp; pp = &(*pp)->kept_next)
    if ((*pp)->ctx_id == ctx_id && (*pp)->size >= size && (*pp)->size <= size + size / 4 && (*pp)->stamp <= upto &&
        (!found || (*pp)->size <= (*found)->size))
      found = pp;
  return found;
}

/* A kept block for size bytes in the request's context (best_kept), once
 * the device is done with it: asked outside the lock (it may sync), then
 * taken if another thread has not (any block of that arena with a stamp
 * no later is done too). */
static int reuse(int card, uint64_t ctx_id, uint64_t size, uint64_t *addr) {
  const vs_spill_settle *st = atomic_load(&g_settle);
  if (!st || !ctx_id || !atomic_load_explicit(&g_kept_n, memory_order_relaxed)) return 0;
  pthread_mutex_lock(&g_lock);
  spill_block **pp = best_kept(card, ctx_id, size, UINT64_MAX);
  uint64_t stamp = pp ? (*pp)->stamp : 0;
  pthread_mutex_unlock(&g_lock);
  if (!pp || !st->settled(ctx_id, stamp)) return 0;
  pthread_mutex_lock(&g_lock);
  pp = best_kept(card, ctx_id, size, stamp);
  spill_block *b = pp ? unlink_kept(card, pp) : NULL;
  pthread_mutex_unlock(&g_lock);
  if (!b) return 0;
  /* Counted against MAX again as a new spill is; refused, the card's kept
   * blocks go back to the host and the request takes the usual way. */
  vs_quota_spill_note note;
  if (vs_quota_spill(card, b->size, &note) != 0) {
    pthread_mutex_lock(&g_lock);
    spill_block *rest = take_kept(card, 0);
    pthread_mutex_unlock(&g_lock);
    b->kept_next = rest;
    release_kept(b);
    return 0;
  }
  pthread_mutex_lock(&g_lock);
  b->req = size;
  table_add(b);
  g_live_bytes[card] += b->size;
  pthread_mutex_unlock(&g_lock);
  count(card, b->dptr, b->req, +1);
  vs_quota_settle();
  *addr = b->dptr;
  return 1;
}

/* Under g_lock: the room for kept bytes on card with live spilled bytes live. */
static uint64_t keep_room(int card, uint64_t live) {
  uint64_t max = vs_quota_spill_max(card), room = max > live ? max - live : 0;
  return live < room ? live : room;
}

/* Under g_lock: the oldest kept blocks out of card's list (onto *evicted,
 * for release_kept) until want more bytes fit in room. */
static void evict_kept(int card, uint64_t want, uint64_t room, spill_block **evicted) {
  while (g_kept[card] && g_kept_bytes[card] + want > room) {
    spill_block **pp = &g_kept[card];
    while ((*pp)->kept_next) pp = &(*pp)->kept_next;
    spill_block *old = unlink_kept(card, pp);
    old->kept_next = *evicted;
    *evicted = old;
  }
}

/* Under g_lock, for a live block just out of the table: kept (1) when its
 * context's arena gave a stamp and it fits in the card's room for kept
 * bytes: the live spilled bytes after this free, and no more than MAX less
 * them (the pinned host memory the process holds for spilling, live and
 * kept, stays within MAX). The oldest kept blocks make room for it
 * (*evicted, for release_kept): sizes the program asked for long ago clog
 * the room otherwise. The demo's spill phase (300 steps, 3,691 spilled
 * requests): 3,691 host allocations keeping none; 2,462 with a quarter of
 * the live bytes and no eviction, 1,726 with eviction; 591 with the live
 * bytes (peak pinned 1,641 -> 2,263 MiB; docs/config.md, "Kept blocks"). */
static int keep(spill_block *b, uint64_t stamp, spill_block **evicted) {
  int card = b->card;
  uint64_t live = g_live_bytes[card] - b->size, room = keep_room(card, live);
  if (!live || b->size > room) return 0;
  evict_kept(card, b->size, room, evicted);
  g_live_bytes[card] = live;
  b->stamp = stamp;
  b->kept_next = g_kept[card];
  g_kept[card] = b;
  g_kept_bytes[card] += b->size;
  atomic_fetch_add(&g_kept_n, 1);
  return 1;
}

int vs_spill_alloc(int card, uint64_t ctx_id, uint64_t size, int by_driver, uint64_t *addr) {
  if (!card_ok(card) || size == 0 || !vs_quota_spill_max(card)) return 0;
  if (reuse(card, ctx_id, size, addr)) return 1;
  const vs_real_table *real = vs_driver_if_loaded();
  if (!real || !real->cuMemHostAlloc || !real->cuMemHostGetDevicePointer_v2 || !real->cuMemFreeHost) {
    VS_ERROR("card %d: the driver lacks cuMemHostAlloc / cuMemHostGetDevicePointer_v2 / cuMemFreeHost; "
             "on_limit = spill cannot serve the request", card);
    return 0;
  }
  spill_block *b = calloc(1, sizeof *b);
  if (!b) return 0;
  vs_quota_spill_note note;
  /* Counted first, as device charges are: MAX holds across processes even
   * when several spill at once. */
  if (vs_quota_spill(card, size, &note) != 0) {
    free(b);
    if (note.max) log_max_reached(card, size, &note);
    return 0;
  }
  void *host = NULL;
  CUdeviceptr d = 0;
  CUresult r = real->cuMemHostAlloc(&host, (size_t)size, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  if (r == CUDA_SUCCESS) {
    r = real->cuMemHostGetDevicePointer_v2(&d, host, 0);
    if (r != CUDA_SUCCESS) real->cuMemFreeHost(host);
  }
  vs_acct_call(card < 0 ? 0 : card, VRAMSHIM_CALL_OTHER);
  if (r != CUDA_SUCCESS) {
    char a[32];
    vs_quota_unspill(card, size);
    free(b);
    VS_WARN("tenant '%s' on card %d: cannot spill %s: the driver refused pinned host memory mapped for the device "
            "(error %d); the request fails",
            vs_settings_get()->tenant, card, vs_fmt_bytes(size, a, sizeof a), (int)r);
    return 0;
  }
  b->dptr = (uint64_t)d;
  b->host = host;
  b->size = b->req = size;
  b->ctx_id = ctx_id;
  b->card = card;
  pthread_mutex_lock(&g_lock);
  spill_block *old = NULL;
  HASH_FIND(hh, g_blocks, &b->dptr, sizeof b->dptr, old);
  if (old) {
    /* Freed behind the shim's back (cuMemFreeHost by the program): drop it. */
    table_del(old);
  }
  table_add(b);
  g_live_bytes[card] += size;
  spill_block *ended = old ? live_gone(old->card, old->size) : NULL, *evicted = NULL;
  /* A kept block at this address was freed behind the shim's back too:
   * its record goes, never to be handed out. */
  for (int i = 0; i < NCARDS; i++)
    for (spill_block **pp = &g_kept[i]; *pp; pp = &(*pp)->kept_next)
      if ((*pp)->dptr == b->dptr) {
        free(unlink_kept(i, pp));
        break;
      }
  /* More live bytes: less room under MAX for the kept ones. */
  evict_kept(card, 0, keep_room(card, g_live_bytes[card]), &evicted);
  pthread_mutex_unlock(&g_lock);
  if (old) {
    count(old->card, old->dptr, old->req, -1);
    vs_quota_unspill(old->card, old->size);
    free(old);
  }
  release_kept(ended);
  release_kept(evicted);
  count(card, b->dptr, size, +1);
  vs_quota_settle();
  if (note.episode) log_episode(card, size, by_driver, &note);
  *addr = (uint64_t)d;
  return 1;
}

int vs_spill_free(uint64_t addr, CUresult *res) {
  if (__builtin_expect(atomic_load_explicit(&g_count, memory_order_relaxed) == 0, 1)) return 0;
  spill_block *b = NULL;
  /* Out of the table before the host gets it back: a concurrent spill that
   * receives the same address must not find this record. */
  pthread_mutex_lock(&g_lock);
  HASH_FIND(hh, g_blocks, &addr, sizeof addr, b);
  if (b) table_del(b);
  pthread_mutex_unlock(&g_lock);
  if (!b) return 0;
  /* Its context held across the host free (an end waits for the hold, and
   * then finds the record if the free fails); if it ended since the record
   * was taken out, the driver freed the memory with it. */
  vs_ctx *c = b->ctx_id ? vs_ctx_acquire_id(b->ctx_id) : NULL;
  if (b->ctx_id && !c) {
    count(b->card, b->dptr, b->req, -1);
    pthread_mutex_lock(&g_lock);
    spill_block *ended = live_gone(b->card, b->size);
    pthread_mutex_unlock(&g_lock);
    vs_quota_unspill(b->card, b->size);
    free(b);
    release_kept(ended);
    *res = CUDA_ERROR_INVALID_VALUE;
    return 1;
  }
  /* Counted (the trace's free line) before the address can be handed out
   * again, and counted back if the host refuses (see vs_mem_free_begin). */
  count(b->card, b->dptr, b->req, -1);
  /* Kept for a spilled request of its size (spill.h): the stamp first,
   * outside the lock (the arenas take theirs). */
  const vs_spill_settle *st = atomic_load(&g_settle);
  uint64_t stamp = 0;
  if (st && b->ctx_id && st->stamp(b->ctx_id, &stamp)) {
    /* Once kept, b is the list's: another thread may take or release it. */
    const int card = b->card;
    const uint64_t size = b->size;
    spill_block *evicted = NULL;
    pthread_mutex_lock(&g_lock);
    int kept = keep(b, stamp, &evicted);
    pthread_mutex_unlock(&g_lock);
    release_kept(evicted);
    if (kept) {
      vs_ctx_put(c);
      vs_quota_unspill(card, size);   /* the ledger's spilled bytes are the live ones */
      *res = CUDA_SUCCESS;
      return 1;
    }
  }
  const vs_real_table *real = vs_driver_if_loaded();
  CUresult r = real && real->cuMemFreeHost ? real->cuMemFreeHost(b->host) : CUDA_ERROR_NOT_INITIALIZED;
  vs_acct_call(b->card < 0 ? 0 : b->card, VRAMSHIM_CALL_OTHER);
  if (r != CUDA_SUCCESS) {
    /* Still the host's: keep the record, so the program can try again. */
    pthread_mutex_lock(&g_lock);
    table_add(b);
    pthread_mutex_unlock(&g_lock);
    count(b->card, b->dptr, b->req, 1);
    vs_ctx_put(c);
    *res = r;
    return 1;
  }
  vs_ctx_put(c);
  pthread_mutex_lock(&g_lock);
  spill_block *ended = live_gone(b->card, b->size);
  pthread_mutex_unlock(&g_lock);
  vs_quota_unspill(b->card, b->size);
  free(b);
  release_kept(ended);
  *res = CUDA_SUCCESS;
  return 1;
}

void vs_spill_ctx_end(uint64_t ctx_id) {
  if (ctx_id == 0 || (atomic_load_explicit(&g_count, memory_order_relaxed) == 0 &&
                      atomic_load_explicit(&g_kept_n, memory_order_relaxed) == 0))
    return;
  spill_block *gone = NULL, *b, *tmp, *kept[NCARDS] = {NULL}, *ended[NCARDS] = {NULL};
  pthread_mutex_lock(&g_lock);
  HASH_ITER(hh, g_blocks, b, tmp) {
    if (b->ctx_id != ctx_id) continue;
    table_del(b);
    g_live_bytes[b->card] -= b->size;
    b->gone = gone;
    gone = b;
  }
  /* Its kept blocks go with it (the driver frees their memory); a card
   * left with no live block gives back the others' too. */
  for (int i = 0; i < NCARDS; i++) {
    kept[i] = take_kept(i, ctx_id);
    if (!g_live_bytes[i] && g_kept[i]) ended[i] = take_kept(i, 0);
  }
  pthread_mutex_unlock(&g_lock);
  while (gone) {
    b = gone;
    gone = b->gone;
    count(b->card, b->dptr, b->req, -1);
    vs_quota_unspill(b->card, b->size);
    free(b);
  }
  for (int i = 0; i < NCARDS; i++) {
    drop_records(kept[i]);
    release_kept(ended[i]);
  }
}

int vs_spill_lookup(uint64_t addr, int *card, uint64_t *size) {
  if (atomic_load_explicit(&g_count, memory_order_relaxed) == 0) return 0;
  spill_block *b = NULL;
  pthread_mutex_lock(&g_lock);
  HASH_FIND(hh, g_blocks, &addr, sizeof addr, b);
  if (b) {
    if (card) *card = b->card;
    if (size) *size = b->size;
  }
  pthread_mutex_unlock(&g_lock);
  return b != NULL;
}

int vs_spill_range(uint64_t ptr, uint64_t *base, uint64_t *size) {
  if (__builtin_expect(atomic_load_explicit(&g_clipped, memory_order_relaxed) == 0, 1)) return 0;
  spill_block *b, *tmp, *hit = NULL;
  pthread_mutex_lock(&g_lock);
  HASH_ITER(hh, g_blocks, b, tmp) {
    if (b->req < b->size && ptr >= b->dptr && ptr - b->dptr < b->size) {
      hit = b;
      break;
    }
  }
  if (hit) {
    *base = hit->dptr;
    *size = hit->req;
  }
  pthread_mutex_unlock(&g_lock);
  return hit != NULL;
}

void vs_spill_atfork_prepare(void) { pthread_mutex_lock(&g_lock); }
void vs_spill_atfork_parent(void) { pthread_mutex_unlock(&g_lock); }

void vs_spill_atfork_child(void) {
  /* The records (not the memory, which is the parent's pinned pages) go. */
  spill_block *b, *tmp;
  HASH_ITER(hh, g_blocks, b, tmp) {
    HASH_DEL(g_blocks, b);
    free(b);
  }
  g_blocks = NULL;
  atomic_store(&g_count, 0);
  atomic_store(&g_clipped, 0);
  for (int i = 0; i < NCARDS; i++) {
    drop_records(g_kept[i]);
    g_kept[i] = NULL;
    g_kept_bytes[i] = g_live_bytes[i] = 0;
  }
  atomic_store(&g_kept_n, 0);
  for (int i = 0; i < NCARDS; i++) {
    g_episode_log_ns[i] = g_episodes_unlogged[i] = g_refusal_log_ns[i] = g_refusals_unlogged[i] = 0;
  }
  pthread_mutex_init(&g_lock, NULL);
}

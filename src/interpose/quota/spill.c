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
  uint64_t size;
  uint64_t ctx_id; /* the context that allocated it: its end frees it */
  int card;
  struct spill_block *gone;   /* vs_spill_ctx_end's list of removed records */
  UT_hash_handle hh;
} spill_block;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static spill_block *g_blocks;            /* under g_lock */
static _Atomic uint64_t g_count;         /* live blocks: the free path's one load */
/* Log rate limits, under g_lock. */
static uint64_t g_episode_log_ns[NCARDS], g_episodes_unlogged[NCARDS];
static uint64_t g_refusal_log_ns[NCARDS], g_refusals_unlogged[NCARDS];

static int card_ok(int card) { return card >= 0 && card < NCARDS; }

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

int vs_spill_alloc(int card, uint64_t ctx_id, uint64_t size, int by_driver, uint64_t *addr) {
  if (!card_ok(card) || size == 0 || !vs_quota_spill_max(card)) return 0;
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
  b->size = size;
  b->ctx_id = ctx_id;
  b->card = card;
  pthread_mutex_lock(&g_lock);
  spill_block *old = NULL;
  HASH_FIND(hh, g_blocks, &b->dptr, sizeof b->dptr, old);
  if (old) {
    /* Freed behind the shim's back (cuMemFreeHost by the program): drop it. */
    HASH_DEL(g_blocks, old);
  }
  HASH_ADD(hh, g_blocks, dptr, sizeof b->dptr, b);
  pthread_mutex_unlock(&g_lock);
  if (old) {
    count(old->card, old->dptr, old->size, -1);
    vs_quota_unspill(old->card, old->size);
    free(old);
  }
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
  if (b) HASH_DEL(g_blocks, b);
  pthread_mutex_unlock(&g_lock);
  if (!b) return 0;
  /* Its context held across the host free (an end waits for the hold, and
   * then finds the record if the free fails); if it ended since the record
   * was taken out, the driver freed the memory with it. */
  vs_ctx *c = b->ctx_id ? vs_ctx_acquire_id(b->ctx_id) : NULL;
  if (b->ctx_id && !c) {
    count(b->card, b->dptr, b->size, -1);
    vs_quota_unspill(b->card, b->size);
    free(b);
    *res = CUDA_ERROR_INVALID_VALUE;
    return 1;
  }
  /* Counted (the trace's free line) before the address can be handed out
   * again, and counted back if the host refuses (see vs_mem_free_begin). */
  count(b->card, b->dptr, b->size, -1);
  const vs_real_table *real = vs_driver_if_loaded();
  CUresult r = real && real->cuMemFreeHost ? real->cuMemFreeHost(b->host) : CUDA_ERROR_NOT_INITIALIZED;
  vs_acct_call(b->card < 0 ? 0 : b->card, VRAMSHIM_CALL_OTHER);
  if (r != CUDA_SUCCESS) {
    /* Still the host's: keep the record, so the program can try again. */
    pthread_mutex_lock(&g_lock);
    HASH_ADD(hh, g_blocks, dptr, sizeof b->dptr, b);
    pthread_mutex_unlock(&g_lock);
    count(b->card, b->dptr, b->size, 1);
    vs_ctx_put(c);
    *res = r;
    return 1;
  }
  vs_ctx_put(c);
  vs_quota_unspill(b->card, b->size);
  free(b);
  *res = CUDA_SUCCESS;
  return 1;
}

void vs_spill_ctx_end(uint64_t ctx_id) {
  if (ctx_id == 0 || atomic_load_explicit(&g_count, memory_order_relaxed) == 0) return;
  spill_block *gone = NULL, *b, *tmp;
  pthread_mutex_lock(&g_lock);
  HASH_ITER(hh, g_blocks, b, tmp) {
    if (b->ctx_id != ctx_id) continue;
    HASH_DEL(g_blocks, b);
    b->gone = gone;
    gone = b;
  }
  pthread_mutex_unlock(&g_lock);
  while (gone) {
    b = gone;
    gone = b->gone;
    count(b->card, b->dptr, b->size, -1);
    vs_quota_unspill(b->card, b->size);
    free(b);
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
  for (int i = 0; i < NCARDS; i++) {
    g_episode_log_ns[i] = g_episodes_unlogged[i] = g_refusal_log_ns[i] = g_refusals_unlogged[i] = 0;
  }
  pthread_mutex_init(&g_lock, NULL);
}

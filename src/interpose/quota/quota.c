/* Tenant quotas inside the shim (see quota.h), over the session API of
 * src/tenant/session.h: one session per process, each card's ledger opened
 * on first use with the card's real capacity and UUID.
 *
 * Every process under the shim takes a slot in the ledger of each card it
 * uses, config file or not (without one: tenant `default`, no limit, so only
 * the capacity condition applies), so `vramshim status` and dumps by pid work
 * everywhere. Only a passthrough after a config error enforces nothing.
 *
 * A refusal is quiet where it happens (vs_quota_charge runs inside the
 * arena, whose OOM ladder trims and retries); the thread remembers the last
 * refused charge, and vs_quota_wait, called once the request is given up
 * outside every lock, waits for it (on_limit = wait:D) or logs the one line
 * and event of the final refusal. */
#include "quota.h"

#include "accounting.h"
#include "clock.h"
#include "driver_table.h"
#include "guard.h"
#include "interpose.h"
#include "log.h"
#include "ledger.h"
#include "served.h"
#include "session.h"
#include "settings.h"
#include "vramshim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NCARDS (VRAMSHIM_MAX_CARDS < VS_CFG_MAX_CARD_INDEX ? VRAMSHIM_MAX_CARDS : VS_CFG_MAX_CARD_INDEX)

enum { CARD_UNKNOWN = 0, CARD_OPEN, CARD_OFF };

static const vs_quota_cache *_Atomic g_cache;
static const vs_quota_observer *_Atomic g_observer;

void vs_quota_set_cache(const vs_quota_cache *cache) { atomic_store(&g_cache, cache); }
void vs_quota_set_observer(const vs_quota_observer *observer) { atomic_store(&g_observer, observer); }

static uint64_t arena_one_piece(int card, uint64_t room) {
  const vs_quota_cache *c = atomic_load_explicit(&g_cache, memory_order_acquire);
  return c ? c->one_piece(card, room) : room;
}

static void arena_trim(int card) {
  const vs_quota_cache *c = atomic_load_explicit(&g_cache, memory_order_acquire);
  if (c) c->trim(card, 0);
}

static uint64_t arena_reclaimable(int card) {
  const vs_quota_cache *c = atomic_load_explicit(&g_cache, memory_order_acquire);
  return c ? c->reclaimable(card) : 0;
}

void vs_quota_observe_spill(int card, uint64_t ptr, uint64_t size, int sign) {
  const vs_quota_observer *o = atomic_load_explicit(&g_observer, memory_order_acquire);
  if (o) o->spill(card, ptr, size, sign);
}

static vs_tenant_session *g_session;
static pthread_once_t g_session_once = PTHREAD_ONCE_INIT;
static _Atomic int g_card[NCARDS];
static uint64_t g_capacity[NCARDS];   /* written under g_open_lock, before g_card says OPEN */
static char g_card_id[NCARDS][VS_NAME_MAX];   /* the card's ledger id (its UUID); same rule */
static pthread_mutex_t g_open_lock = PTHREAD_MUTEX_INITIALIZER;

/* The last charge this thread saw refused, until the request is settled. */
typedef struct refusal_note {
  int pending;
  int live_due;    /* a charge was admitted: the allocation refreshes live when recorded */
  int card;
  uint64_t n;
  vs_refusal why;
} refusal_note;
static __thread refusal_note t_refused __attribute__((tls_model("initial-exec")));
/* Charges this process made (admitted or forced), on any card: the view
 * reads the books a second time only when one came between its first
 * reading and its arenas' walk (see view()). */
static _Atomic uint64_t g_charges;
/* Bytes this process charged on each card (admitted or forced), never
 * lowered: a measurement of the footprint counts what was charged while it
 * read (vs_quota_charged_bytes). Added after the ledger's add, before the
 * caller asks the driver. */
static _Atomic uint64_t g_charged_bytes[NCARDS];

/* warn_at crossed: the session has logged the line and recorded the
 * event; the dump is written by observe's thread (this may run under the
 * arena's locks: it only sets a flag). */
static void on_warn(void *arg, int card, uint64_t used) {
  (void)arg;
  const vs_quota_observer *o = atomic_load_explicit(&g_observer, memory_order_acquire);
  if (o) o->warn(card, used);
}

static void session_init(void) {
  const vs_settings *st = vs_settings_get();
  g_session = vs_tenant_init_with(&st->config, st->tenant, st->enforce);
  if (g_session) vs_tenant_set_hooks(g_session, NULL, on_warn, NULL);
  if (!g_session) VS_ERROR("out of host memory starting the tenant session; quotas are not enforced");
  else if (!st->enforce)
    VS_INFO("tenant '%s': quotas not enforced in this process (config error, VRAMSHIM_ON_ERROR=passthrough)",
            st->tenant);
}

static vs_tenant_session *session(void) {
  pthread_once(&g_session_once, session_init);
  return g_session;
}

/* The card's identity from the real driver, under the recursion guard.
 * 0 with capacity (and the UUID when the driver has one), -1 when the
 * driver cannot say yet (not initialised: the next call tries again). */
static int identify(int card, uint64_t *capacity, char uuid[VS_NAME_MAX]) {
  const vs_real_table *real = vs_driver_if_loaded();
  if (!real || !real->cuDeviceTotalMem_v2) return -1;
  int rc = -1;
  vs_guard_enter();
  CUdevice dev = card;
  if (!real->cuDeviceGet || real->cuDeviceGet(&dev, card) == CUDA_SUCCESS) {
    size_t cap = 0;
    if (real->cuDeviceTotalMem_v2(&cap, dev) == CUDA_SUCCESS && cap > 0) {
      *capacity = cap;
      rc = 0;
      CUuuid u;
      CUresult r = CUDA_ERROR_NOT_SUPPORTED;
      if (real->cuDeviceGetUuid_v2) r = real->cuDeviceGetUuid_v2(&u, dev);
      if (r != CUDA_SUCCESS && real->cuDeviceGetUuid) r = real->cuDeviceGetUuid(&u, dev);
      uuid[0] = 0;
      if (r == CUDA_SUCCESS) {
        const unsigned char *b = (const unsigned char *)u.bytes;
        snprintf(uuid, VS_NAME_MAX,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
      }
    }
  }
  vs_guard_leave();
  return rc;
}

/* A card's first use: opens its ledger, or marks it not enforced. */
__attribute__((noinline, cold)) static vs_tenant_session *open_card(int card) {
  vs_tenant_session *s = session();
  if (!s || !vs_tenant_enforcing(s)) {
    atomic_store(&g_card[card], CARD_OFF);
    return NULL;
  }
  pthread_mutex_lock(&g_open_lock);
  int st = atomic_load(&g_card[card]);
  if (st == CARD_UNKNOWN) {
    uint64_t cap = 0;
    char uuid[VS_NAME_MAX];
    if (identify(card, &cap, uuid) == 0) {
      /* A plan error exits 78 or, under passthrough, leaves the card unenforced. */
      if (vs_tenant_card(s, card, uuid, cap)) {
        g_capacity[card] = cap;
        if (uuid[0]) snprintf(g_card_id[card], VS_NAME_MAX, "%s", uuid);
        else snprintf(g_card_id[card], VS_NAME_MAX, "%d", card);
        st = CARD_OPEN;
      } else {
        st = CARD_OFF;
      }
      atomic_store_explicit(&g_card[card], st, memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_open_lock);
  return st == CARD_OPEN ? s : NULL;
}

/* The session when the card is enforced (its ledger open), else NULL.
 * Inline: every charge, release and view asks it first. */
static inline vs_tenant_session *card_session(int card) {
  if (card < 0 || card >= NCARDS) return NULL;
  int st = atomic_load_explicit(&g_card[card], memory_order_acquire);
  if (__builtin_expect(st == CARD_OPEN, 1)) return g_session;
  return st == CARD_OFF ? NULL : open_card(card);
}

/* The card's ledger is open (g_session and g_card_id[card] are then set):
 * what every accessor below asks before it reads them. Never opens one. */
static int is_open(int card) {
  return card >= 0 && card < NCARDS && atomic_load_explicit(&g_card[card], memory_order_acquire) == CARD_OPEN;
}

int vs_quota_card_id(int card, char out[VS_NAME_MAX]) {
  if (!is_open(card)) return -1;
  snprintf(out, VS_NAME_MAX, "%s", g_card_id[card]);
  return 0;
}

/* The process's live bytes on an open card (s its session) to the
 * ledger's display column. */
static inline void publish_live(vs_tenant_session *s, int card) {
  vs_tenant_set_live(s, card, vs_acct_live_bytes(card));
}

void vs_quota_refresh_live(int card) {
  if (is_open(card)) publish_live(g_session, card);
}

CUresult vs_quota_charge(int card, uint64_t n) {
  vs_tenant_session *s = card_session(card);
  if (!s) return CUDA_SUCCESS;
  refusal_note *t = &t_refused;
  if (vs_tenant_try(s, card, n, &t->why) == 1) {
    t->pending = 1;
    t->card = card;
    t->n = n;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  t->pending = 0;
  t->live_due = 1;
  atomic_fetch_add_explicit(&g_charged_bytes[card], n, memory_order_release);
  atomic_fetch_add_explicit(&g_charges, 1, memory_order_release);
  /* Refreshed again when the allocation is recorded; this one is what the
   * ledger keeps when the request fails after the growth was admitted (a
   * VMM handle created, then its mapping refused: the handle stays cached). */
  vs_quota_refresh_live(card);
  return CUDA_SUCCESS;
}

CUresult vs_quota_could_fit(int card, uint64_t n) {
  if (card < 0 || card >= NCARDS) return CUDA_SUCCESS;
  vs_tenant_session *s = card_session(card);
  uint64_t total = 0;
  if (s && vs_tenant_view(s, card, 0, NULL, &total) == 0 && n > total) {
    /* Beyond what the tenant could ever hold here (its limit, or the card
     * less headroom and others' reservations): the ledger refuses it
     * whatever happens, and this charge records that refusal (the note the
     * final log line and vs_quota_wait read) without taking a byte. */
    if (vs_quota_charge(card, n) == CUDA_SUCCESS) {
      vs_quota_uncharge(card, n);   /* cannot happen (n > total): never refuse what was admitted */
      return CUDA_SUCCESS;
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint64_t cap = s ? g_capacity[card] : 0;
  char uuid[VS_NAME_MAX];
  if (!cap && identify(card, &cap, uuid) != 0) cap = 0;
  /* Larger than the card: the driver could never grant it. */
  return cap && n > cap ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

uint64_t vs_quota_room(int card) {
  vs_tenant_session *s = card_session(card);
  uint64_t f = 0;
  if (!s || vs_tenant_view(s, card, 0, &f, NULL) != 0) return UINT64_MAX;
  return f;
}

int vs_quota_live_due(void) {
  if (__builtin_expect(!t_refused.live_due, 1)) return 0;
  t_refused.live_due = 0;
  return 1;
}

/* Issue 23: before a refusal stands under `fail` or `spill` (this
 * thread's own arena has trimmed already), the caches in other processes
 * that stand in its way get their chance, once per request: the tenant's
 * own where its limit refused, also other tenants' where the card's
 * condition did, every cache where the driver itself refused (no charge
 * refused on this thread). They are asked to trim (a bounded wait for
 * their answers), and the caller tries again. *deadline_ns = 1 marks the
 * round as done; under `wait` there is no round (waiting is the round:
 * a process with a cache gives it back while others wait). */
static int trim_round(vs_tenant_session *s, int card, uint64_t *deadline_ns) {
  refusal_note *t = &t_refused;
  if (vs_tenant_wait_ms(s) || *deadline_ns) return 0;
  *deadline_ns = 1;
  vs_trim_scope scope = !t->pending                         ? VS_TRIM_CARD
                        : t->why.kind == VS_REFUSE_LIMIT ? VS_TRIM_TENANT
                                                           : VS_TRIM_CAPACITY;
  if (vs_tenant_trim_others(s, card, scope, VS_LEDGER_TRIM_WAIT_MS) == 0) return 0;
  t->pending = 0;
  return 1;
}

int vs_quota_trim_round(int card, uint64_t *deadline_ns) {
  if (t_refused.pending) card = t_refused.card;
  vs_tenant_session *s = card >= 0 ? card_session(card) : NULL;
  return s ? trim_round(s, card, deadline_ns) : 0;
}

int vs_quota_ask_card(int card) {
  vs_tenant_session *s = card >= 0 ? card_session(card) : NULL;
  return s ? vs_tenant_trim_others(s, card, VS_TRIM_CARD, VS_LEDGER_TRIM_WAIT_MS) : 0;
}

int vs_quota_wait(int card, uint64_t n, uint64_t *deadline_ns) {
  refusal_note *t = &t_refused;
  /* No refused charge on this thread: the driver itself refused (memory
   * held outside the books, or in other processes' caches: the round
   * asks them), or the request failed for another reason. Nothing to
   * wait for or report. */
  if (!t->pending) return vs_quota_trim_round(card, deadline_ns);
  /* What was refused may be an arena growth larger than the request. */
  uint64_t req = n;
  if (t->card != card) card = t->card;
  /* Wait for the whole request: a refused arena growth gives back what it
   * had grown (a refused request holds no more than before), so the last
   * refused step alone would fit at once and the retry would grow and be
   * refused again, without end. */
  if (t->n > n) n = t->n;
  vs_tenant_session *s = card_session(card);
  if (!s) {
    t->pending = 0;
    return 0;
  }
  if (trim_round(s, card, deadline_ns)) return 1;
  uint64_t wait_ms = vs_tenant_wait_ms(s);
  if (wait_ms) {
    if (!*deadline_ns) *deadline_ns = vs_mono_ns() + wait_ms * 1000000ull;
    vs_refusal why = t->why;
    /* Fits now: the caller tries again (and may lose the race), until the
     * deadline, never past it. */
    int fit = vs_tenant_wait_fit(s, card, n, *deadline_ns, &why);
    if (fit == 0 && vs_mono_ns() < *deadline_ns) {
      t->pending = 0;
      return 1;
    }
    if (fit != 0) t->why = why;
  }
  t->pending = 0;
  /* The line names the program's request (what was refused inside the
   * arena may be a growth step or a granule of it); usage and condition
   * are the ledger's. */
  if (req) t->why.request = req;
  vs_tenant_report(s, card, &t->why);
  return 0;
}

void vs_quota_force(int card, uint64_t n) {
  vs_tenant_session *s = card_session(card);
  if (!s) return;
  vs_tenant_force(s, card, n);
  atomic_fetch_add_explicit(&g_charged_bytes[card], n, memory_order_release);
  atomic_fetch_add_explicit(&g_charges, 1, memory_order_release);
}

void vs_quota_uncharge(int card, uint64_t n) {
  vs_tenant_session *s = card_session(card);
  if (!s) return;
  vs_tenant_release(s, card, n);
  vs_quota_refresh_live(card);
}

/* The view; the driver's own figures for the card come from drv_free /
 * drv_total when the caller has them (NVML's, for any card), else from
 * cuMemGetInfo (the current context's card: what cuMemGetInfo asks). */
static int view(int card, const uint64_t *drv_free, const uint64_t *drv_total, uint64_t *free_bytes,
                uint64_t *total_bytes) {
  vs_tenant_session *s = card_session(card);
  if (!s) return VS_MEM_PASS;
  uint64_t f = 0, tot = 0, theirs = 0, charges = atomic_load_explicit(&g_charges, memory_order_acquire);
  if (vs_tenant_view_caches(s, card, 0, &f, &tot, &theirs) != 0) return VS_MEM_PASS;
  /* Nothing reserved for others, no headroom, no limit: the tenant could
   * hold the whole card, and the driver's own total is the formula's. */
  int whole_card = tot >= g_capacity[card];
  if (whole_card && !free_bytes) return VS_MEM_PASS;
  if (free_bytes) {
    /* Never more than the card really has (processes without the shim,
     * the driver's own rounding): the driver's free caps the books' room.
     * Nor more than the books admit, on the whole card too: an overhead
     * measured while blocks were live (the driver's rounding of them) stays
     * charged until the next measurement after their frees, and a request
     * of the driver's free would be refused meanwhile. */
    size_t df = 0, dt = 0;
    CUresult r = CUDA_ERROR_NOT_INITIALIZED;
    if (drv_free && drv_total) {
      df = (size_t)*drv_free;
      dt = (size_t)*drv_total;
      r = CUDA_SUCCESS;
    } else {
      const vs_real_table *real = vs_driver_if_loaded();
      if (real && real->cuMemGetInfo_v2) {
        vs_guard_enter();
        r = real->cuMemGetInfo_v2(&df, &dt);
        vs_guard_leave();
        vs_acct_call(card < 0 ? 0 : card, VRAMSHIM_CALL_OTHER);
      }
    }
    /* Other processes' caches on the card are the driver's too once they
     * give them back, which a refusal asks of them (vs_quota_wait): read
     * with the books. They matter only where the driver's free could
     * bind: above the books' room they change nothing below. */
    if (r == CUDA_SUCCESS && (uint64_t)df <= f)
      df = (uint64_t)df + theirs < (uint64_t)df ? SIZE_MAX : (size_t)((uint64_t)df + theirs);
    /* The books bind (a limit, others' reservations): their room comes in
     * whole 2 MiB pieces (below). Where the driver's free binds, it stands
     * as the driver gives it. */
    int books_bind = !(r == CUDA_SUCCESS && (uint64_t)df <= f);
    if (r == CUDA_SUCCESS && (uint64_t)df < f) f = (uint64_t)df;
    if (r == CUDA_SUCCESS && whole_card) tot = dt;
    /* Free is what one allocation can take: the program sizes one by it
     * (a KV cache, a preallocated pool). The arenas' cache counts where
     * their OOM ladder can give it back or a request fits in it, not where
     * a live block pins its chunk or handle; a growth comes in whole
     * granules (docs/config.md, "The view"). */
    uint64_t room = f, after = 0;
    f = arena_one_piece(card, room);
    /* Another thread's growth charged between the books' reading and the
     * arenas' walk, and freed before the walk, would count twice (in the
     * stale room and as cache to give back): the books read again lower
     * the answer by what the room fell meanwhile (one piece never moves
     * by more than its room does). Only where this process charged since
     * the first reading: a growth counts (g_charges) before it reaches an
     * arena, and the walk, under the arenas' locks, comes after anything
     * it finds there. Other processes' charges meanwhile stay out of this
     * answer, as those made just after it do. */
    if (atomic_load_explicit(&g_charges, memory_order_acquire) != charges &&
        vs_tenant_view(s, card, 0, &after, NULL) == 0 && after < room)
      f = f > room - after ? f - (room - after) : 0;
    if (f > tot) f = tot;
    /* A pool grows by whole 2 MiB pieces (pool_charge.c): a cuMemAllocAsync
     * of a books' free that is no multiple of them was refused, where the
     * driver alone grants its own free (which moves by whole pages). */
    if (books_bind) f = f / VS_POOL_GROWTH_UNIT * VS_POOL_GROWTH_UNIT;
    *free_bytes = f;
  }
  if (total_bytes) *total_bytes = tot;
  return VS_MEM_DONE;
}

int vs_quota_view(int card, uint64_t *free_bytes, uint64_t *total_bytes) {
  return view(card, NULL, NULL, free_bytes, total_bytes);
}

int vs_quota_view_driver(int card, uint64_t drv_free, uint64_t drv_total, uint64_t *free_bytes,
                         uint64_t *total_bytes) {
  return view(card, &drv_free, &drv_total, free_bytes, total_bytes);
}

uint64_t vs_quota_charged_bytes(int card) {
  return card >= 0 && card < NCARDS ? atomic_load_explicit(&g_charged_bytes[card], memory_order_acquire) : 0;
}

int vs_quota_open(int card) { return card_session(card) ? 0 : -1; }

int vs_quota_held(int card, uint64_t *held, uint64_t *overhead) {
  if (!is_open(card)) return -1;
  return vs_tenant_held(g_session, card, held, overhead);
}

int vs_quota_drv_predict(int card, uint64_t *drv_free, uint64_t *held, uint64_t *ctx_cost) {
  if (!is_open(card)) return -1;
  return vs_tenant_drv_predict(g_session, card, drv_free, held, ctx_cost);
}

void vs_quota_drv_note(int card, uint64_t drv_free, uint64_t ctx_cost) {
  if (!is_open(card)) return;
  vs_tenant_drv_note(g_session, card, drv_free, ctx_cost);
}

void vs_quota_drv_counted(int card, uint64_t n) {
  if (!is_open(card)) return;
  vs_tenant_drv_counted(g_session, card, n);
}

void vs_quota_set_overhead(int card, uint64_t overhead) {
  if (!is_open(card)) return;
  vs_tenant_set_overhead(g_session, card, overhead);
}

/* A process that exits normally gives its slots back at exit: status then
 * shows the truth at once instead of "(dead, reclaim pending)" until
 * another process allocates. Runs after the program's atexit handlers
 * (they were registered after this library loaded); not where the
 * platform says other threads may have died inside the shim's locks
 * (vs_plat_exit_work_ok: a Windows process ending). A fork child whose
 * handles are inherited gives back nothing of its parent's. */
void vs_quota_exit(void) {
  static _Atomic int done;
  if (g_session && !atomic_exchange(&done, 1)) vs_tenant_exit(g_session);
}

__attribute__((destructor)) static void quota_at_exit(void) {
  if (vs_plat_exit_work_ok()) vs_quota_exit();
}

int vs_quota_check_ledgers(void) {
  int n = 0;
  for (int c = 0; c < NCARDS; c++)
    if (atomic_load_explicit(&g_card[c], memory_order_acquire) == CARD_OPEN) {
      vs_tenant_check(g_session, c);
      /* Another process is about to refuse an allocation our cache could
       * let in: it goes back first (issue 23). So it does while any
       * process waits for memory on the card (on_limit = wait), which an
       * idle process would otherwise never give it (its frees do that,
       * memory_service.c). Then what a trim would give back now is
       * published, for the others' views and asks, with what the program
       * holds (live: refreshed where a charge touched the ledger, so frees
       * into an arena left it stale until the next growth). */
      uint32_t req;
      uint64_t back = arena_reclaimable(c);
      if (vs_tenant_trim_asked(g_session, c, &req)) {
        arena_trim(c);
        vs_tenant_trim_answer(g_session, c, req);
        back = arena_reclaimable(c);
      } else if (back && vs_tenant_waiting_slots(g_session, c)) {
        arena_trim(c);
        back = arena_reclaimable(c);
      }
      vs_tenant_set_cache(g_session, c, back);
      vs_quota_refresh_live(c);
      n++;
    }
  return n;
}

unsigned vs_quota_waiters(int card) {
  if (!is_open(card)) return 0;
  return vs_tenant_waiters(g_session, card);
}

/* ---- on_limit = spill:MAX (issue 13) ---------------------------------------- */
uint64_t vs_quota_spill_max(int card) {
  vs_tenant_session *s = card_session(card);
  return s ? vs_tenant_spill_max(s, card) : 0;
}

int vs_quota_spill(int card, uint64_t n, vs_quota_spill_note *note) {
  vs_tenant_session *s = card_session(card);
  vs_spill_note ln;
  memset(note, 0, sizeof *note);
  if (!s) return 1;
  int r = vs_tenant_spill(s, card, n, &ln);
  note->spilled = ln.spilled;
  note->max = ln.max;
  note->used = ln.used;
  note->limit = ln.limit;
  note->episode = ln.episode;
  return r;
}

void vs_quota_unspill(int card, uint64_t n) {
  vs_tenant_session *s = card_session(card);
  if (s) vs_tenant_unspill(s, card, n);
}

void vs_quota_settle(void) { t_refused.pending = 0; }
int vs_quota_refusal_pending(void) { return t_refused.pending; }

void vs_quota_atfork_child(void) {
  /* The session stays (same settings); its ledgers are re-opened on next
   * use, as this process's own slots (session.c). Only a lock another
   * parent thread may have held, and this thread's note, start clean. */
  t_refused.pending = 0;
  t_refused.live_due = 0;
  pthread_mutex_init(&g_open_lock, NULL);
  if (g_session) vs_tenant_atfork_child(g_session);
}

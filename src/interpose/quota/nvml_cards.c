/* NVML's cards as the shim's cards, and the true footprint (nvml_cards.h). */
#include "cuda_api.h"

#include "nvml_cards.h"

#include "accounting.h"

#include "driver_table.h"
#include "guard.h"
#include "log.h"
#include "nvml_table.h"
#include "proc.h"
#include "quota.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CARDS 64
#define MAX_PROCS 1024

/* The UUID of each CUDA ordinal, filled once (the driver's answer does not
 * change for the life of a process). */
static char g_uuid[MAX_CARDS][96];
static _Atomic int g_ncards = -1;   /* -1: not yet asked; 0: no driver or no card */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void format_uuid(const CUuuid *u, char out[96]) {
  const unsigned char *b = (const unsigned char *)u->bytes;
  snprintf(out, 96, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
           b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int fill(void) {
  pthread_mutex_lock(&g_lock);
  if (g_ncards < 0) {
    int n = 0;
    const vs_real_table *real = vs_driver();
    vs_guard_enter();
    /* cuInit again is harmless; a process that only reads NVML needs it */
    if (real && real->cuInit && real->cuInit(0) == CUDA_SUCCESS && real->cuDeviceGetCount &&
        real->cuDeviceGetCount(&n) == CUDA_SUCCESS) {
      if (n > MAX_CARDS) n = MAX_CARDS;
      for (int i = 0; i < n; i++) {
        CUdevice dev = i;
        CUuuid u;
        CUresult r = real->cuDeviceGet ? real->cuDeviceGet(&dev, i) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS) r = real->cuDeviceGetUuid_v2 ? real->cuDeviceGetUuid_v2(&u, dev) : CUDA_ERROR_NOT_FOUND;
        if (r != CUDA_SUCCESS && real->cuDeviceGetUuid) r = real->cuDeviceGetUuid(&u, dev);
        if (r == CUDA_SUCCESS) format_uuid(&u, g_uuid[i]);
        else g_uuid[i][0] = 0;
      }
    } else {
      n = 0;
    }
    vs_guard_leave();
    g_ncards = n;
  }
  int n = g_ncards;
  pthread_mutex_unlock(&g_lock);
  return n;
}

int vs_nvml_card_of_uuid(const char *uuid) {
  if (!uuid || !uuid[0]) return -1;
  int n = fill();
  for (int i = 0; i < n; i++)
    if (g_uuid[i][0] && strcmp(g_uuid[i], uuid) == 0) return i;
  return -1;
}

int vs_nvml_card_uuid(int card, char out[96]) {
  if (card < 0 || card >= fill() || !g_uuid[card][0]) return -1;
  memcpy(out, g_uuid[card], 96);
  return 0;
}

/* Orders every reading of NVML's process lists and every change of the
 * overhead (vs_quota_set_overhead) this file makes. */
static pthread_mutex_t g_refresh_lock = PTHREAD_MUTEX_INITIALIZER;

/* The processes NVML lists on card: their pids and bytes into the static
 * buffers below, *n of them; 0, or -1 when NVML is missing or refuses.
 * Every version has pid and usedGpuMemory first; v2 and v3 share a
 * layout. Static buffers, used under g_refresh_lock (every caller holds
 * it): no allocation on the background thread once a second, so a fork of
 * the program never finds that thread inside malloc (an allocator that is
 * not fork-safe, as ASan's before LLVM 17, would then block the child). */
static unsigned g_pids[MAX_PROCS];
static unsigned long long g_used[MAX_PROCS];
static int nvml_procs(int card, int may_load, unsigned *n) {
  const vs_nvml_table *t = vs_nvml_for_shim(may_load);
  char uuid[96];
  nvmlDevice_t d;
  *n = 0;
  if (!t || !t->nvmlDeviceGetHandleByUUID || vs_nvml_card_uuid(card, uuid) != 0) return -1;
  if (t->nvmlDeviceGetHandleByUUID(uuid, &d) != NVML_SUCCESS) return -1;
  static union {
    nvmlProcessInfo_t v3[MAX_PROCS];
    nvmlProcessInfo_v1_t v1[MAX_PROCS];
  } buf;
  unsigned got = MAX_PROCS;
  nvmlReturn_t r = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (t->nvmlDeviceGetComputeRunningProcesses_v3 || t->nvmlDeviceGetComputeRunningProcesses_v2) {
    r = t->nvmlDeviceGetComputeRunningProcesses_v3 ? t->nvmlDeviceGetComputeRunningProcesses_v3(d, &got, buf.v3)
                                                   : t->nvmlDeviceGetComputeRunningProcesses_v2(
                                                         d, &got, (nvmlProcessInfo_v2_t *)buf.v3);
    for (unsigned i = 0; r == NVML_SUCCESS && i < got && i < MAX_PROCS; i++)
      g_pids[i] = buf.v3[i].pid, g_used[i] = buf.v3[i].usedGpuMemory;
  } else if (t->nvmlDeviceGetComputeRunningProcesses) {
    r = t->nvmlDeviceGetComputeRunningProcesses(d, &got, buf.v1);
    for (unsigned i = 0; r == NVML_SUCCESS && i < got && i < MAX_PROCS; i++)
      g_pids[i] = buf.v1[i].pid, g_used[i] = buf.v1[i].usedGpuMemory;
  }
  if (r != NVML_SUCCESS) return -1;
  *n = got < MAX_PROCS ? got : MAX_PROCS;
  return 0;
}

/* ---- which pid NVML lists this process under ------------------------------
 * NVML names processes by their pids on the host. A process in a container
 * with its own PID namespace (a Kubernetes pod's) has another pid there,
 * and its own pid may even be some other process's on the host. So the
 * shim finds itself at its first context on a card: the pids NVML lists
 * on the card just before the context begins and just after (the process
 * holds no context there before it, so it is not in the first list; the
 * driver lists a context's process from its creation on). Once found, for
 * every card; until then, again at the first context on another card.
 * vs_footprint_identity's rule; under g_refresh_lock. */
static unsigned g_me;                 /* the pid NVML lists this process under; 0: not known */
static int g_me_foreign;              /* this process's own pid is another process's in NVML's lists */
static _Atomic uint64_t g_ctx_seen;   /* a bit per card where a context of this process began: no list there */
static int g_before_card = -1;        /* the card of the list taken before a first context there, or -1 */
static unsigned g_before[MAX_PROCS], g_nbefore;
_Static_assert(MAX_CARDS <= 64, "g_ctx_seen has a bit per card");

static int listed(const unsigned *pids, unsigned n, unsigned pid) {
  for (unsigned i = 0; i < n; i++)
    if (pids[i] == pid) return 1;
  return 0;
}

unsigned vs_footprint_identity(const unsigned *before, unsigned nb, const unsigned *after, unsigned na, unsigned own,
                               int *own_foreign) {
  if (listed(before, nb, own)) *own_foreign = 1;
  if (!*own_foreign && listed(after, na, own)) return own;
  unsigned found = 0;
  for (unsigned i = 0; i < na; i++) {
    if (listed(before, nb, after[i]) || after[i] == found || (*own_foreign && after[i] == own)) continue;
    if (found) return 0;   /* two began at once: which is this one cannot be told */
    found = after[i];
  }
  return found;
}

void vs_footprint_ctx_begins(int card) {
  if (card < 0 || card >= MAX_CARDS || (atomic_load(&g_ctx_seen) & (1ull << card))) return;
  fill();
  if (!vs_nvml_for_shim(1)) return;
  pthread_mutex_lock(&g_refresh_lock);
  unsigned n = 0;
  /* Another thread's first context on another card may take the one list
   * over: that card is then looked at, and this one at its next context. */
  if (!g_me && !(atomic_load(&g_ctx_seen) & (1ull << card)) && nvml_procs(card, 1, &n) == 0) {
    memcpy(g_before, g_pids, n * sizeof *g_pids);
    g_nbefore = n;
    g_before_card = card;
  }
  pthread_mutex_unlock(&g_refresh_lock);
}

/* Caller holds g_refresh_lock; a context of this process just began on
 * card. Compares NVML's list now with the one vs_footprint_ctx_begins took
 * on the card before the process's first context there. */
static void identify(int card) {
  uint64_t was = atomic_fetch_or(&g_ctx_seen, 1ull << card);
  unsigned n = 0;
  if (g_before_card != card) return;
  g_before_card = -1;
  if ((was & (1ull << card)) || g_me || nvml_procs(card, 1, &n) != 0) return;
  unsigned own = (unsigned)vs_plat_pid();
  g_me = vs_footprint_identity(g_before, g_nbefore, g_pids, n, own, &g_me_foreign);
  if (g_me && g_me != own)
    VS_INFO("NVML lists this process (pid %u here) as pid %u: a PID namespace of its own; its footprint is read "
            "under that pid (docs/nvml.md)", own, g_me);
  else if (!g_me)   /* own was not taken: foreign, or not in the list after */
    VS_DEBUG("card %d: NVML does not tell which of its processes this one is (%u listed before its first context "
             "there, %u after): its contexts are measured without NVML's figure", card, g_nbefore, n);
}

/* The bytes NVML says this process holds on card: 0 with *used, 1 when NVML
 * does not list it there (no context; or a PID namespace NVML does not see
 * into, where the first context did not tell which pid is this process's),
 * -1 when NVML is missing. Caller holds g_refresh_lock. */
static int nvml_used_by_me(int card, uint64_t *used, int may_load) {
  unsigned n = 0, pid = g_me ? g_me : (unsigned)vs_plat_pid();
  if (!g_me && g_me_foreign) return 1;   /* no pid to look for: the list is not read */
  if (nvml_procs(card, may_load, &n) != 0) return -1;
  for (unsigned i = 0; i < n; i++)
    if (g_pids[i] == pid) {
      *used = g_used[i];
      /* Windows under WDDM reports no per-process figure */
      return g_used[i] == (unsigned long long)NVML_VALUE_NOT_AVAILABLE ? 1 : 0;
    }
  return 1;
}

/* The last measurement per card (what NVML said the process holds, what
 * the shim counted), under g_refresh_lock (above), which orders the
 * measurements: the background thread and the context hooks both measure. */
static vs_footprint_reading g_last[MAX_CARDS];

/* A measurement taken while a driver call is in flight is off for an
 * instant: the driver holds memory the shim no longer counts or does not
 * count yet, or the other way round. So the overhead moves only where two
 * measurements in a row saw the same state: the driver's figure and the
 * shim's unchanged, and none of them moved (no driver call that can change
 * them returned, the count and the bytes charged the same across it). A
 * call in flight at both would have to be one call spanning them. Taking
 * the smaller of two differing excesses was not enough: a growth in flight
 * at two readings in a row charged 2 MiB for a while (in 1 of 80 runs of a
 * replay's child under Wine, whose driver calls are slow), likely what
 * moved the smallest card that replay found (docs/windows.md, "Reruns").
 * A context's own measurement (at_ctx) counts at once: its memory appeared
 * with the context, and a program may size itself by free memory next. It
 * counts what surely is overhead: the shim charges before it asks the
 * driver for memory and gives back after the driver freed it, so only a
 * charge made during the measurement can be on the card in NVML's figure
 * and not in the count read before it, and the bytes charged meanwhile
 * (window) bound it. Counted whole, another thread's allocation in flight
 * was charged as this process's overhead until two quiet readings undid
 * it (3 to 72 MiB and more, at a context begun or ended beside threads
 * allocating: shim_truth_storm_threads_ctx_*). */
uint64_t vs_footprint_rule(const vs_footprint_reading *last, const vs_footprint_reading *now, uint64_t overhead,
                           int at_ctx) {
  uint64_t want = now->used > now->counted ? now->used - now->counted : 0;
  if (at_ctx) return want > now->window ? want - now->window : 0;
  int same = now->calls != VS_FOOTPRINT_NOT_QUIET && now->calls == last->calls && now->used == last->used &&
             now->counted == last->counted;
  return same ? want : overhead;
}

/* One measurement: NVML's figure between two readings of the shim's count,
 * with the driver calls and the bytes charged read around them (in this
 * order: a charge whose allocation NVML's figure holds was added to the
 * bytes charged before the second reading of them). calls is
 * VS_FOOTPRINT_NOT_QUIET where anything moved across it. Caller holds
 * g_refresh_lock, the only lock the overhead moves under. 0, or
 * nvml_used_by_me's 1 or -1 (-1 too when the card's ledger is not open). */
static int measure(int card, int may_load, vs_footprint_reading *now, uint64_t *overhead) {
  uint64_t calls = vs_acct_memory_calls(card), charged = vs_quota_charged_bytes(card);
  uint64_t held = 0, held_after = 0, overhead_after = 0, used = 0;
  if (vs_quota_held(card, &held, overhead) != 0) return -1;
  int rc = nvml_used_by_me(card, &used, may_load);
  if (rc != 0) return rc;
  uint64_t window = vs_quota_charged_bytes(card) - charged;
  if (vs_quota_held(card, &held_after, &overhead_after) != 0) return -1;
  int quiet = window == 0 && held_after == held && overhead_after == *overhead && vs_acct_memory_calls(card) == calls;
  now->used = used;
  now->counted = held - *overhead;
  now->calls = quiet ? calls : VS_FOOTPRINT_NOT_QUIET;
  now->window = window;
  return 0;
}

/* A context's own measurement is taken again while something moved across
 * it (other threads allocating through the driver), at most this many
 * times 100 us apart, so that it counts the whole overhead where it can. */
#define CTX_MEASURE_TRIES 8

/* The footprint by NVML. at_ctx: a context just began or ended on the
 * card; its footprint is then charged at once, so a program that sizes
 * itself from free memory right after creating its context sees the
 * context's own memory gone; the agreement rule below is for the
 * background thread's periodic readings. 0 measured; 1 NVML does not list
 * this process (its PID namespace); -1 NVML missing or the card's ledger
 * not open. Either way but 0 the overhead stands. */
static int refresh(int card, int at_ctx) {
  uint64_t overhead = 0;
  vs_footprint_reading now;
  if (card < 0 || card >= MAX_CARDS) return -1;
  pthread_mutex_lock(&g_refresh_lock);
  int rc;
  for (int tries = 1;; tries++) {
    rc = measure(card, at_ctx, &now, &overhead);
    if (rc != 0 || !at_ctx || now.calls != VS_FOOTPRINT_NOT_QUIET || tries == CTX_MEASURE_TRIES) break;
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
  }
  if (rc != 0) {
    pthread_mutex_unlock(&g_refresh_lock);
    return rc;
  }
  uint64_t apply = vs_footprint_rule(&g_last[card], &now, overhead, at_ctx);
  g_last[card] = now;
  if (apply != overhead) {
    VS_DEBUG("card %d: NVML says this process holds %llu bytes, the shim counted %llu (%llu charged while "
             "measured): %llu charged to the tenant as overhead", card, (unsigned long long)now.used,
             (unsigned long long)now.counted, (unsigned long long)now.window, (unsigned long long)apply);
    vs_quota_set_overhead(card, apply);
  }
  pthread_mutex_unlock(&g_refresh_lock);
  return 0;
}

static void fallback_settle(int card);

void vs_footprint_refresh(int card) {
  if (card < 0 || card >= MAX_CARDS) return;
  /* the background thread: never loads NVML (nvml_table.h) */
  if (!vs_nvml_for_shim(0) || refresh(card, 0) == 1) fallback_settle(card);
}

void vs_footprint_refresh_all(void) {
  int n = g_ncards;
  for (int c = 0; c < n && c < MAX_CARDS; c++) vs_footprint_refresh(c);
}

/* ---- the footprint without NVML ------------------------------------------
 * What each context took from the card's free memory when it began: the
 * driver's free memory before it (the ledger's reading of the card, moved
 * by what every process took or gave back since: vs_quota_drv_predict)
 * less the free memory right after (cuMemGetInfo in the new context). No
 * context of this process needs to exist before, and a process's first
 * context is the usual case. Never more than what nobody on the card
 * accounts for (the driver's used memory less what every process holds in
 * the ledger): a process outside the shim that allocated since the reading
 * is not charged to this one. Every measurement becomes the card's new
 * reading, and its cost the card's last context cost.
 * A card without a reading yet (the first context on it since its ledger
 * was made) is charged that last cost once another context measured it,
 * no more than what nobody accounted for when it began: pending until then.
 * The overhead is the sum over the process's live contexts on the card; a
 * context's share is given back when it ends. Under g_refresh_lock. */
#define MAX_CTX 256
static struct fallback_ctx {
  uint64_t handle;
  int card, primary;
  uint64_t took;
  uint64_t bound;   /* pending: what nobody accounted for when it began */
  int pending;
} g_ctx[MAX_CTX];
static int g_nctx;
static uint64_t g_took[MAX_CARDS];

/* The driver's free and total memory on ctx's card, read with ctx current. */
static int driver_free_in(uint64_t ctx, uint64_t *free_bytes, uint64_t *total_bytes) {
  const vs_real_table *real = vs_driver_if_loaded();
  if (!real || !real->cuMemGetInfo_v2 || !real->cuCtxPushCurrent_v2 || !real->cuCtxPopCurrent_v2) return -1;
  size_t f = 0, t = 0;
  CUcontext popped = NULL;
  vs_guard_enter();
  CUresult r = real->cuCtxPushCurrent_v2((CUcontext)(uintptr_t)ctx);
  if (r == CUDA_SUCCESS) {
    r = real->cuMemGetInfo_v2(&f, &t);
    real->cuCtxPopCurrent_v2(&popped);
  }
  vs_guard_leave();
  *free_bytes = f;
  *total_bytes = t;
  return r == CUDA_SUCCESS ? 0 : -1;
}

static int fallback_find(uint64_t handle, int card, int primary) {
  for (int i = 0; i < g_nctx; i++)
    if (primary ? (g_ctx[i].primary && g_ctx[i].card == card) : (!g_ctx[i].primary && g_ctx[i].handle == handle))
      return i;
  return -1;
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Caller: the card's ledger is open (vs_footprint_ctx_begun). */
static void fallback_begun(int card, uint64_t handle, int primary) {
  uint64_t predicted = 0, all_held = 0, cost = 0, after = 0, total = 0;
  pthread_mutex_lock(&g_refresh_lock);
  /* a retain of a primary context that was already live takes nothing */
  if (g_nctx >= MAX_CTX || fallback_find(handle, card, primary) >= 0) goto out;
  int have = vs_quota_drv_predict(card, &predicted, &all_held, &cost) == 0;
  if (driver_free_in(handle, &after, &total) != 0) goto out;
  uint64_t drv_used = total > after ? total - after : 0;
  uint64_t unexplained = drv_used > all_held ? drv_used - all_held : 0;
  struct fallback_ctx *c = &g_ctx[g_nctx++];
  memset(c, 0, sizeof *c);
  c->handle = handle;
  c->card = card;
  c->primary = primary;
  if (have) {
    c->took = min_u64(predicted > after ? predicted - after : 0, unexplained);
  } else if (cost) {
    c->took = min_u64(cost, unexplained);
  } else {
    c->pending = 1;
    c->bound = unexplained;
    VS_DEBUG("card %d: no figure from NVML for this process and no reading of the card yet: this context's footprint is charged once "
             "another context on the card is measured (at most %llu bytes)", card, (unsigned long long)unexplained);
  }
  g_took[card] += c->took;
  if (!c->pending)
    VS_DEBUG("card %d: without a figure from NVML, the new context took %llu bytes of the card's free memory (%llu "
             "free after it): charged to the tenant as overhead (%llu in all)", card, (unsigned long long)c->took,
             (unsigned long long)after, (unsigned long long)g_took[card]);
  vs_quota_set_overhead(card, g_took[card]);
  vs_quota_drv_note(card, after, have ? c->took : 0);
out:
  pthread_mutex_unlock(&g_refresh_lock);
}

/* The background thread: pending contexts take the card's context cost
 * once one is known. */
static void fallback_settle(int card) {
  pthread_mutex_lock(&g_refresh_lock);
  int pending = 0;
  for (int i = 0; i < g_nctx; i++) pending |= g_ctx[i].pending && g_ctx[i].card == card;
  uint64_t predicted = 0, all_held = 0, cost = 0;
  if (pending) vs_quota_drv_predict(card, &predicted, &all_held, &cost);
  if (cost) {
    uint64_t added = 0;
    for (int i = 0; i < g_nctx; i++)
      if (g_ctx[i].pending && g_ctx[i].card == card) {
        g_ctx[i].pending = 0;
        g_ctx[i].took = min_u64(cost, g_ctx[i].bound);
        added += g_ctx[i].took;
      }
    g_took[card] += added;
    /* memory the driver took before any reading of the card since: in the
     * reading's used memory already, not in its held */
    vs_quota_drv_counted(card, added);
    VS_DEBUG("card %d: without a figure from NVML; a context on the card was measured at %llu bytes: this process's first "
             "context is charged as much (%llu in all)", card, (unsigned long long)cost,
             (unsigned long long)g_took[card]);
    vs_quota_set_overhead(card, g_took[card]);
  }
  pthread_mutex_unlock(&g_refresh_lock);
}

static void fallback_ended(uint64_t handle, int card) {
  pthread_mutex_lock(&g_refresh_lock);
  int i = fallback_find(handle, card, card >= 0);
  if (i >= 0) {
    int c = g_ctx[i].card;
    g_took[c] -= g_ctx[i].took;
    g_ctx[i] = g_ctx[--g_nctx];
    vs_quota_set_overhead(c, g_took[c]);
  }
  pthread_mutex_unlock(&g_refresh_lock);
}

void vs_footprint_ctx_begun(int card, uint64_t handle, int primary) {
  if (card < 0 || card >= MAX_CARDS) return;
  fill();
  /* The context holds card memory from now on: its card's ledger is
   * opened here (not at the first charge or view), so the footprint is
   * measured now, by NVML or without it. */
  if (vs_quota_open(card) != 0) return;
  /* the program's thread: NVML is loaded here, if it is anywhere. NVML
   * that does not list the process (a container's PID namespace where its
   * first context did not tell which pid it is: identify) is as good as
   * none for its footprint. */
  int nvml = vs_nvml_for_shim(1) != NULL;
  if (nvml) {
    pthread_mutex_lock(&g_refresh_lock);
    identify(card);
    pthread_mutex_unlock(&g_refresh_lock);
  }
  if (!nvml || refresh(card, 1) == 1) fallback_begun(card, handle, primary);
}

void vs_footprint_ctx_ended(uint64_t handle, int card) {
  fallback_ended(handle, card);   /* nothing when the context was measured by NVML */
  if (vs_nvml_for_shim(1)) {
    if (card >= 0 && card < MAX_CARDS) refresh(card, 1);
    else
      for (int c = 0; c < g_ncards && c < MAX_CARDS; c++) refresh(c, 1);
  }
}

void vs_nvml_cards_atfork_child(void) {
  pthread_mutex_init(&g_lock, NULL);
  pthread_mutex_init(&g_refresh_lock, NULL);
  memset(g_last, 0, sizeof g_last);
  /* the child has no context of its own: the parent's are not its footprint */
  g_nctx = 0;
  memset(g_took, 0, sizeof g_took);
  /* a new pid, which NVML may list under another: found at its first context */
  g_me = 0;
  g_me_foreign = 0;
  atomic_store(&g_ctx_seen, 0);   /* the parent's contexts are not the child's */
  g_before_card = -1;
}

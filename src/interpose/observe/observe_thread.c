/* The shim's one background thread: samples the timeline of every used
 * card each timeline_interval, answers dump requests posted in this
 * process's ledger slots (ledger_mailbox.h), and writes the automatic
 * dumps asked for by refused allocations and by dump_signal. Issue 23:
 * it also checks the ledgers every VS_LEDGER_CHECK_MS while a card is
 * open (reclaiming the dead when due) and applies the arenas' decay at
 * least once a second, so an idle process behaves as a busy one.
 *
 * It sleeps on the request word of one of its slots (a process-shared
 * futex the tool wakes); a tool posts to every slot of the process, so one
 * word is enough. In-process wakes (refusal, signal) set a flag and wake
 * that word without changing it; a wake that slips in just before the
 * thread sleeps is picked up at the next timeout, which is at most 1 s.
 * Signals are blocked in the thread; dump_signal arrives through
 * src/platform/dump_signal.h (a signal on POSIX, a named event on
 * Windows). A forked child has no thread: it starts its own at its first
 * event. */
#include "arena_glue.h"
#include "clock.h"
#include "dump_file.h"
#include "dump_signal.h"
#include "ledger.h"
#include "ledger_mailbox.h"
#include "ledger_read.h"
#include "log.h"
#include "nvml_cards.h"
#include "observe_cards.h"
#include "observe_dump.h"
#include "observe_thread.h"
#include "procenv.h"
#include "quota.h"
#include "settings.h"
#include "thread.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SLEEP_NS 1000000000ull       /* in-process wakes are seen within this */
#define DISCOVER_FAST_NS 100000000ull    /* looking for a new card's slot */
#define DISCOVER_FAST_TRIES 50           /* then once per MAX_SLEEP_NS */
#define DECAY_TICK_NS 100000000ull       /* the arenas' decay is applied at most this often (<= MAX_SLEEP_NS) */

static pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic int vs_obs_thread_started;
static uint32_t g_local_word;             /* slept on while no slot is known */
static _Atomic(uint32_t *) g_wait_word;   /* what the thread sleeps on now */
static _Atomic int g_signal_flag;

/* An automatic dump asked for from the hot path, one per kind
 * (vs_obs_auto): the last request's card and figure, each kind
 * rate-limited on its own. The dump's log line is pre, the figure in
 * bytes, post. */
typedef struct auto_dump {
  const char *reason, *pre, *post;
  _Atomic int flag;
  _Atomic int card;
  _Atomic uint64_t bytes;
  vs_ratelimit rl;
} auto_dump;
static auto_dump g_auto[VS_OBS_AUTO_KINDS] = {
    [VS_OBS_AUTO_REFUSED] = {.reason = "refused", .pre = "an allocation of ", .post = " was refused"},
    [VS_OBS_AUTO_WARN] = {.reason = "warn_at", .pre = "the tenant's usage crossed warn_at (", .post = ")"},
};

/* Owned by the thread (and by a fork child before it has one). */
typedef struct obs_box {
  vs_mailbox_map m;
  int slot;
} obs_box;
static obs_box g_boxes[VRAMSHIM_MAX_CARDS];
static int g_nboxes;
static uint64_t g_start_time;

static void kick(void) {
  uint32_t *w = atomic_load(&g_wait_word);
  vs_mailbox_futex_wake(w ? w : &g_local_word);
}

/* ---- Finding this process's slots ------------------------------------------ */
/* By the card's ledger id: the header's index is the physical card's, not
 * what this process calls it (CUDA_VISIBLE_DEVICES). */
static int box_for_card(int card) {
  char id[VS_NAME_MAX];
  if (vs_quota_card_id(card, id)) return -1;
  for (int i = 0; i < g_nboxes; i++)
    if (!strcmp(g_boxes[i].m.card_id, id)) return i;
  return -1;
}

/* 1 when some used card has no slot found yet. */
static int cards_unmatched(void) {
  for (int c = 0; c < VRAMSHIM_MAX_CARDS; c++)
    if (vs_obs_card_peek(c) && box_for_card(c) < 0) return 1;
  return 0;
}

static void discover(void) {
  const char *dir = vs_settings_get()->config.ledger_dir;
  char (*ids)[VS_NAME_MAX] = malloc(sizeof(char[VS_SNAP_PROCS][VS_NAME_MAX]));
  if (!ids) return;
  char err[512];
  int n = vs_ledger_list(dir, ids, VS_SNAP_PROCS, err, sizeof err);
  for (int i = 0; i < n && g_nboxes < VRAMSHIM_MAX_CARDS; i++) {
    int known = 0;
    for (int b = 0; b < g_nboxes; b++) known |= !strcmp(g_boxes[b].m.card_id, ids[i]);
    if (known) continue;
    obs_box *bx = &g_boxes[g_nboxes];
    if (vs_mailbox_map_open(dir, ids[i], &bx->m, err, sizeof err)) continue;
    bx->slot = vs_mailbox_find(&bx->m, (int32_t)getpid(), g_start_time, 0);
    if (bx->slot < 0) {
      vs_mailbox_map_close(&bx->m);
      continue;
    }
    VS_DEBUG("card %d: dump requests through ledger %s, slot %d", bx->m.card_index, ids[i], bx->slot);
    g_nboxes++;
  }
  free(ids);
}

/* Drops slots no longer ours (the card closed, the slot taken by another
 * process): their requests are someone else's. */
static void prune(void) {
  for (int i = 0; i < g_nboxes;) {
    if (vs_mailbox_owned(&g_boxes[i].m, g_boxes[i].slot, (int32_t)getpid(), g_start_time)) {
      i++;
      continue;
    }
    uint32_t *w = vs_mailbox_req_word(&g_boxes[i].m, g_boxes[i].slot);
    if (atomic_load(&g_wait_word) == w) atomic_store(&g_wait_word, &g_local_word);
    vs_mailbox_map_close(&g_boxes[i].m);
    g_boxes[i] = g_boxes[--g_nboxes];
  }
}

static int tenant_of(int card, vs_dump_tenant_use *out) {
  int b = box_for_card(card);
  if (b < 0) return 0;
  out->present = 1;
  vs_mailbox_tenant_use(&g_boxes[b].m, g_boxes[b].slot, &out->reserve, &out->limit, &out->usage);
  vs_mailbox_tenant_spill(&g_boxes[b].m, g_boxes[b].slot, &out->spilled, &out->spill_max);
  vs_mailbox_tenant_overhead(&g_boxes[b].m, g_boxes[b].slot, &out->overhead);
  return 1;
}

/* ---- Work ---------------------------------------------------------------------- */
static void sample_all(void) {
  vs_arena_glue_read_lock();   /* no arena goes (its context ends) while sampled */
  for (int c = 0; c < VRAMSHIM_MAX_CARDS; c++) {
    obs_card *oc = vs_obs_card_peek(c);
    if (!oc) continue;
    vs_arena *a = vs_arena_glue_get(c);
    if (a)
      vs_stats_sample_arena(&oc->stats, a);
    else
      vs_stats_sample_off(&oc->stats);
  }
  vs_arena_glue_read_unlock();
}

/* Issue 10: dumps are bounded. A request within DUMP_MIN_INTERVAL_NS of
 * the last dump written for a request is answered with that dump's path
 * (it is that fresh); and this process keeps at most DUMP_KEEP files in
 * dump_dir: writing one more removes its oldest (only files it wrote
 * itself, by the path it wrote them to). Both only on this thread. */
#define DUMP_MIN_INTERVAL_NS 1000000000ull
#define DUMP_KEEP 16
static char g_kept[DUMP_KEEP][VS_PATH_MAX + 128];
static unsigned g_kept_next;
static char g_last_req_path[VS_PATH_MAX + 128];
static uint64_t g_last_req_ns;
static uint64_t g_min_interval_ns = DUMP_MIN_INTERVAL_NS; /* test hook: $VRAMSHIM_TEST_DUMP_INTERVAL_MS */
static uint64_t g_last_signal_ns;

static void keep_file(const char *path) {
  char *slot = g_kept[g_kept_next++ % DUMP_KEEP];
  if (slot[0] && unlink(slot) == 0) VS_DEBUG("dump %s removed (this process keeps its %d newest)", slot, DUMP_KEEP);
  snprintf(slot, sizeof g_kept[0], "%s", path);
}

/* Issue 23: the dump lines are bounded whatever the source (a storm of
 * signals or requests, a full disk, a folder this process cannot write):
 * at most DUMP_LOG_BURST lines per DUMP_LOG_WINDOW_NS, then one summary
 * line when the window ends. On this thread only. */
#define DUMP_LOG_BURST 8
#define DUMP_LOG_WINDOW_NS 60000000000ull
static uint64_t g_dump_log_window_ns = DUMP_LOG_WINDOW_NS; /* test hook: $VRAMSHIM_TEST_DUMP_LOG_WINDOW_MS */
static struct {
  uint64_t start_ns;
  unsigned lines;
  uint64_t written, failed;   /* dumps said nothing about in this window */
} g_dump_log;

static void dump_log_tick(uint64_t now) {
  if (now - g_dump_log.start_ns < g_dump_log_window_ns) return;
  if (g_dump_log.written || g_dump_log.failed)
    VS_WARN("%llu more dumps written and %llu that could not be written in the last %llu s, not logged one by one "
            "(at most %d lines per %llu s); dump_dir is %s",
            (unsigned long long)g_dump_log.written, (unsigned long long)g_dump_log.failed,
            (unsigned long long)((now - g_dump_log.start_ns) / 1000000000ull), DUMP_LOG_BURST,
            (unsigned long long)(g_dump_log_window_ns / 1000000000ull), vs_settings_get()->config.dump_dir);
  g_dump_log.start_ns = now;
  g_dump_log.lines = 0;
  g_dump_log.written = g_dump_log.failed = 0;
}

/* 1 when one more dump line may be logged now; else it is counted. */
static int dump_log_ok(int ok) {
  dump_log_tick(vs_mono_ns());
  if (g_dump_log.lines < DUMP_LOG_BURST) {
    g_dump_log.lines++;
    return 1;
  }
  if (ok) g_dump_log.written++;
  else g_dump_log.failed++;
  return 0;
}

static void write_auto(const char *reason, int card, const char *what) {
  vs_dump d;
  char path[VS_PATH_MAX + 128], err[VS_PATH_MAX + 100], where[24];
  if (card < 0) snprintf(where, sizeof where, "all cards");
  else snprintf(where, sizeof where, "card %d", card);
  if (vs_obs_build_dump(&d, reason, tenant_of)) {
    if (dump_log_ok(0)) VS_WARN("%s: %s; no dump: out of host memory", where, what);
  } else if (vs_dump_write_file(&d, vs_settings_get()->config.dump_dir, card, path, sizeof path, err, sizeof err)) {
    if (dump_log_ok(0)) VS_WARN("%s: %s; no dump written: %s", where, what, err);
  } else {
    keep_file(path);
    if (dump_log_ok(1)) VS_WARN("%s: %s; dump written to %s", where, what, path);
  }
  vs_dump_free(&d);
}

static void answer_requests(void) {
  uint32_t req[VRAMSHIM_MAX_CARDS];
  int any = 0;
  for (int i = 0; i < g_nboxes; i++) any |= vs_mailbox_pending(&g_boxes[i].m, g_boxes[i].slot, &req[i]);
  if (!any) return;
  uint64_t now = vs_mono_ns();
  struct stat st;
  /* A flood of requests: the last answer is at most a second old, a dump
   * (still there) or why none could be written (issue 23: a process that
   * cannot write tries once a second, not once a request). */
  if (g_last_req_path[0] && now - g_last_req_ns < g_min_interval_ns &&
      (!strncmp(g_last_req_path, "error: ", 7) || stat(g_last_req_path, &st) == 0)) {
    for (int i = 0; i < g_nboxes; i++) vs_mailbox_answer(&g_boxes[i].m, g_boxes[i].slot, req[i], g_last_req_path);
    return;
  }
  /* Taken after the requests were read: fresh for every one of them. */
  vs_dump d;
  char path[VS_PATH_MAX + 128], err[VS_PATH_MAX + 100];
  if (vs_obs_build_dump(&d, "request", tenant_of)) {
    snprintf(path, sizeof path, "error: out of host memory building the dump");
  } else if (vs_dump_write_file(&d, vs_settings_get()->config.dump_dir, -1, path, sizeof path, err, sizeof err)) {
    snprintf(path, sizeof path, "error: %s", err);
    if (dump_log_ok(0)) VS_WARN("dump requested, but it cannot be written: %s", err);
  } else {
    if (dump_log_ok(1)) VS_INFO("dump requested; written to %s", path);
    keep_file(path);
  }
  snprintf(g_last_req_path, sizeof g_last_req_path, "%s", path);
  g_last_req_ns = now;
  vs_dump_free(&d);
  for (int i = 0; i < g_nboxes; i++) vs_mailbox_answer(&g_boxes[i].m, g_boxes[i].slot, req[i], path);
}

static void handle(void) {
  for (int k = 0; k < VS_OBS_AUTO_KINDS; k++) {
    auto_dump *q = &g_auto[k];
    if (!atomic_exchange(&q->flag, 0)) continue;
    char what[128], b[32];
    snprintf(what, sizeof what, "%s%s%s", q->pre, vs_fmt_bytes(atomic_load(&q->bytes), b, sizeof b), q->post);
    write_auto(q->reason, atomic_load(&q->card), what);
  }
  /* A storm of dump signals (issue 23): at most one dump a second; the
   * signals in between are covered by it. */
  if (atomic_exchange(&g_signal_flag, 0)) {
    uint64_t now = vs_mono_ns();
    if (!g_last_signal_ns || now - g_last_signal_ns >= g_min_interval_ns) {
      g_last_signal_ns = now;
      write_auto("signal", -1, "dump signal received");
    }
  }
  answer_requests();
}

static int pending_any(void) {
  uint32_t r;
  for (int k = 0; k < VS_OBS_AUTO_KINDS; k++)
    if (atomic_load(&g_auto[k].flag)) return 1;
  if (atomic_load(&g_signal_flag)) return 1;
  for (int i = 0; i < g_nboxes; i++)
    if (vs_mailbox_pending(&g_boxes[i].m, g_boxes[i].slot, &r)) return 1;
  return 0;
}

static void *thread_main(void *arg) {
  (void)arg;
  g_start_time = vs_ledger_self_start_time();
  const char *iv = vs_plat_getenv("VRAMSHIM_TEST_DUMP_INTERVAL_MS");
  if (iv && *iv) g_min_interval_ns = strtoull(iv, NULL, 10) * 1000000ull;
  const char *lw = vs_plat_getenv("VRAMSHIM_TEST_DUMP_LOG_WINDOW_MS");
  if (lw && *lw && strtoull(lw, NULL, 10)) g_dump_log_window_ns = strtoull(lw, NULL, 10) * 1000000ull;
  g_dump_log.start_ns = vs_mono_ns();
  uint64_t interval = vs_settings_get()->config.timeline_interval_ms * 1000000ull;
  if (!interval) interval = 10000000000ull;
  uint64_t next_sample = vs_mono_ns();   /* a first sample at once */
  uint64_t next_discover = 0, next_decay = 0;
  int fast_tries = 0;
  for (;;) {
    uint64_t now = vs_mono_ns();
    if (now >= next_sample) {
      sample_all();
      next_sample += interval;
      if (next_sample <= now) next_sample = now + interval;   /* slept through: no burst */
    }
    int unmatched = cards_unmatched();
    if (unmatched && now >= next_discover) {
      discover();
      unmatched = cards_unmatched();
      next_discover = now + (fast_tries++ < DISCOVER_FAST_TRIES ? DISCOVER_FAST_NS : MAX_SLEEP_NS);
    }
    if (!unmatched) fast_tries = 0;
    int ledgers = vs_quota_check_ledgers();
    if (now >= next_decay) {
      vs_arena_glue_decay();
      next_decay = now + DECAY_TICK_NS;
    }
    vs_footprint_refresh_all();   /* each card's true footprint (nvml_cards.c) */
    prune();
    handle();
    dump_log_tick(vs_mono_ns());

    uint32_t *word = g_nboxes ? vs_mailbox_req_word(&g_boxes[0].m, g_boxes[0].slot) : &g_local_word;
    atomic_store(&g_wait_word, word);
    uint32_t val = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    if (pending_any()) continue;   /* val read first: a later post changes the word */
    now = vs_mono_ns();
    uint64_t sleep = next_sample > now ? next_sample - now : 0;
    if (sleep > MAX_SLEEP_NS) sleep = MAX_SLEEP_NS;
    /* Issue 23: the dead are reclaimed within VS_LEDGER_RECLAIM_MS of their
     * death whatever this process does (ledger.h). */
    if (ledgers && sleep > VS_LEDGER_CHECK_MS * 1000000ull) sleep = VS_LEDGER_CHECK_MS * 1000000ull;
    if (unmatched && next_discover > now && next_discover - now < sleep) sleep = next_discover - now;
    /* Keyed by the ledger when a slot is known: the wait a tool's post wakes
     * across processes on every system (wake.h); on Windows the unkeyed one
     * is a plain sleep of the slice (in-process kicks wait for it, <= 1 s). */
    if (sleep && g_nboxes) vs_mailbox_req_wait(&g_boxes[0].m, g_boxes[0].slot, val, sleep);
    else if (sleep) vs_mailbox_futex_wait(word, val, sleep);
  }
  return NULL;
}

void vs_obs_thread_start(void) {
  pthread_mutex_lock(&g_start_lock);
  if (!atomic_load(&vs_obs_thread_started)) {
    int rc = vs_thread_spawn(thread_main, NULL, "vramshim");
    if (rc) VS_WARN("cannot start the background thread (%s): no timeline, no dumps on request", strerror(rc));
    /* Not retried on failure: once per process is enough to say it. */
    atomic_store_explicit(&vs_obs_thread_started, 1, memory_order_release);
  }
  pthread_mutex_unlock(&g_start_lock);
}

void vs_obs_request_dump(vs_obs_auto kind, int card, uint64_t bytes) {
  auto_dump *q = &g_auto[kind];
  if (!vs_ratelimit_allow(&q->rl, vs_now_unix_ms(), VS_DUMP_AUTO_INTERVAL_MS)) return;
  atomic_store(&q->card, card);
  atomic_store(&q->bytes, bytes);
  atomic_store(&q->flag, 1);
  vs_obs_thread_ensure();
  kick();
}

/* Async-signal-safe: an atomic store and a futex wake. */
static void on_dump_signal(void) {
  atomic_store(&g_signal_flag, 1);
  kick();
}

void vs_obs_signal_install(int signo) {
  int e = vs_plat_dump_signal_install(signo, on_dump_signal);
  if (e) VS_WARN("dump_signal: cannot handle signal %d: %s", signo, strerror(e));
}

void vs_obs_thread_atfork_child(void) {
  for (int i = 0; i < g_nboxes; i++) vs_mailbox_map_close(&g_boxes[i].m);
  g_nboxes = 0;
  atomic_store(&g_wait_word, NULL);
  for (int k = 0; k < VS_OBS_AUTO_KINDS; k++) {
    atomic_store(&g_auto[k].flag, 0);
    atomic_store(&g_auto[k].rl.next_ms, 0);
  }
  atomic_store(&g_signal_flag, 0);
  /* The parent's dumps are not the child's to remove or to answer with. */
  memset(g_kept, 0, sizeof g_kept);
  g_kept_next = 0;
  g_last_req_path[0] = 0;
  g_last_signal_ns = 0;
  memset(&g_dump_log, 0, sizeof g_dump_log);
  pthread_mutex_init(&g_start_lock, NULL);
  atomic_store(&vs_obs_thread_started, 0);
}

#include "session.h"

#include "card_ident.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#include "hami_env.h"
#include "log.h"
#include "plan.h"
#include "proc.h"
#include "procenv.h"

struct vs_tenant_session {
  vs_config cfg;
  int enforcing;
  char tenant[VS_NAME_MAX];
  pthread_mutex_t lock;                       /* guards opening cards */
  vs_ledger *cards[VS_CFG_MAX_CARD_INDEX];
  uint8_t off[VS_CFG_MAX_CARD_INDEX];         /* card not enforced (passthrough after an error) */
  uint64_t capacity[VS_CFG_MAX_CARD_INDEX];   /* as given at first use: a fork child re-opens with it */
  char uuid[VS_CFG_MAX_CARD_INDEX][VS_NAME_MAX];
  uint64_t wait_ms;
  vs_trim_fn trim;
  vs_warn_fn warn;
  void *hook_arg;
};

/* Set in a fork child, never cleared: until a fork, no card's ledger can be
 * inherited, and get() asks the ledger nothing (an out-of-line call per
 * query). Registered when the first session is made, before it opens a
 * card, so a child that inherits a session's ledger has it set. A child of
 * a bare clone(2) runs no fork handler: it has neither this flag nor the
 * ledger's closed handle (ledger.c), as before the flag. */
static int g_forked;
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void note_fork_child(void) { __atomic_store_n(&g_forked, 1, __ATOMIC_RELAXED); }
static void watch_forks(void) { vs_plat_atfork(NULL, NULL, note_fork_child); }

static vs_tenant_session *session_new(void) {
  pthread_once(&g_fork_once, watch_forks);
  vs_tenant_session *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutex_init(&s->lock, NULL);
  return s;
}

vs_tenant_session *vs_tenant_init(const char *argv0) {
  vs_tenant_session *s = session_new();
  if (!s) return NULL;
  char err[VS_ERR_MAX];
  int r = vs_config_load_env(&s->cfg, err, sizeof err);
  if (r >= 0 && vs_config_resolve_ledger_dir(&s->cfg, 1, err, sizeof err)) r = -1;
  s->enforcing = 1;
  if (r < 0) {
    vs_config_on_error(err); /* returns only with passthrough */
    vs_config_defaults(&s->cfg);
    s->enforcing = 0;
  }
  char exe[VS_NAME_MAX];
  vs_self_exe(argv0, exe);
  const char *how = vs_config_select_tenant(&s->cfg, vs_plat_getenv("VRAMSHIM_TENANT"), exe, s->tenant);
  if (!how) {   /* a bad name is a config error: never cut, never merged with another */
    vs_config_bad_tenant(vs_plat_getenv("VRAMSHIM_TENANT"), err, sizeof err);
    vs_config_on_error(err); /* returns only with passthrough */
    s->enforcing = 0;
    how = "default";
  }
  int hami = vs_hami_apply_env(environ, &s->cfg, r != 1, s->tenant, err, sizeof err);
  if (hami < 0) {
    vs_config_on_error(err); /* returns only with passthrough */
    s->enforcing = 0;
  }
  const vs_tenant_cfg *t = vs_config_rules(&s->cfg, s->tenant);
  s->wait_ms = t ? t->wait_ms : 0;
  VS_INFO("tenant '%s' (by %s), config %s", s->tenant, how, r == 1 && hami <= 0 ? "none (no limits)" : s->cfg.file);
  return s;
}

vs_tenant_session *vs_tenant_init_with(const vs_config *cfg, const char *tenant, int enforcing) {
  vs_tenant_session *s = session_new();
  if (!s) return NULL;
  s->cfg = *cfg;
  s->enforcing = enforcing;
  snprintf(s->tenant, sizeof s->tenant, "%s", tenant && *tenant ? tenant : VS_DEFAULT_TENANT);
  const vs_tenant_cfg *t = vs_config_rules(&s->cfg, s->tenant);
  s->wait_ms = t ? t->wait_ms : 0;
  return s;
}

void vs_tenant_set_hooks(vs_tenant_session *s, vs_trim_fn trim, vs_warn_fn warn, void *arg) {
  s->trim = trim;
  s->warn = warn;
  s->hook_arg = arg;
}

int vs_tenant_enforcing(const vs_tenant_session *s) { return s && s->enforcing; }
const char *vs_tenant_name(const vs_tenant_session *s) { return s->tenant; }
const vs_config *vs_tenant_config(const vs_tenant_session *s) { return &s->cfg; }

/* Whether the config names any card by index ([card N], `cards = N`). */
static int uses_indexes(const vs_config *cfg) {
  for (int i = 0; i < cfg->ncards; i++)
    if (cfg->cards[i].index >= 0) return 1;
  for (int i = 0; i < cfg->ntenants; i++)
    if (cfg->tenants[i].cards_mask != UINT64_MAX && cfg->tenants[i].cards_mask) return 1;
  return 0;
}

static vs_ledger *open_card_locked(vs_tenant_session *s, int card, const char *uuid, uint64_t capacity) {
  vs_ledger *h = s->cards[card];
  if (h && vs_ledger_inherited(h)) {
    /* A fork child: the parent's slot stays the parent's; take our own. */
    vs_ledger_close(h);
    __atomic_store_n(&s->cards[card], NULL, __ATOMIC_RELEASE);
    h = NULL;
  }
  if (h || s->off[card]) return h;
  vs_plan *plan = malloc(sizeof *plan);
  char err[VS_ERR_MAX], id[VS_NAME_MAX];
  if (uuid && *uuid) snprintf(id, sizeof id, "%s", uuid);
  else snprintf(id, sizeof id, "%d", card);
  /* The card's rules are its physical index's and UUID's, not the ordinal's
   * (card_ident.h): two processes seeing it under different ordinals get
   * the same plan and the same ledger. */
  int index = vs_card_index(card, uuid, vs_plat_getenv("CUDA_VISIBLE_DEVICES"), s->cfg.ledger_dir);
  if (index < 0 && uses_indexes(&s->cfg))
    VS_WARN("card %s (device %d in this process): CUDA_VISIBLE_DEVICES names it by UUID and no process that knows "
            "its index has used it yet, so the [card N] sections and 'cards = N' entries of %s do not apply to it; "
            "name it by UUID there ([card GPU-...], cards = GPU-...)",
            uuid && *uuid ? uuid : "?", card, s->cfg.file);
  if (!plan || vs_plan_build_card(&s->cfg, index, card, uuid, capacity, plan, err, sizeof err) ||
      !(h = vs_ledger_open(s->cfg.ledger_dir, id, plan, s->tenant, err, sizeof err))) {
    if (!plan) snprintf(err, sizeof err, "out of memory");
    vs_config_on_error(err); /* returns only with passthrough */
    s->off[card] = 1;
  } else {
    s->capacity[card] = capacity;
    snprintf(s->uuid[card], VS_NAME_MAX, "%s", uuid ? uuid : "");
    __atomic_store_n(&s->cards[card], h, __ATOMIC_RELEASE);
  }
  free(plan);
  return h;
}

/* A fork child's first use of an inherited ledger: its own opened. */
__attribute__((noinline, cold)) static vs_ledger *reopen_if_inherited(vs_tenant_session *s, int card, vs_ledger *h) {
  if (!vs_ledger_inherited(h)) return h;
  pthread_mutex_lock(&s->lock);
  h = open_card_locked(s, card, s->uuid[card], s->capacity[card]);
  pthread_mutex_unlock(&s->lock);
  return h;
}

/* The card's ledger when open (re-opened in a fork child). Inline: every
 * query of the books comes through here (cuMemGetInfo three times). */
static inline vs_ledger *get(vs_tenant_session *s, int card) {
  if (!s || card < 0 || card >= VS_CFG_MAX_CARD_INDEX) return NULL;
  vs_ledger *h = __atomic_load_n(&s->cards[card], __ATOMIC_ACQUIRE);
  if (h && __builtin_expect(__atomic_load_n(&g_forked, __ATOMIC_RELAXED), 0)) return reopen_if_inherited(s, card, h);
  return h;
}

vs_ledger *vs_tenant_card(vs_tenant_session *s, int card, const char *uuid, uint64_t capacity) {
  if (!s || !s->enforcing || card < 0 || card >= VS_CFG_MAX_CARD_INDEX) return NULL;
  pthread_mutex_lock(&s->lock);
  vs_ledger *h = open_card_locked(s, card, uuid, capacity);
  pthread_mutex_unlock(&s->lock);
  return h;
}

int vs_tenant_admit(vs_tenant_session *s, int card, uint64_t n) {
  vs_ledger *h = get(s, card);
  if (!h) return 0;
  vs_refusal why;
  int r = vs_ledger_charge(h, n, &why);
  if (r == 1 && s->trim) {
    /* The arena gives back cached memory first: quotas count it. */
    s->trim(s->hook_arg, card, n);
    r = vs_ledger_charge(h, n, &why);
  }
  if (r == 1 && s->wait_ms) r = vs_ledger_wait_charge(h, n, s->wait_ms, &why);
  if (r == 1) {
    vs_ledger_report_refusal(h, &why);
    return 1;
  }
  if (r == 0 && why.warned && s->warn) s->warn(s->hook_arg, card, why.used + n);
  return r < 0 ? 0 : r; /* a broken ledger never turns a request into an OOM */
}

int vs_tenant_try(vs_tenant_session *s, int card, uint64_t n, vs_refusal *why) {
  vs_ledger *h = get(s, card);
  if (!h) return 0;
  vs_refusal local;
  vs_refusal *w = why ? why : &local;
  int r = vs_ledger_charge(h, n, w);
  if (r == 0 && w->warned && s->warn) s->warn(s->hook_arg, card, w->used + n);
  return r == 1 ? 1 : 0; /* a broken ledger never turns a request into an OOM */
}

void vs_tenant_force(vs_tenant_session *s, int card, uint64_t n) { vs_ledger_force(get(s, card), n); }

void vs_tenant_atfork_child(vs_tenant_session *s) {
  if (s) pthread_mutex_init(&s->lock, NULL);
}

uint64_t vs_tenant_wait_ms(const vs_tenant_session *s) { return s ? s->wait_ms : 0; }

int vs_tenant_wait_fit(vs_tenant_session *s, int card, uint64_t n, uint64_t deadline_ns, vs_refusal *why) {
  vs_ledger *h = get(s, card);
  if (!h) return 0;
  int r = vs_ledger_wait_fit(h, n, deadline_ns, why);
  return r < 0 ? 0 : r;
}

void vs_tenant_report(vs_tenant_session *s, int card, const vs_refusal *why) {
  vs_ledger_report_refusal(get(s, card), why);
}

uint32_t vs_tenant_waiters(vs_tenant_session *s, int card) { return vs_ledger_waiters(get(s, card)); }
uint32_t vs_tenant_waiting_slots(vs_tenant_session *s, int card) { return vs_ledger_waiting_slots(get(s, card)); }

int vs_tenant_card_open(const vs_tenant_session *s, int card) {
  if (!s || card < 0 || card >= VS_CFG_MAX_CARD_INDEX) return 0;
  return __atomic_load_n(&s->cards[card], __ATOMIC_ACQUIRE) != NULL;
}

void vs_tenant_release(vs_tenant_session *s, int card, uint64_t n) { vs_ledger_uncharge(get(s, card), n); }

uint64_t vs_tenant_spill_max(vs_tenant_session *s, int card) { return vs_ledger_spill_max(get(s, card)); }

int vs_tenant_spill(vs_tenant_session *s, int card, uint64_t n, vs_spill_note *note) {
  vs_ledger *h = get(s, card);
  if (!h) return 1;
  /* Unlike a device charge, a broken ledger refuses: spilling is an extra
   * the shim gives only while it can count it. */
  return vs_ledger_spill(h, n, note) == 0 ? 0 : 1;
}

void vs_tenant_unspill(vs_tenant_session *s, int card, uint64_t n) { vs_ledger_unspill(get(s, card), n); }

void vs_tenant_exit(vs_tenant_session *s) {
  if (!s) return;
  for (int i = 0; i < VS_CFG_MAX_CARD_INDEX; i++) {
    vs_ledger *h = __atomic_load_n(&s->cards[i], __ATOMIC_ACQUIRE);
    if (h && !vs_ledger_inherited(h)) vs_ledger_exit(h);
  }
}

void vs_tenant_check(vs_tenant_session *s, int card) { vs_ledger_check(get(s, card)); }

int vs_tenant_trim_others(vs_tenant_session *s, int card, vs_trim_scope scope, uint64_t timeout_ms) {
  return vs_ledger_trim_others(get(s, card), scope, timeout_ms);
}
void vs_tenant_set_cache(vs_tenant_session *s, int card, uint64_t bytes) { vs_ledger_set_cache(get(s, card), bytes); }
int vs_tenant_trim_asked(vs_tenant_session *s, int card, uint32_t *req) { return vs_ledger_trim_asked(get(s, card), req); }
void vs_tenant_trim_answer(vs_tenant_session *s, int card, uint32_t req) { vs_ledger_trim_answer(get(s, card), req); }

void vs_tenant_set_live(vs_tenant_session *s, int card, uint64_t live) { vs_ledger_set_live(get(s, card), live); }

void vs_tenant_set_overhead(vs_tenant_session *s, int card, uint64_t overhead) {
  vs_ledger_set_overhead(get(s, card), overhead);
}

int vs_tenant_drv_predict(vs_tenant_session *s, int card, uint64_t *drv_free, uint64_t *held, uint64_t *ctx_cost) {
  vs_ledger *h = get(s, card);
  return h ? vs_ledger_drv_predict(h, drv_free, held, ctx_cost) : -1;
}
void vs_tenant_drv_note(vs_tenant_session *s, int card, uint64_t drv_free, uint64_t ctx_cost) {
  vs_ledger_drv_note(get(s, card), drv_free, ctx_cost);
}

void vs_tenant_drv_counted(vs_tenant_session *s, int card, uint64_t n) { vs_ledger_drv_counted(get(s, card), n); }

int vs_tenant_held(vs_tenant_session *s, int card, uint64_t *held, uint64_t *overhead) {
  vs_ledger *h = get(s, card);
  if (!h) return -1;
  *held = vs_ledger_held(h);
  *overhead = vs_ledger_overhead(h);
  return 0;
}

int vs_tenant_view(vs_tenant_session *s, int card, uint64_t cached, uint64_t *free_bytes, uint64_t *total_bytes) {
  return vs_tenant_view_caches(s, card, cached, free_bytes, total_bytes, NULL);
}

int vs_tenant_view_caches(vs_tenant_session *s, int card, uint64_t cached, uint64_t *free_bytes,
                          uint64_t *total_bytes, uint64_t *others_cache) {
  vs_ledger *h = get(s, card);
  if (!h) return -1;
  vs_ledger_view_caches(h, cached, free_bytes, total_bytes, others_cache);
  return 0;
}

void vs_tenant_fini(vs_tenant_session *s) {
  if (!s) return;
  for (int i = 0; i < VS_CFG_MAX_CARD_INDEX; i++) vs_ledger_close(s->cards[i]);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

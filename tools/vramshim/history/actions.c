#include "actions.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "action.h"
#include "clock.h"
#include "log.h"

#define MAX_KEYS 512
#define MAX_RUNNING 64
#define OUT_TAIL 2048

struct key {
  char card[VS_NAME_MAX], tenant[VS_NAME_MAX];
  int warn_armed, refuse_armed;
};

struct running {
  vs_plat_action *p;
  char card[VS_NAME_MAX], tenant[VS_NAME_MAX], event[16], program[VS_PATH_MAX];
  uint64_t start_mono;
  int64_t start_ms;
  char out[OUT_TAIL];
  size_t outlen;
  char line[512];
  size_t linelen;
};

struct vs_actions_state {
  uint64_t timeout_ms;
  char db_path[512];
  struct key keys[MAX_KEYS];
  int nkeys;
  struct running run[MAX_RUNNING];
  int nrun;
};

vs_actions_state *vs_actions_new(uint64_t timeout_ms, const char *db_path) {
  vs_actions_state *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->timeout_ms = timeout_ms;
  snprintf(a->db_path, sizeof a->db_path, "%s", db_path);
  return a;
}

void vs_actions_free(vs_actions_state *a) {
  if (!a) return;
  for (int i = 0; i < a->nrun; i++) {
    vs_plat_action_kill(a->run[i].p);
    vs_plat_action_free(a->run[i].p);
  }
  free(a);
}

int vs_actions_running(const vs_actions_state *a) { return a->nrun; }

static struct key *key_of(vs_actions_state *a, const char *card, const char *tenant) {
  for (int i = 0; i < a->nkeys; i++)
    if (!strcmp(a->keys[i].card, card) && !strcmp(a->keys[i].tenant, tenant)) return &a->keys[i];
  if (a->nkeys == MAX_KEYS) return NULL;
  struct key *k = &a->keys[a->nkeys++];
  snprintf(k->card, sizeof k->card, "%s", card);
  snprintf(k->tenant, sizeof k->tenant, "%s", tenant);
  k->warn_armed = k->refuse_armed = 1;
  return k;
}

/* The program for an event of a tenant on a card: the tenant's rules
 * (its section, else default's), else the card's section; NULL when none. */
static const char *program_for(const vs_config *cfg, const vs_ledger_snapshot *s, const char *tenant, int refuse) {
  if (!cfg) return NULL;
  const vs_tenant_cfg *t = vs_config_rules(cfg, tenant);
  const char *p = t ? (refuse ? t->actions.on_refuse : t->actions.on_warn) : "";
  if (p[0]) return p;
  const vs_card_cfg *c = vs_config_card(cfg, s->card_index, s->card_id);
  p = c ? (refuse ? c->actions.on_refuse : c->actions.on_warn) : "";
  return p[0] ? p : NULL;
}

static void record(vs_store *st, const struct running *r, const char *status, int code, int64_t dur_ms) {
  if (st && vs_store_action(st, r->start_ms, r->card, r->tenant, r->event, r->program, status, code, dur_ms, r->out))
    VS_WARN("history database: cannot record the action %s of tenant %s: %s", r->program, r->tenant,
            sqlite3_errmsg(st->db));
}

static void start(vs_actions_state *a, vs_store *st, const vs_ledger_snapshot *s, const vs_snap_tenant *x,
                  const char *event, const char *program, uint64_t threshold, const vs_snap_event *ev, int64_t now_ms) {
  for (int i = 0; i < a->nrun; i++)
    if (!strcmp(a->run[i].card, s->card_id) && !strcmp(a->run[i].tenant, x->name) && !strcmp(a->run[i].event, event)) {
      VS_WARN("on_%s of tenant %s on card %s: %s still runs from the last crossing; not started again", event, x->name,
              s->card_id, program);
      return;
    }
  char e[13][560];
  int n = 0;
  snprintf(e[n++], sizeof e[0], "VRAMSHIM_EVENT=%s", event);
  snprintf(e[n++], sizeof e[0], "VRAMSHIM_TENANT=%s", x->name);
  snprintf(e[n++], sizeof e[0], "VRAMSHIM_CARD=%s", s->card_id);
  snprintf(e[n++], sizeof e[0], "VRAMSHIM_CARD_INDEX=%d", s->card_index);
  snprintf(e[n++], sizeof e[0], "VRAMSHIM_USED=%" PRIu64, ev ? ev->used : x->used);
  if (x->limit == VS_NO_LIMIT) snprintf(e[n++], sizeof e[0], "VRAMSHIM_LIMIT=none");
  else snprintf(e[n++], sizeof e[0], "VRAMSHIM_LIMIT=%" PRIu64, x->limit);
  snprintf(e[n++], sizeof e[0], "VRAMSHIM_RESERVE=%" PRIu64, x->reserve);
  if (threshold == UINT64_MAX) snprintf(e[n++], sizeof e[0], "VRAMSHIM_THRESHOLD=none");
  else snprintf(e[n++], sizeof e[0], "VRAMSHIM_THRESHOLD=%" PRIu64, threshold);
  snprintf(e[n++], sizeof e[0], "VRAMSHIM_REQUEST=%" PRIu64, ev && !strcmp(event, "refuse") ? ev->bytes : 0);
  snprintf(e[n++], sizeof e[0], "VRAMSHIM_PID=%d", ev ? ev->pid : 0);
  snprintf(e[n++], sizeof e[0], "VRAMSHIM_TIME=%" PRId64, (ev ? (int64_t)(ev->time_ns / 1000000) : now_ms) / 1000);
  snprintf(e[n++], sizeof e[0], "VRAMSHIM_HISTORY_DB=%s", a->db_path);
  const char *env[13];
  for (int i = 0; i < n; i++) env[i] = e[i];
  env[n] = NULL;
  struct running tmp, *r = a->nrun < MAX_RUNNING ? &a->run[a->nrun] : &tmp;
  memset(r, 0, sizeof *r);
  snprintf(r->card, sizeof r->card, "%s", s->card_id);
  snprintf(r->tenant, sizeof r->tenant, "%s", x->name);
  snprintf(r->event, sizeof r->event, "%s", event);
  snprintf(r->program, sizeof r->program, "%s", program);
  r->start_ms = now_ms;
  r->start_mono = vs_mono_ns();
  char used[32], lim[32], err[512];
  VS_WARN("tenant %s on card %s: %s (usage %s, limit %s); running on_%s = %s", x->name, s->card_id,
          !strcmp(event, "warn") ? "crossed warn_at" : "a request was refused", vs_fmt_bytes(x->used, used, 32),
          x->limit == VS_NO_LIMIT ? "none" : vs_fmt_bytes(x->limit, lim, 32), event, program);
  if (r == &tmp) snprintf(err, sizeof err, "%d actions already run", MAX_RUNNING);
  else r->p = vs_plat_action_start(program, env, err, sizeof err);
  if (!r->p) {
    VS_ERROR("on_%s of tenant %s on card %s failed: %s", event, x->name, s->card_id, err);
    snprintf(r->out, sizeof r->out, "%s", err);
    record(st, r, "not-started", INT32_MIN, 0);
    return;
  }
  a->nrun++;
}

void vs_actions_pass(vs_actions_state *a, vs_store *st, const vs_config *cfg, const vs_ledger_snapshot *s,
                     const vs_snap_event *const *new_events, int nnew, int64_t now_ms) {
  for (int t = 0; t < s->ntenants; t++) {
    const vs_snap_tenant *x = &s->tenants[t];
    struct key *k = key_of(a, s->card_id, x->name);
    if (!k) continue;
    const vs_snap_event *warn_ev = NULL, *ref_ev = NULL;
    for (int i = 0; i < nnew; i++) {
      if (strcmp(new_events[i]->tenant, x->name)) continue;
      if (!strcmp(new_events[i]->kind, "warn")) warn_ev = new_events[i];
      else if (!strcmp(new_events[i]->kind, "limit")) ref_ev = new_events[i];
    }
    const vs_tenant_cfg *rules = cfg ? vs_config_rules(cfg, x->name) : NULL;
    uint64_t level = UINT64_MAX;
    if (rules && rules->warn_ppm && x->limit != VS_NO_LIMIT)
      level = (uint64_t)((vs_u128)x->limit * rules->warn_ppm / VS_PPM_100);
    int above = level != UINT64_MAX && x->used >= level;
    if (k->warn_armed && (warn_ev || above)) {
      k->warn_armed = 0;
      const char *prog = program_for(cfg, s, x->name, 0);
      if (prog) start(a, st, s, x, "warn", prog, level, warn_ev, now_ms);
    } else if (!k->warn_armed && !warn_ev && !above) {
      k->warn_armed = 1;
    }
    uint64_t rearm = level != UINT64_MAX ? level
                     : x->limit != VS_NO_LIMIT ? x->limit / 10 * 9
                                               : UINT64_MAX;
    if (ref_ev) {
      if (k->refuse_armed) {
        k->refuse_armed = 0;
        const char *prog = program_for(cfg, s, x->name, 1);
        if (prog) start(a, st, s, x, "refuse", prog, x->limit, ref_ev, now_ms);
      }
    } else if (!k->refuse_armed && (rearm == UINT64_MAX || x->used < rearm)) {
      k->refuse_armed = 1;
    }
  }
}

static void take_output(struct running *r, const char *buf, size_t n) {
  /* The tail kept for the database. */
  if (n >= OUT_TAIL - 1) {
    memcpy(r->out, buf + n - (OUT_TAIL - 1), OUT_TAIL - 1);
    r->outlen = OUT_TAIL - 1;
  } else {
    if (r->outlen + n > OUT_TAIL - 1) {
      size_t drop = r->outlen + n - (OUT_TAIL - 1);
      memmove(r->out, r->out + drop, r->outlen - drop);
      r->outlen -= drop;
    }
    memcpy(r->out + r->outlen, buf, n);
    r->outlen += n;
  }
  r->out[r->outlen] = 0;
  /* Logged line by line. */
  for (size_t i = 0; i < n; i++) {
    char c = buf[i];
    if (c == '\n' || r->linelen == sizeof r->line - 1) {
      r->line[r->linelen] = 0;
      VS_WARN("on_%s of tenant %s on card %s: %s", r->event, r->tenant, r->card, r->line);
      r->linelen = 0;
      if (c == '\n') continue;
    }
    r->line[r->linelen++] = c;
  }
}

static void drain(struct running *r) {
  char buf[4096];
  long n;
  while ((n = vs_plat_action_read(r->p, buf, sizeof buf)) > 0) take_output(r, buf, (size_t)n);
}

void vs_actions_poll(vs_actions_state *a, vs_store *st) {
  for (int i = 0; i < a->nrun;) {
    struct running *r = &a->run[i];
    drain(r);
    int status;
    uint64_t el_ms = (vs_mono_ns() - r->start_mono) / 1000000;
    int done = vs_plat_action_done(r->p, &status);
    if (!done && el_ms < a->timeout_ms) {
      i++;
      continue;
    }
    if (!done) {
      vs_plat_action_kill(r->p);
      drain(r);
    } else {
      drain(r);
    }
    if (r->linelen) take_output(r, "\n", 1);
    if (!done) {
      VS_ERROR("on_%s of tenant %s on card %s: %s still ran after its timeout of %.1f s: killed", r->event, r->tenant,
               r->card, r->program, (double)a->timeout_ms / 1000.0);
      record(st, r, "timeout", INT32_MIN, (int64_t)el_ms);
    } else if (status) {
      if (status > 0)
        VS_ERROR("on_%s of tenant %s on card %s: %s failed with exit status %d after %.1f s", r->event, r->tenant,
                 r->card, r->program, status, (double)el_ms / 1000.0);
      else
        VS_ERROR("on_%s of tenant %s on card %s: %s was killed by signal %d after %.1f s", r->event, r->tenant,
                 r->card, r->program, -status, (double)el_ms / 1000.0);
      record(st, r, "failed", status, (int64_t)el_ms);
    } else {
      VS_WARN("on_%s of tenant %s on card %s: %s done in %.1f s", r->event, r->tenant, r->card, r->program,
              (double)el_ms / 1000.0);
      record(st, r, "ok", 0, (int64_t)el_ms);
    }
    vs_plat_action_free(r->p);
    a->run[i] = a->run[--a->nrun];
  }
}

#include "plan.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

/* Checks one card and (when out is not NULL) fills its plan. */
/* card: the physical index (-1 unknown); ordinal: what this process calls
 * it (HAMi-core's per-device limits are by ordinal); both -1: checking a
 * [card GPU-...] section, where every tenant may be. */
static int build(const vs_config *cfg, int card, int ordinal, const char *uuid, uint64_t cap, vs_plan *out,
                 char *err, size_t errlen) {
  char a[32], b[32], c[32], d[32];
  const vs_card_cfg *cc = vs_config_card(cfg, card, uuid);
  uint64_t headroom = cc ? vs_size_resolve(cc->headroom, cap) : 0;
  char label[VS_NAME_MAX + 16];
  if (card >= 0) snprintf(label, sizeof label, "card %d", card);
  else snprintf(label, sizeof label, "card %s", uuid ? uuid : "?");
  if (headroom > cap) {
    snprintf(err, errlen, "%s:%d: headroom %s of %s is above its capacity %s", cfg->file, cc->headroom_line,
             vs_fmt_bytes(headroom, a, sizeof a), label, vs_fmt_bytes(cap, b, sizeof b));
    return -1;
  }
  if (out) {
    memset(out, 0, sizeof *out);
    out->card = card;
    out->capacity = cap;
    out->headroom = headroom;
    out->generation = cfg->generation;
  }
  uint64_t sum = headroom;
  int tip_line = 0; /* the reserve that first pushed the sum over the capacity */
  for (int i = 0; i < cfg->ntenants; i++) {
    const vs_tenant_cfg *t = &cfg->tenants[i];
    int here = (card < 0 && ordinal < 0) || vs_tenant_on_card(t, card, uuid);
    uint64_t r = here ? vs_size_resolve(t->reserve, cap) : 0;
    uint64_t l = here && t->has_limit ? vs_size_resolve(t->limit, cap) : VS_NO_LIMIT;
    if (here && ordinal >= 0 && ordinal < VS_CFG_MAX_CARD_INDEX && t->card_limit[ordinal]) l = t->card_limit[ordinal];
    if (r > l) {
      snprintf(err, errlen, "%s:%d: reserve %s of tenant '%s' is above its limit %s on %s (capacity %s)",
               cfg->file, t->reserve_line, vs_fmt_bytes(r, a, sizeof a), t->name, vs_fmt_bytes(l, b, sizeof b),
               label, vs_fmt_bytes(cap, c, sizeof c));
      return -1;
    }
    uint64_t before = sum;
    sum = vs_sat_add(sum, r);
    if (before <= cap && sum > cap) tip_line = t->reserve_line;
    if (out) {
      vs_plan_tenant *p = &out->tenants[out->ntenants++];
      snprintf(p->name, sizeof p->name, "%s", t->name);
      p->reserve = r;
      p->limit = l;
      p->warn_ppm = t->warn_ppm;
      p->wait_ms = t->wait_ms;
      /* Not tied to `cards`: spilled bytes are host memory, capped per card ledger. */
      p->spill_max = t->has_spill ? vs_size_resolve(t->spill_max, cap) : 0;
    }
  }
  if (sum > cap) {
    snprintf(err, errlen, "%s:%d: reservations overcommit %s: headroom %s + reservations %s = %s, above its capacity %s",
             cfg->file, tip_line, label, vs_fmt_bytes(headroom, a, sizeof a),
             vs_fmt_bytes(sum - headroom, b, sizeof b), vs_fmt_bytes(sum, c, sizeof c), vs_fmt_bytes(cap, d, sizeof d));
    return -1;
  }
  return 0;
}

int vs_plan_build(const vs_config *cfg, int card, const char *uuid, uint64_t capacity, vs_plan *out, char *err,
                  size_t errlen) {
  return build(cfg, card, card, uuid, capacity, out, err, errlen);
}

int vs_plan_build_card(const vs_config *cfg, int index, int ordinal, const char *uuid, uint64_t capacity,
                       vs_plan *out, char *err, size_t errlen) {
  return build(cfg, index, ordinal, uuid, capacity, out, err, errlen);
}

int vs_config_check_cards(const vs_config *cfg, const uint64_t *caps, int ncaps, char *err, size_t errlen) {
  for (int i = 0; i < ncaps; i++)
    if (build(cfg, i, i, NULL, caps[i], NULL, err, errlen)) return -1;
  /* A card named by UUID may be any of them. */
  for (int k = 0; k < cfg->ncards; k++)
    if (cfg->cards[k].index < 0)
      for (int i = 0; i < ncaps; i++)
        if (build(cfg, -1, -1, cfg->cards[k].uuid, caps[i], NULL, err, errlen)) return -1;
  return 0;
}

const vs_plan_tenant *vs_plan_find(const vs_plan *plan, const char *name) {
  for (int i = 0; i < plan->ntenants; i++)
    if (!strcmp(plan->tenants[i].name, name)) return &plan->tenants[i];
  return NULL;
}

const vs_plan_tenant *vs_plan_rules(const vs_plan *plan, const char *name) {
  const vs_plan_tenant *t = vs_plan_find(plan, name);
  return t ? t : vs_plan_find(plan, VS_DEFAULT_TENANT);
}

uint64_t vs_plan_total(const vs_plan *plan, const char *tenant) {
  uint64_t others = plan->headroom;
  for (int i = 0; i < plan->ntenants; i++)
    if (strcmp(plan->tenants[i].name, tenant)) others = vs_sat_add(others, plan->tenants[i].reserve);
  /* A tenant without a section follows default's limit (issue 10). */
  const vs_plan_tenant *me = vs_plan_rules(plan, tenant);
  uint64_t room = others >= plan->capacity ? 0 : plan->capacity - others;
  uint64_t limit = me ? me->limit : VS_NO_LIMIT;
  return limit < room ? limit : room;
}

uint64_t vs_plan_reserved(const vs_plan *plan) {
  uint64_t sum = plan->headroom;
  for (int i = 0; i < plan->ntenants; i++) sum = vs_sat_add(sum, plan->tenants[i].reserve);
  return sum;
}

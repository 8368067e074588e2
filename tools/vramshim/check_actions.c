/* `vramshim check`: the threshold actions (on_warn, on_refuse in [tenant]
 * and [card] sections, issue 26) name programs the recorder may run: each
 * exists, is a regular file this user may execute, and not everyone may
 * write it (src/platform/action.h). */
#include <stdio.h>

#include "action.h"
#include "check_actions.h"

static int one(const vs_config *cfg, const char *prog, int line, const char *key, const char *where) {
  char err[600];
  if (!prog[0] || !vs_plat_program_check(prog, err, sizeof err)) return 0;
  fprintf(stderr, "vramshim: %s:%d: %s of %s: %s\n", cfg->file, line, key, where, err);
  return 1;
}

int vs_check_actions(const vs_config *cfg) {
  int bad = 0;
  char where[VS_NAME_MAX + 16];
  for (int i = 0; i < cfg->ntenants; i++) {
    const vs_tenant_cfg *t = &cfg->tenants[i];
    snprintf(where, sizeof where, "[tenant %s]", t->name);
    bad += one(cfg, t->actions.on_warn, t->actions.on_warn_line, "on_warn", where);
    bad += one(cfg, t->actions.on_refuse, t->actions.on_refuse_line, "on_refuse", where);
    if (t->actions.on_warn[0] && !t->warn_ppm)
      printf("vramshim: %s:%d: note: on_warn of [tenant %s] runs only on warn_at crossings, and the tenant has no "
             "warn_at\n", cfg->file, t->actions.on_warn_line, t->name);
  }
  for (int k = 0; k < cfg->ncards; k++) {
    const vs_card_cfg *c = &cfg->cards[k];
    if (c->index >= 0) snprintf(where, sizeof where, "[card %d]", c->index);
    else snprintf(where, sizeof where, "[card %s]", c->uuid);
    bad += one(cfg, c->actions.on_warn, c->actions.on_warn_line, "on_warn", where);
    bad += one(cfg, c->actions.on_refuse, c->actions.on_refuse_line, "on_refuse", where);
  }
  return bad;
}

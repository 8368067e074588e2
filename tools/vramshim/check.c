/* vramshim check FILE [--card-capacity SIZE]...: validate a config file and
 * print the plan per card. The tool does not load a driver: capacities come
 * from the command line, and the output says so. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_actions.h"
#include "commands.h"
#include "config.h"
#include "json.h"
#include "log.h"
#include "plan.h"

#define MAX_CAPS VS_CFG_MAX_CARD_INDEX

static void usage(FILE *out) {
  fprintf(out,
          "usage: vramshim check FILE [--card-capacity SIZE]... [--json]\n"
          "  Validates FILE (a vramshim config) and prints each card's plan: every tenant's\n"
          "  reserve and limit, the headroom, and what is left unreserved.\n"
          "  --card-capacity SIZE  capacity of card 0, then 1, ... (e.g. 24GiB); repeat per card.\n"
          "                        Without it, percentages stay unresolved and reservations are\n"
          "                        not checked against a card.\n"
          "  --json                one JSON document instead (docs/schemas/check.schema.json):\n"
          "                        validity, errors, the config as written, each card's plan\n"
          "exit status: 0 valid, 1 invalid, 2 usage\n");
}

static const char *bytes(uint64_t b, char buf[32]) { return vs_bytes_or_none(b, buf, 32); }

/* on_limit as written back: fail, wait:D, or spill:MAX (MAX a size, or resolved bytes in a plan). */
static void on_limit_str(uint64_t wait_ms, const char *spill, char *buf, size_t len) {
  if (spill) snprintf(buf, len, "spill:%s", spill);
  else if (!wait_ms) snprintf(buf, len, "fail");
  else if (wait_ms % 60000 == 0) snprintf(buf, len, "wait:%" PRIu64 "min", wait_ms / 60000);
  else if (wait_ms % 1000 == 0) snprintf(buf, len, "wait:%" PRIu64 "s", wait_ms / 1000);
  else snprintf(buf, len, "wait:%" PRIu64 "ms", wait_ms);
}

static void print_exes(const vs_tenant_cfg *t) {
  for (int j = 0; j < t->nexes; j++) printf("%s%s", j ? "," : "", t->exes[j]);
  if (!t->nexes) printf("-");
}

/* What is valid but likely not meant (to stderr under --json, so stdout
 * stays one document):
 * - a limit of zero: HAMi-core's variables read 0 as no limit; in the
 *   config it refuses every allocation the tenant's processes make;
 * - rules that name a card by index (issue 22): the index is the card's in
 *   a process without CUDA_VISIBLE_DEVICES; a process that names cards by
 *   UUID there finds the index only through the card's ledger, after a
 *   process that knew it used the card. A UUID means one card in every
 *   process. */
static void warn_config(const vs_config *cfg, FILE *out) {
  for (int t = 0; t < cfg->ntenants; t++) {
    const vs_tenant_cfg *tc = &cfg->tenants[t];
    if (tc->has_limit && (tc->limit.is_pct ? tc->limit.ppm : tc->limit.bytes) == 0)
      fprintf(out, "vramshim: warning: %s:%d: [tenant %s] limit = 0: every device allocation of the tenant's "
              "processes is refused; leave 'limit' out for no limit\n", cfg->file, tc->limit_line, tc->name);
  }
  int n = 0;
  for (int k = 0; k < cfg->ncards; k++)
    if (cfg->cards[k].index >= 0 && n++ < 8)
      fprintf(out, "vramshim: warning: %s:%d: [card %d] names a card by index; under CUDA_VISIBLE_DEVICES an index may mean "
             "another card to another process (the shim resolves it to the card CUDA numbers %d without the "
             "variable, see docs/config.md \"Cards\"); [card GPU-...] names it the same way everywhere\n",
             cfg->file, cfg->cards[k].line, cfg->cards[k].index, cfg->cards[k].index);
  for (int t = 0; t < cfg->ntenants; t++)
    if (cfg->tenants[t].cards_mask != UINT64_MAX && cfg->tenants[t].cards_mask && n++ < 8)
      fprintf(out, "vramshim: warning: [tenant %s]: 'cards' names cards by index; under CUDA_VISIBLE_DEVICES an index may "
             "mean another card to another process; 'cards = GPU-...' names a card the same way everywhere\n",
             cfg->tenants[t].name);
}

/* Without capacities: the tenants as written. */
static void print_unresolved(const vs_config *cfg) {
  char a[32], b[32], c[32];
  for (int k = 0; k < cfg->ncards; k++) {
    const vs_card_cfg *cc = &cfg->cards[k];
    if (cc->index >= 0) printf("card %d: headroom %s\n", cc->index, vs_size_str(cc->headroom, a, sizeof a));
    else printf("card %s: headroom %s\n", cc->uuid, vs_size_str(cc->headroom, a, sizeof a));
  }
  printf("%-16s %-12s %-12s %-8s %-18s %-10s %s\n", "tenant", "reserve", "limit", "warn_at", "on_limit", "cards",
         "match_exe");
  for (int i = 0; i < cfg->ntenants; i++) {
    const vs_tenant_cfg *t = &cfg->tenants[i];
    char warn[16] = "-", cards[VS_CFG_MAX_CARD_UUIDS * VS_NAME_MAX + 256] = "all";
    if (t->warn_ppm) snprintf(warn, sizeof warn, "%g%%", t->warn_ppm / 10000.0);
    if (t->cards_mask != UINT64_MAX || t->ncards_uuid) {
      size_t n = 0;
      cards[0] = 0;
      for (int k = 0; k < 64 && n + 4 < sizeof cards; k++)
        if ((t->cards_mask >> k) & 1) n += (size_t)snprintf(cards + n, sizeof cards - n, "%s%d", n ? "," : "", k);
      for (int k = 0; k < t->ncards_uuid && n + VS_NAME_MAX + 2 < sizeof cards; k++)
        n += (size_t)snprintf(cards + n, sizeof cards - n, "%s%s", n ? "," : "", t->cards_uuid[k]);
    }
    char sp[32];
    on_limit_str(t->wait_ms, t->has_spill ? vs_size_str(t->spill_max, sp, sizeof sp) : NULL, c, sizeof c);
    printf("%-16s %-12s %-12s %-8s %-18s %-10s ", t->name, vs_size_str(t->reserve, a, sizeof a),
           t->has_limit ? vs_size_str(t->limit, b, sizeof b) : "none", warn, c, cards);
    print_exes(t);
    printf("\n");
  }
}

static void print_plan(const vs_config *cfg, const vs_plan *plan) {
  char a[32], b[32], c[32], d[32];
  printf("\ncard %d: capacity %s (from --card-capacity)\n", plan->card, bytes(plan->capacity, a));
  printf("  %-16s %12s %12s %14s  %-18s %s\n", "tenant", "reserve", "limit", "can ever hold", "on_limit", "match_exe");
  int has_default = 0;
  for (int i = 0; i < plan->ntenants; i++) {
    const vs_plan_tenant *t = &plan->tenants[i];
    has_default |= !strcmp(t->name, VS_DEFAULT_TENANT);
    char sp[32];
    on_limit_str(t->wait_ms, t->spill_max ? bytes(t->spill_max, sp) : NULL, d, sizeof d);
    printf("  %-16s %12s %12s %14s  %-18s ", t->name, bytes(t->reserve, a), bytes(t->limit, b),
           bytes(vs_plan_total(plan, t->name), c), d);
    print_exes(vs_config_tenant(cfg, t->name));
    printf("\n");
  }
  /* A name that is in no section: no reserve, no limit. */
  const char *other = has_default ? "(no section)" : "default";
  printf("  %-16s %12s %12s %14s  %-18s %s\n", other, bytes(0, a), "none", bytes(vs_plan_total(plan, ""), c),
         "fail", "-");
  uint64_t reserved = vs_plan_reserved(plan);
  printf("  %-16s %12s\n", "headroom", bytes(plan->headroom, a));
  printf("  %-16s %12s  (headroom + reservations, %.1f%% of the card)\n", "reserved", bytes(reserved, a),
         plan->capacity ? 100.0 * (double)reserved / (double)plan->capacity : 0.0);
  printf("  %-16s %12s  (any tenant may use it, within its limit)\n", "unreserved",
         bytes(plan->capacity - reserved, a));
}

/* ---- JSON (--json): docs/schemas/check.schema.json ---------------------- */
#define CHECK_SCHEMA_VERSION "1.0"

/* A size as written: {"bytes": N} or {"percent": P} (of the card's capacity). */
static void json_size(vs_jw *w, const char *key, vs_size z) {
  vs_jw_key(w, key);
  vs_jw_object(w, VS_JSON_INLINE);
  if (z.is_pct) vs_jw_kfixed(w, "percent", z.ppm / 10000.0, 4);
  else vs_jw_ku64(w, "bytes", z.bytes);
  vs_jw_end(w);
}

/* on_limit: "fail", "wait" (wait_ms) or "spill" (spill_max: a size as
 * written in the config, bytes in a plan). */
static void json_on_limit(vs_jw *w, uint64_t wait_ms, int spill) {
  vs_jw_kstr(w, "on_limit", spill ? "spill" : wait_ms ? "wait" : "fail");
  vs_jw_ku64(w, "wait_ms", spill ? 0 : wait_ms);
}

static void json_exes(vs_jw *w, const vs_tenant_cfg *t) {
  vs_jw_key(w, "match_exe");
  vs_jw_array(w, VS_JSON_INLINE);
  for (int j = 0; t && j < t->nexes; j++) vs_jw_str(w, t->exes[j]);
  vs_jw_end(w);
}

/* The config as written: its [card] sections and tenants. */
static void json_config(vs_jw *w, const vs_config *cfg) {
  vs_jw_key(w, "cards");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (int k = 0; cfg && k < cfg->ncards; k++) {
    const vs_card_cfg *cc = &cfg->cards[k];
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_key(w, "index");
    if (cc->index >= 0) vs_jw_i64(w, cc->index);
    else vs_jw_null(w);
    vs_jw_key(w, "uuid");
    if (cc->index < 0) vs_jw_str(w, cc->uuid);
    else vs_jw_null(w);
    json_size(w, "headroom", cc->headroom);
    vs_jw_end(w);
  }
  vs_jw_end(w);
  vs_jw_key(w, "tenants");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (int i = 0; cfg && i < cfg->ntenants; i++) {
    const vs_tenant_cfg *t = &cfg->tenants[i];
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_kstr(w, "name", t->name);
    json_size(w, "reserve", t->reserve);
    if (t->has_limit) json_size(w, "limit", t->limit);
    else {
      vs_jw_key(w, "limit");
      vs_jw_null(w);
    }
    vs_jw_key(w, "warn_at");
    if (t->warn_ppm) vs_jw_fixed(w, t->warn_ppm / 1e6, 6);
    else vs_jw_null(w);
    json_on_limit(w, t->wait_ms, t->has_spill);
    if (t->has_spill) json_size(w, "spill_max", t->spill_max);
    else {
      vs_jw_key(w, "spill_max");
      vs_jw_null(w);
    }
    vs_jw_key(w, "cards");
    if (t->cards_mask == UINT64_MAX) vs_jw_null(w);
    else {
      vs_jw_array(w, VS_JSON_INLINE);
      for (int k = 0; k < 64; k++)
        if ((t->cards_mask >> k) & 1) vs_jw_i64(w, k);
      vs_jw_end(w);
    }
    json_exes(w, t);
    vs_jw_end(w);
  }
  vs_jw_end(w);
}

static void json_plan(vs_jw *w, const vs_config *cfg, const vs_plan *plan) {
  vs_jw_object(w, VS_JSON_BLOCK);
  vs_jw_ki64(w, "card", plan->card);
  vs_jw_ku64(w, "capacity", plan->capacity);
  vs_jw_ku64(w, "headroom", plan->headroom);
  uint64_t reserved = vs_plan_reserved(plan);
  vs_jw_ku64(w, "reserved", reserved);
  vs_jw_ku64(w, "unreserved", plan->capacity - reserved);
  vs_jw_key(w, "tenants");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (int i = 0; i < plan->ntenants; i++) {
    const vs_plan_tenant *t = &plan->tenants[i];
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_kstr(w, "name", t->name);
    vs_jw_ku64(w, "reserve", t->reserve);
    vs_jw_ku64_or_null(w, "limit", t->limit, VS_NO_LIMIT);
    vs_jw_ku64(w, "can_ever_hold", vs_plan_total(plan, t->name));
    vs_jw_key(w, "warn_at");
    if (t->warn_ppm) vs_jw_fixed(w, t->warn_ppm / 1e6, 6);
    else vs_jw_null(w);
    json_on_limit(w, t->wait_ms, t->spill_max != 0);
    vs_jw_ku64_or_null(w, "spill_max", t->spill_max, 0);
    json_exes(w, vs_config_tenant(cfg, t->name));
    vs_jw_end(w);
  }
  vs_jw_end(w);
  /* A tenant in no section: no reserve, no limit (or [tenant default]'s rules, listed above). */
  vs_jw_key(w, "no_section");
  vs_jw_object(w, VS_JSON_INLINE);
  vs_jw_ku64(w, "can_ever_hold", vs_plan_total(plan, ""));
  vs_jw_end(w);
  vs_jw_end(w);
}

static int print_json(const char *file, const vs_config *cfg, const char *errors, const vs_plan *plans, int nplans,
                      uint64_t unchecked) {
  vs_jw w;
  vs_jw_init(&w, 0);
  vs_jw_object(&w, VS_JSON_BLOCK);
  vs_jw_kstr(&w, "schema_version", CHECK_SCHEMA_VERSION);
  vs_jw_kstr(&w, "generator", "vramshim");
  vs_jw_kstr(&w, "file", file);
  vs_jw_kbool(&w, "valid", !errors[0]);
  vs_jw_key(&w, "generation");
  if (cfg) vs_jw_strf(&w, "%016" PRIx64, cfg->generation);
  else vs_jw_null(&w);
  vs_jw_key(&w, "errors");
  vs_jw_array(&w, VS_JSON_BLOCK);
  for (const char *line = errors; *line;) {
    const char *nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line) : strlen(line);
    char msg[VS_ERR_MAX];
    snprintf(msg, sizeof msg, "%.*s", (int)n, line);
    if (n) vs_jw_str(&w, msg);
    line += n + (nl != NULL);
  }
  vs_jw_end(&w);
  json_config(&w, cfg);
  vs_jw_key(&w, "plans");
  vs_jw_array(&w, VS_JSON_BLOCK);
  for (int i = 0; i < nplans; i++) json_plan(&w, cfg, &plans[i]);
  vs_jw_end(&w);
  vs_jw_key(&w, "unchecked_cards");   /* named in the config, no --card-capacity given */
  vs_jw_array(&w, VS_JSON_INLINE);
  for (int k = 0; k < 64; k++)
    if ((unchecked >> k) & 1) vs_jw_i64(&w, k);
  vs_jw_end(&w);
  vs_jw_end(&w);
  if (vs_jw_print(&w, stdout)) {
    fprintf(stderr, "vramshim: check: out of memory writing the JSON\n");
    return -1;
  }
  return 0;
}

int cmd_check(int argc, char **argv) {
  const char *file = NULL;
  uint64_t caps[MAX_CAPS];
  int ncaps = 0, json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--card-capacity") || !strncmp(argv[i], "--card-capacity=", 16)) {
      const char *v = argv[i][15] == '=' ? argv[i] + 16 : (i + 1 < argc ? argv[++i] : NULL);
      vs_size s;
      if (!v || vs_parse_size(v, &s) || s.is_pct || s.bytes == 0) {
        fprintf(stderr, "vramshim: --card-capacity needs a size such as 24GiB, not '%s'\n", v ? v : "");
        return 2;
      }
      if (ncaps == MAX_CAPS) {
        fprintf(stderr, "vramshim: at most %d cards\n", MAX_CAPS);
        return 2;
      }
      caps[ncaps++] = s.bytes;
    } else if (argv[i][0] == '-' || file) {
      fprintf(stderr, "vramshim: check: unexpected argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    } else {
      file = argv[i];
    }
  }
  if (!file) {
    usage(stderr);
    return 2;
  }
  vs_config *cfg = malloc(sizeof *cfg);
  vs_plan *plans = malloc(sizeof *plans * (size_t)(ncaps ? ncaps : 1));
  char err[VS_ERR_MAX * 16];
  err[0] = 0;
  int rc = 0, parsed = 0, nplans = 0;
  uint64_t unchecked = 0;
  if (!cfg || !plans) {
    fprintf(stderr, "vramshim: out of memory\n");
    free(cfg);
    free(plans);
    return 1;
  }
  if (vs_config_parse_file_all(file, cfg, err, sizeof err)) {
    /* Every error of the file at once, one per line. */
    char lines[sizeof err];
    snprintf(lines, sizeof lines, "%s", err);
    int n = 0;
    for (char *save = NULL, *line = strtok_r(lines, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++)
      fprintf(stderr, "vramshim: %s\n", line);
    if (n > 1) fprintf(stderr, "vramshim: %s: %d errors\n", file, n);
    rc = 1;
  } else if ((parsed = 1) && ncaps && vs_config_check_cards(cfg, caps, ncaps, err, sizeof err)) {
    fprintf(stderr, "vramshim: %s\n", err);   /* parsed: the JSON still lists the config as written */
    rc = 1;
  } else if (vs_check_actions(cfg)) { /* on_warn / on_refuse programs (issue 26) */
    rc = 1;
  } else {
    if (!json) printf("vramshim: %s is valid (config generation %016" PRIx64 ")\n", file, cfg->generation);
    warn_config(cfg, json ? stderr : stdout);
    if (!ncaps) {
      if (!json) {
        printf("vramshim: no --card-capacity given: percentages are not resolved and reservations are not checked\n"
               "vramshim: against a card; give each card's capacity (e.g. --card-capacity 24GiB) for the plan\n\n");
        print_unresolved(cfg);
      }
    } else {
      if (!json)
        printf("vramshim: capacities are taken from --card-capacity (this tool loads no driver); the shim checks\n"
               "vramshim: the plan again against each card's real capacity when a process starts\n");
      for (int i = 0; i < ncaps; i++) {
        if (vs_plan_build(cfg, i, NULL, caps[i], &plans[i], err, sizeof err)) {
          fprintf(stderr, "vramshim: %s\n", err);
          rc = 1;
          break;
        }
        nplans++;
        if (!json) print_plan(cfg, &plans[i]);
      }
      uint64_t named = 0;
      for (int k = 0; k < cfg->ncards; k++)
        if (cfg->cards[k].index >= 0) named |= 1ull << cfg->cards[k].index;
      for (int t = 0; t < cfg->ntenants; t++)
        if (cfg->tenants[t].cards_mask != UINT64_MAX) named |= cfg->tenants[t].cards_mask;
      for (int k = ncaps; k < 64; k++)
        if ((named >> k) & 1) {
          unchecked |= 1ull << k;
          if (!json) printf("\nvramshim: card %d is named in the config but has no --card-capacity: not checked\n", k);
        }
      for (int k = 0; k < cfg->ncards && !json; k++)
        if (cfg->cards[k].index < 0)
          printf("\nvramshim: [card %s] applies to the card with that UUID; its headroom was checked against "
                 "every capacity given\n", cfg->cards[k].uuid);
    }
  }
  if (json) {
    if (!rc) err[0] = 0;
    if (print_json(file, parsed ? cfg : NULL, err, plans, nplans, unchecked)) rc = 1;
  }
  free(cfg);
  free(plans);
  return rc;
}

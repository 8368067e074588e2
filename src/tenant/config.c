/* Config file parsing: inih splits keys and values; our reader feeds it one
 * line at a time, so we know each line's number, see section headers (inih
 * reports no line numbers and calls nothing for an empty section), and strip
 * leading blanks (an indented line is a key, not inih's continuation). */
#include "file.h"
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plat_types.h" /* VS_PRINTF */

#define MAX_CONFIG_BYTES (1u << 20)

enum sec_kind { SEC_NONE, SEC_GLOBAL, SEC_CARD, SEC_TENANT, SEC_BAD };
enum { GK_ARENA, GK_RELEASE, GK_LEDGER, GK_DUMPDIR, GK_DUMPSIG, GK_TIMELINE, GK_DECAY, GK_N };
enum { TK_RESERVE, TK_LIMIT, TK_WARN, TK_ONLIMIT, TK_CARDS, TK_EXE, TK_ONWARN, TK_ONREFUSE, TK_N };
static const char *const global_keys[GK_N] = {"arena", "release_threshold", "ledger_dir",
                                              "dump_dir", "dump_signal", "timeline_interval", "release_decay"};
static const char *const tenant_keys[TK_N] = {"reserve", "limit", "warn_at", "on_limit", "cards", "match_exe",
                                              "on_warn", "on_refuse"};
/* [card] keys: headroom, and the card-wide threshold actions (issue 26). */
enum { CK_HEADROOM, CK_ONWARN, CK_ONREFUSE, CK_N };
static const char *const card_keys[CK_N] = {"headroom", "on_warn", "on_refuse"};

struct parser {
  vs_config *cfg;
  char *err;
  size_t errlen;
  int err_line;              /* 0 = no error yet */
  int all;                   /* collect every error (one per line in err), not only the first */
  int nerrs;
  const char *pos, *end;     /* the text not yet read */
  int line;                  /* number of the line last handed to inih */
  enum sec_kind kind;
  int idx;                   /* card or tenant index of the current section */
  char sec_label[VS_NAME_MAX + 32]; /* "[tenant llm]" for messages: "[tenant " + a section argument + "]" */
  int global_line;
  int gkey_line[GK_N];
  int ckey_line[VS_CFG_MAX_CARDS][CK_N];
  int tkey_line[VS_CFG_MAX_TENANTS][TK_N];
};

static void fail(struct parser *ps, int line, const char *fmt, ...) VS_PRINTF(3, 4);
static void fail(struct parser *ps, int line, const char *fmt, ...) {
  if (ps->err_line && !ps->all) return; /* the first error is the one reported */
  if (!ps->err_line) ps->err_line = line ? line : -1;
  /* All errors: one per line, appended while they fit. */
  size_t at = ps->nerrs ? strlen(ps->err) : 0;
  if (ps->nerrs && at + 2 < ps->errlen) ps->err[at++] = '\n';
  ps->nerrs++;
  if (at + 1 >= ps->errlen) return;
  int n = snprintf(ps->err + at, ps->errlen - at, "%s:%d: ", ps->cfg->file, line);
  if (n < 0 || (size_t)n >= ps->errlen - at) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ps->err + at + n, ps->errlen - at - (size_t)n, fmt, ap);
  va_end(ap);
}

void vs_config_defaults(vs_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  snprintf(cfg->file, sizeof cfg->file, "<defaults>");
  cfg->arena = VS_CFG_ARENA_AUTO;
  cfg->release_threshold.bytes = 1ull << 30;
  snprintf(cfg->ledger_dir, sizeof cfg->ledger_dir, "%s", VS_DEFAULT_LEDGER_DIR);
  snprintf(cfg->dump_dir, sizeof cfg->dump_dir, "%s", VS_DEFAULT_DUMP_DIR);
  cfg->timeline_interval_ms = 10000;
  cfg->release_decay_ms = VS_CFG_RELEASE_DECAY_DEFAULT_MS;
}

int vs_tenant_name_ok(const char *s) {
  size_t n = strnlen(s, VS_NAME_MAX);
  if (n == 0 || n >= VS_NAME_MAX) return 0;
  for (const char *p = s; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.') return 0;
  return 1;
}

/* Copies a section argument already checked to fit dst (valid_uuid,
 * vs_tenant_name_ok): the checks bound it, which the compiler cannot see. */
static void copy_checked(char *dst, size_t n, const char *src) {
  size_t len = strnlen(src, n - 1);
  memcpy(dst, src, len);
  dst[len] = 0;
}

static int valid_uuid(const char *s) {
  if (strncmp(s, "GPU-", 4) || strlen(s) >= VS_NAME_MAX || !s[4]) return 0;
  for (const char *p = s + 4; *p; p++)
    if (!isxdigit((unsigned char)*p) && *p != '-') return 0;
  return 1;
}

/* A section header "[...]" at line ps->line (text starts at '['). */
static void section_header(struct parser *ps, const char *text) {
  vs_config *cfg = ps->cfg;
  ps->kind = SEC_BAD; /* keys under a broken header are not checked further */
  const char *close = strchr(text, ']');
  if (!close) {
    /* inih reports the syntax error at this line; collecting every error,
     * we report it (the reader then hands inih a blank line). */
    if (ps->all) fail(ps, ps->line, "syntax error: expected [section], key = value, or a comment");
    return;
  }
  const char *after = close + 1;
  while (*after == ' ' || *after == '\t') after++;
  if (*after && *after != ';' && *after != '#' && *after != '\n' && *after != '\r') {
    fail(ps, ps->line, "unexpected text after the section header");
    return;
  }
  char inner[VS_NAME_MAX + 16], word[16], arg[VS_NAME_MAX + 16], extra[8];
  size_t len = (size_t)(close - text - 1);
  if (len >= sizeof inner) {
    fail(ps, ps->line, "section name too long");
    return;
  }
  memcpy(inner, text + 1, len);
  inner[len] = 0;
  arg[0] = 0;
  int nw = sscanf(inner, "%15s %79s %7s", word, arg, extra);
  if (nw <= 0) {
    fail(ps, ps->line, "empty section name");
    return;
  }
  if (nw == 3) word[0] = 0; /* three words: no known section */
  if (!strcmp(word, "global") && nw == 1) {
    if (ps->global_line) {
      fail(ps, ps->line, "duplicate section [global] (first at line %d)", ps->global_line);
      return;
    }
    ps->global_line = ps->line;
    ps->kind = SEC_GLOBAL;
    snprintf(ps->sec_label, sizeof ps->sec_label, "[global]");
    return;
  }
  if (!strcmp(word, "card")) {
    if (nw == 1) {
      fail(ps, ps->line, "section [card] needs a card index or a GPU UUID, e.g. [card 0]");
      return;
    }
    int index = -1;
    char uuid[VS_NAME_MAX] = "";
    if (isdigit((unsigned char)arg[0])) {
      char *endp;
      long v = strtol(arg, &endp, 10);
      if (*endp || v < 0 || v >= VS_CFG_MAX_CARD_INDEX) {
        fail(ps, ps->line, "bad card index '%s': expected 0 to %d or a GPU UUID", arg, VS_CFG_MAX_CARD_INDEX - 1);
        return;
      }
      index = (int)v;
    } else if (valid_uuid(arg)) {
      copy_checked(uuid, sizeof uuid, arg);
    } else {
      fail(ps, ps->line, "bad card '%s': expected an index or a UUID like GPU-8c1f0e2a-...", arg);
      return;
    }
    for (int i = 0; i < cfg->ncards; i++)
      if ((index >= 0 && cfg->cards[i].index == index) || (index < 0 && !strcmp(cfg->cards[i].uuid, uuid))) {
        fail(ps, ps->line, "duplicate section [card %s] (first at line %d)", arg, cfg->cards[i].line);
        return;
      }
    if (cfg->ncards == VS_CFG_MAX_CARDS) {
      fail(ps, ps->line, "too many [card] sections (at most %d)", VS_CFG_MAX_CARDS);
      return;
    }
    vs_card_cfg *c = &cfg->cards[cfg->ncards];
    memset(c, 0, sizeof *c);
    c->index = index;
    snprintf(c->uuid, sizeof c->uuid, "%s", uuid);
    c->line = ps->line;
    ps->idx = cfg->ncards++;
    ps->kind = SEC_CARD;
    snprintf(ps->sec_label, sizeof ps->sec_label, "[card %s]", arg);
    return;
  }
  if (!strcmp(word, "tenant")) {
    if (nw == 1) {
      fail(ps, ps->line, "section [tenant] needs a name, e.g. [tenant llm]");
      return;
    }
    if (!vs_tenant_name_ok(arg)) {
      fail(ps, ps->line, "bad tenant name '%s': %s", arg, VS_TENANT_NAME_RULE);
      return;
    }
    const vs_tenant_cfg *dup = vs_config_tenant(cfg, arg);
    if (dup) {
      fail(ps, ps->line, "duplicate section [tenant %s] (first at line %d)", arg, dup->line);
      return;
    }
    if (cfg->ntenants == VS_CFG_MAX_TENANTS) {
      fail(ps, ps->line, "too many tenants (at most %d)", VS_CFG_MAX_TENANTS);
      return;
    }
    vs_tenant_cfg *t = &cfg->tenants[cfg->ntenants];
    memset(t, 0, sizeof *t);
    copy_checked(t->name, sizeof t->name, arg);
    t->line = ps->line;
    t->cards_mask = UINT64_MAX;
    ps->idx = cfg->ntenants++;
    ps->kind = SEC_TENANT;
    snprintf(ps->sec_label, sizeof ps->sec_label, "[tenant %s]", arg);
    return;
  }
  fail(ps, ps->line, "unknown section [%s] (known: [global], [card N], [card GPU-UUID], [tenant NAME])", inner);
}

/* inih's reader: the next line, blanks stripped at the start. */
static char *reader(char *str, int num, void *stream) {
  struct parser *ps = stream;
  if ((ps->err_line && !ps->all) || ps->pos >= ps->end) return NULL;
  int errs0 = ps->nerrs;
  const char *nl = memchr(ps->pos, '\n', (size_t)(ps->end - ps->pos));
  const char *eol = nl ? nl : ps->end;
  const char *s = ps->pos;
  ps->pos = nl ? nl + 1 : ps->end;
  ps->line++;
  if (ps->line == 1 && eol - s >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) s += 3; /* UTF-8 BOM */
  while (s < eol && (*s == ' ' || *s == '\t')) s++;
  size_t len = (size_t)(eol - s);
  if (len && s[len - 1] == '\r') len--;
  if (memchr(s, 0, len)) {
    fail(ps, ps->line, "NUL byte in the file");
    if (!ps->all) return NULL;
    len = 0;
  }
  if (len + 2 > (size_t)num) {
    fail(ps, ps->line, "line too long (at most %d characters)", num - 2);
    if (!ps->all) return NULL;
    len = 0;
  }
  memcpy(str, s, len);
  str[len] = '\n';
  str[len + 1] = 0;
  if (str[0] == '[') section_header(ps, str);
  else if (ps->all && str[0] != ';' && str[0] != '#' && str[0] != '\n' && !strpbrk(str, "=:"))
    fail(ps, ps->line, "syntax error: expected [section], key = value, or a comment");
  if (!ps->all) return ps->err_line ? NULL : str;
  /* Collecting: a line with an error of its own goes on as a blank line. */
  if (ps->nerrs != errs0 && str[0] == '[') ps->kind = SEC_BAD;
  if (ps->nerrs != errs0) memcpy(str, "\n", 2);
  return str;
}

static int key_index(const char *const *keys, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(keys[i], name)) return i;
  return -1;
}

/* Marks the key seen; 0 when it was seen before in this section. */
static int first_time(struct parser *ps, int *seen_line, const char *name) {
  if (*seen_line) {
    fail(ps, ps->line, "duplicate key '%s' in %s (first at line %d)", name, ps->sec_label, *seen_line);
    return 0;
  }
  *seen_line = ps->line;
  return 1;
}

static const char size_help[] = "expected a number with B, KiB, MiB, GiB, TiB, KB, MB, GB, or a percentage like 25%";
static const char duration_help[] = "expected a number with ms, s or min, e.g. 30s";
static const char size_big[] = "larger than the maximum of 1 EiB";
static const char duration_big[] = "longer than the maximum of 365 days";
/* Why vs_parse_size (vs_parse_duration_ms) refused a value: rc -2 is a
 * well-formed one out of range (units.h). */
static const char *size_why(int rc) { return rc == -2 ? size_big : size_help; }
static const char *duration_why(int rc) { return rc == -2 ? duration_big : duration_help; }

static void global_key(struct parser *ps, const char *name, const char *value) {
  vs_config *cfg = ps->cfg;
  int k = key_index(global_keys, GK_N, name);
  if (k < 0) {
    fail(ps, ps->line, "unknown key '%s' in [global]", name);
    return;
  }
  if (!first_time(ps, &ps->gkey_line[k], name)) return;
  switch (k) {
    case GK_ARENA:
      if (!strcmp(value, "vmm")) cfg->arena = VS_CFG_ARENA_VMM;
      else if (!strcmp(value, "chunks")) cfg->arena = VS_CFG_ARENA_CHUNKS;
      else if (!strcmp(value, "off")) cfg->arena = VS_CFG_ARENA_OFF;
      else fail(ps, ps->line, "bad value '%s' for 'arena': expected vmm, chunks or off", value);
      break;
    case GK_RELEASE: {
      int rc = vs_parse_size(value, &cfg->release_threshold);
      if (rc) fail(ps, ps->line, "bad size '%s' for 'release_threshold': %s", value, size_why(rc));
      cfg->has_release_threshold = 1;
      break;
    }
    case GK_LEDGER:
    case GK_DUMPDIR: {
      char *dst = k == GK_LEDGER ? cfg->ledger_dir : cfg->dump_dir;
      if (!vs_plat_path_absolute(value)) fail(ps, ps->line, "'%s' must be an absolute path, not '%s'", name, value);
      else if (strlen(value) >= VS_PATH_MAX - 32) fail(ps, ps->line, "'%s' is too long", name);
      else snprintf(dst, VS_PATH_MAX, "%s", value);
      if (k == GK_LEDGER) cfg->has_ledger_dir = 1;
      break;
    }
    case GK_DUMPSIG:
      if (!strcmp(value, "none")) cfg->dump_signal = 0;
      else if (!strcmp(value, "USR1") || !strcmp(value, "SIGUSR1")) cfg->dump_signal = SIGUSR1;
      else if (!strcmp(value, "USR2") || !strcmp(value, "SIGUSR2")) cfg->dump_signal = SIGUSR2;
      else fail(ps, ps->line, "bad value '%s' for 'dump_signal': expected none, USR1 or USR2", value);
      break;
    case GK_TIMELINE: {
      /* Checked for overflow (issue 23): 11971936903837499ms once wrapped
       * to 1,216 ns once made nanoseconds, and the sampler spun. */
      int rc = vs_parse_duration_ms(value, &cfg->timeline_interval_ms);
      if (rc || cfg->timeline_interval_ms == 0)
        fail(ps, ps->line, "bad duration '%s' for 'timeline_interval': %s", value,
             rc ? duration_why(rc) : duration_help);
      break;
    }
    case GK_DECAY:   /* 0: beyond release_threshold at once; a day at most (nanoseconds inside) */
      if (vs_parse_duration_ms(value, &cfg->release_decay_ms) || cfg->release_decay_ms > VS_CFG_RELEASE_DECAY_MAX_MS)
        fail(ps, ps->line, "bad duration '%s' for 'release_decay': %s, at most 1440min (a day)", value, duration_help);
      break;
  }
}

static void parse_cards(struct parser *ps, vs_tenant_cfg *t, const char *value) {
  uint64_t mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", value);
  char *save = NULL;
  t->ncards_uuid = 0;
  for (char *tok = strtok_r(buf, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
    if (!strncmp(tok, "GPU-", 4)) {   /* a card by UUID (issue 22) */
      if (!valid_uuid(tok)) {
        fail(ps, ps->line, "bad card '%s' in 'cards': expected an index or a UUID like GPU-8c1f0e2a-...", tok);
        return;
      }
      if (t->ncards_uuid == VS_CFG_MAX_CARD_UUIDS) {
        fail(ps, ps->line, "too many UUIDs in 'cards' (at most %d)", VS_CFG_MAX_CARD_UUIDS);
        return;
      }
      snprintf(t->cards_uuid[t->ncards_uuid++], VS_NAME_MAX, "%s", tok);
      continue;
    }
    char *endp;
    long v = strtol(tok, &endp, 10);
    if (!isdigit((unsigned char)tok[0]) || *endp || v < 0 || v >= VS_CFG_MAX_CARD_INDEX) {
      fail(ps, ps->line, "bad card index '%s' in 'cards': expected indexes 0 to %d or GPU UUIDs, comma-separated",
           tok, VS_CFG_MAX_CARD_INDEX - 1);
      return;
    }
    mask |= 1ull << v;
  }
  if (!mask && !t->ncards_uuid) {
    fail(ps, ps->line, "'cards' is empty: list card indexes or UUIDs, or remove the key for all cards");
    return;
  }
  t->cards_mask = mask;
}

int vs_tenant_on_card(const vs_tenant_cfg *t, int index, const char *uuid) {
  if (t->cards_mask == UINT64_MAX && !t->ncards_uuid) return 1;   /* not set: every card */
  if (index >= 0 && index < 64 && (t->cards_mask >> index & 1)) return 1;
  for (int i = 0; uuid && *uuid && i < t->ncards_uuid; i++)
    if (!strcasecmp(t->cards_uuid[i], uuid)) return 1;
  return 0;
}

static void parse_exes(struct parser *ps, vs_tenant_cfg *t, const char *value) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", value);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
    if (strchr(tok, '/') || strlen(tok) >= VS_NAME_MAX) {
      fail(ps, ps->line, "bad executable name '%s' in 'match_exe': a file name without '/'", tok);
      return;
    }
    for (int i = 0; i < ps->cfg->ntenants; i++) {
      const vs_tenant_cfg *o = &ps->cfg->tenants[i];
      for (int j = 0; j < o->nexes; j++)
        if (!strcmp(o->exes[j], tok)) {
          fail(ps, ps->line, "executable '%s' is already matched by tenant '%s'", tok, o->name);
          return;
        }
    }
    if (t->nexes == VS_CFG_MAX_EXES) {
      fail(ps, ps->line, "too many names in 'match_exe' (at most %d)", VS_CFG_MAX_EXES);
      return;
    }
    snprintf(t->exes[t->nexes++], VS_NAME_MAX, "%s", tok);
  }
  if (!t->nexes) fail(ps, ps->line, "'match_exe' is empty");
}

/* on_warn / on_refuse = run:PROGRAM (issue 26): an absolute path, no
 * arguments (a script takes them from its VRAMSHIM_* variables). Whether
 * the program exists and may be run is `vramshim check`'s and the
 * recorder's to say: the shim never runs it, and a config must load on a
 * machine where the program is not installed. */
static void parse_action(struct parser *ps, vs_actions *a, int refuse, const char *name, const char *value) {
  const char *prog = value + 4;
  if (strncmp(value, "run:", 4) || !vs_plat_path_absolute(prog) || strpbrk(prog, " \t")) {
    fail(ps, ps->line, "bad value '%s' for '%s': expected run:PROGRAM with an absolute path and no arguments, "
         "e.g. run:/usr/local/bin/llm-degrade", value, name);
    return;
  }
  if (strlen(prog) >= VS_PATH_MAX) {
    fail(ps, ps->line, "the program of '%s' is too long (at most %d bytes)", name, VS_PATH_MAX - 1);
    return;
  }
  snprintf(refuse ? a->on_refuse : a->on_warn, VS_PATH_MAX, "%s", prog);
  if (refuse) a->on_refuse_line = ps->line;
  else a->on_warn_line = ps->line;
}

static void tenant_key(struct parser *ps, const char *name, const char *value) {
  vs_tenant_cfg *t = &ps->cfg->tenants[ps->idx];
  int k = key_index(tenant_keys, TK_N, name);
  if (k < 0) {
    fail(ps, ps->line, "unknown key '%s' in %s", name, ps->sec_label);
    return;
  }
  if (!first_time(ps, &ps->tkey_line[ps->idx][k], name)) return;
  switch (k) {
    case TK_RESERVE:
    case TK_LIMIT: {
      vs_size *dst = k == TK_RESERVE ? &t->reserve : &t->limit;
      int rc = vs_parse_size(value, dst);
      if (rc) {
        fail(ps, ps->line, "bad size '%s' for '%s': %s", value, name, size_why(rc));
        return;
      }
      if (k == TK_RESERVE) t->reserve_line = ps->line;
      else t->has_limit = 1, t->limit_line = ps->line;
      break;
    }
    case TK_WARN:
      if (vs_parse_percent(value, &t->warn_ppm) || t->warn_ppm == 0)
        fail(ps, ps->line, "bad value '%s' for 'warn_at': expected a percentage of the limit above 0, e.g. 90%%",
             value);
      break;
    case TK_ONLIMIT: {
      t->wait_ms = 0;
      t->has_spill = 0;
      if (!strcmp(value, "fail")) break;
      if (!strncmp(value, "spill:", 6)) {
        /* MAX is a size as elsewhere (a percentage of the card's capacity);
         * spill:0 would be fail spelled differently: refused. */
        int rc = vs_parse_size(value + 6, &t->spill_max);
        if (rc || (t->spill_max.is_pct ? !t->spill_max.ppm : !t->spill_max.bytes))
          fail(ps, ps->line, "bad value '%s' for 'on_limit': spill:MAX needs a size above 0, e.g. spill:8GiB (%s)",
               value, size_why(rc));
        else t->has_spill = 1;
        break;
      }
      int rc = strncmp(value, "wait:", 5) ? -1 : vs_parse_duration_ms(value + 5, &t->wait_ms);
      if (rc == -1 || (rc == 0 && t->wait_ms == 0))
        fail(ps, ps->line,
             "bad value '%s' for 'on_limit': expected fail, wait:DURATION or spill:MAX, e.g. wait:30s or spill:8GiB",
             value);
      else if (rc || t->wait_ms > VS_CFG_MAX_WAIT_MS)
        /* Deadlines are nanoseconds in 64 bits: a wait past this would
         * wrap (and one day is already longer than any request should block). */
        fail(ps, ps->line, "bad value '%s' for 'on_limit': the wait is longer than the maximum of 24 h", value);
      break;
    }
    case TK_CARDS: parse_cards(ps, t, value); break;
    case TK_EXE: parse_exes(ps, t, value); break;
    case TK_ONWARN:
    case TK_ONREFUSE: parse_action(ps, &t->actions, k == TK_ONREFUSE, name, value); break;
  }
}

static int handler(void *user, const char *section, const char *name, const char *value) {
  struct parser *ps = user;
  (void)section; /* our reader tracks sections, with their lines */
  if (ps->err_line && !ps->all) return 0;
  switch (ps->kind) {
    case SEC_NONE: fail(ps, ps->line, "key '%s' outside any section", name); break;
    case SEC_BAD: break;
    case SEC_GLOBAL: global_key(ps, name, value); break;
    case SEC_CARD: {
      int k = key_index(card_keys, CK_N, name);
      vs_card_cfg *c = &ps->cfg->cards[ps->idx];
      if (k < 0) fail(ps, ps->line, "unknown key '%s' in %s", name, ps->sec_label);
      else if (!first_time(ps, &ps->ckey_line[ps->idx][k], name)) break;
      else if (k != CK_HEADROOM) parse_action(ps, &c->actions, k == CK_ONREFUSE, name, value);
      else {
        int rc = vs_parse_size(value, &c->headroom);
        if (rc) fail(ps, ps->line, "bad size '%s' for 'headroom': %s", value, size_why(rc));
        c->headroom_line = ps->line;
      }
      break;
    }
    case SEC_TENANT: tenant_key(ps, name, value); break;
  }
  return ps->err_line && !ps->all ? 0 : 1;
}

/* Checks needing no capacity: reserve above limit in the same unit. */
static void check_whole(struct parser *ps) {
  char a[32], b[32];
  for (int i = 0; i < ps->cfg->ntenants && (!ps->err_line || ps->all); i++) {
    const vs_tenant_cfg *t = &ps->cfg->tenants[i];
    if (!t->has_limit || t->reserve.is_pct != t->limit.is_pct) continue;
    int above = t->reserve.is_pct ? t->reserve.ppm > t->limit.ppm : t->reserve.bytes > t->limit.bytes;
    if (above)
      fail(ps, t->reserve_line, "reserve %s of tenant '%s' is above its limit %s (line %d)",
           vs_size_str(t->reserve, a, sizeof a), t->name, vs_size_str(t->limit, b, sizeof b), t->limit_line);
  }
}

uint64_t vs_config_hash(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return h;
}

static int parse_buffer(const char *text, size_t len, const char *name, vs_config *cfg, int all, char *err,
                        size_t errlen) {
  vs_config_defaults(cfg);
  snprintf(cfg->file, sizeof cfg->file, "%s", name ? name : "<string>");
  cfg->generation = vs_config_hash(text, len);
  struct parser *ps = calloc(1, sizeof *ps);
  if (!ps) {
    snprintf(err, errlen, "%s: out of memory", cfg->file);
    return -1;
  }
  ps->cfg = cfg;
  ps->all = all;
  ps->err = err;
  ps->errlen = errlen;
  ps->pos = text;
  ps->end = text + len;
  int r = ini_parse_stream(reader, ps, handler, ps);
  /* inih reports lines with a syntax error (no '=' or ':', no ']'); keep
   * whichever error comes first in the file. */
  if (all && r > 0 && !ps->err_line) {
    fail(ps, r, "syntax error: expected [section], key = value, or a comment");
  } else if (!all && r > 0 && (!ps->err_line || r < ps->err_line)) {
    ps->err_line = 0;
    ps->nerrs = 0;
    fail(ps, r, "syntax error: expected [section], key = value, or a comment");
  } else if (r < 0 && !ps->err_line) {
    fail(ps, 0, "cannot parse");
  }
  if (!ps->err_line || all) check_whole(ps);
  int bad = ps->err_line != 0;
  free(ps);
  return bad ? -1 : 0;
}

int vs_config_parse_string(const char *text, const char *name, vs_config *cfg, char *err, size_t errlen) {
  return parse_buffer(text, strlen(text), name, cfg, 0, err, errlen);
}

static int parse_file(const char *path, vs_config *cfg, int all, char *err, size_t errlen);
int vs_config_parse_file(const char *path, vs_config *cfg, char *err, size_t errlen) {
  return parse_file(path, cfg, 0, err, errlen);
}
int vs_config_parse_file_all(const char *path, vs_config *cfg, char *errs, size_t errlen) {
  return parse_file(path, cfg, 1, errs, errlen);
}

static int parse_file(const char *path, vs_config *cfg, int all, char *err, size_t errlen) {
  vs_config_defaults(cfg);
  /* Never blocks: a FIFO (or device) named as the config is refused
   * before anything is read (file_open.h). */
  int fd = vs_plat_open_regular(path, O_RDONLY, 0);
  int64_t size = fd < 0 ? -1 : vs_plat_file_size(fd);
  if (fd < 0 || size < 0 || size > MAX_CONFIG_BYTES) {
    int e = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    snprintf(err, errlen, "%s: cannot read the config file: %s", path,
             e ? vs_plat_open_strerror(e) : "larger than 1 MiB");
    return -1;
  }
  char *buf = malloc((size_t)size + 1);
  size_t got = 0;
  while (buf && got < (size_t)size) {
    ssize_t n = read(fd, buf + got, (size_t)size - got);
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (!buf) {
    snprintf(err, errlen, "%s: out of memory", path);
    return -1;
  }
  buf[got] = 0;
  int r = parse_buffer(buf, got, path, cfg, all, err, errlen);
  free(buf);
  return r;
}

const vs_tenant_cfg *vs_config_rules(const vs_config *cfg, const char *name) {
  const vs_tenant_cfg *t = vs_config_tenant(cfg, name);
  return t ? t : vs_config_tenant(cfg, VS_DEFAULT_TENANT);
}

const vs_tenant_cfg *vs_config_tenant(const vs_config *cfg, const char *name) {
  for (int i = 0; i < cfg->ntenants; i++)
    if (!strcmp(cfg->tenants[i].name, name)) return &cfg->tenants[i];
  return NULL;
}

const vs_card_cfg *vs_config_card(const vs_config *cfg, int index, const char *uuid) {
  if (uuid && *uuid)
    for (int i = 0; i < cfg->ncards; i++)
      if (!strcasecmp(cfg->cards[i].uuid, uuid)) return &cfg->cards[i];
  for (int i = 0; i < cfg->ncards; i++)
    if (cfg->cards[i].index >= 0 && cfg->cards[i].index == index) return &cfg->cards[i];
  return NULL;
}

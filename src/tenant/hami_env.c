/* HAMi-core's CUDA_DEVICE_MEMORY_LIMIT[_<i>] as an in-memory config (see hami_env.h). */
#include "hami_env.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "procenv.h"

int vs_hami_parse_size(const char *text, uint64_t *bytes) {
  if (!text || !isdigit((unsigned char)text[0])) return -1;
  uint64_t v = 0;
  const char *p = text;
  for (; isdigit((unsigned char)*p); p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  unsigned shift = 0;
  switch (*p) {
    case 0: break;
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    default: return -1;
  }
  if (*p) return -1;
  if (shift && v > (UINT64_MAX >> shift)) return -1;
  *bytes = v << shift;
  return 0;
}

static void append(vs_hami_limits *h, const char *name, const char *value) {
  size_t n = strlen(h->text);
  snprintf(h->text + n, sizeof h->text - n, "%s%s=%s", n ? ", " : "", name, value);
}

/* The card index in "CUDA_DEVICE_MEMORY_LIMIT_<i>" (name ends at '='), or -1
 * when the name is not one of HAMi's per-card variables; -2 when the index
 * is beyond what a config can name. */
static int card_of(const char *var, size_t name_len) {
  const size_t base = sizeof VS_HAMI_LIMIT - 1;
  if (name_len <= base + 1 || strncmp(var, VS_HAMI_LIMIT "_", base + 1)) return -1;
  long idx = 0;
  for (size_t i = base + 1; i < name_len; i++) {
    if (!isdigit((unsigned char)var[i])) return -1;
    if (idx < 1000000) idx = idx * 10 + (var[i] - '0');
  }
  return idx < VS_CFG_MAX_CARD_INDEX ? (int)idx : -2;
}

int vs_hami_read(char *const *envp, vs_hami_limits *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  const size_t base = sizeof VS_HAMI_LIMIT - 1;
  /* Slot 0: CUDA_DEVICE_MEMORY_LIMIT; slot 1 + i: card i. Read in that
   * order, whatever the order of the environment, so messages are stable. */
  const char *values[1 + VS_CFG_MAX_CARD_INDEX] = {0};
  int bad = 0;
  for (char *const *e = envp; e && *e; e++) {
    const char *var = *e;
    if (strncmp(var, VS_HAMI_LIMIT, base)) continue;
    const char *eq = strchr(var, '=');
    if (!eq) continue;
    size_t name_len = (size_t)(eq - var);
    int card = name_len == base ? -1 : card_of(var, name_len);
    if (name_len != base && card == -1) continue; /* e.g. CUDA_DEVICE_MEMORY_LIMIT_KEY: not HAMi's */
    if (!eq[1]) continue;                         /* HAMi-core: an empty value is not set */
    if (card == -2) {
      VS_WARN("%s ignored: vramshim names cards 0 to %d", var, VS_CFG_MAX_CARD_INDEX - 1);
      continue;
    }
    values[card + 1] = eq + 1;
  }
  for (int slot = 0; slot <= VS_CFG_MAX_CARD_INDEX; slot++) {
    const char *value = values[slot];
    if (!value) continue;
    char name[64];
    if (slot == 0) snprintf(name, sizeof name, "%s", VS_HAMI_LIMIT);
    else snprintf(name, sizeof name, "%s_%d", VS_HAMI_LIMIT, slot - 1);
    out->nvars++;
    append(out, name, value);
    uint64_t bytes;
    if (vs_hami_parse_size(value, &bytes)) {
      if (bad++) continue; /* the first is reported; the text names them all */
      snprintf(err, errlen,
               "%s=%s: bad size: expected bytes, or a number with k, m or g (binary, as HAMi-core reads it), "
               "e.g. 1g, 1024m, 1048576k",
               name, value);
      continue;
    }
    if (bytes == 0) VS_INFO("%s=0: no limit from it (as in HAMi-core)", name);
    if (slot == 0) out->all = bytes;
    else out->card[slot - 1] = bytes;
  }
  return bad ? -1 : 0;
}

int vs_hami_apply_env(char *const *envp, vs_config *cfg, int from_file, const char *tenant, char *err,
                      size_t errlen) {
  vs_hami_limits *h = &(vs_hami_limits){0};
  char rerr[VS_ERR_MAX];
  int r = vs_hami_read(envp, h, rerr, sizeof rerr);
  if (!h->nvars) return 0;
  if (from_file) {
    /* After a config error under passthrough cfg holds the defaults: name the file that failed. */
    const char *file = cfg->file, *env = vs_plat_getenv("VRAMSHIM_CONFIG");
    if (!strcmp(file, "<defaults>")) file = env && *env ? env : VS_DEFAULT_CONFIG;
    VS_WARN("%s ignored: the config file %s sets the limits (a config file wins over HAMi-core's variables)",
            h->text, file);
    return 0;
  }
  if (r) {
    snprintf(err, errlen, "%s", rerr);
    return -1;
  }
  vs_tenant_cfg *t = (vs_tenant_cfg *)vs_config_tenant(cfg, tenant);
  if (!t) {
    if (cfg->ntenants == VS_CFG_MAX_TENANTS) return 0; /* defaults have none: cannot happen */
    t = &cfg->tenants[cfg->ntenants++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", tenant);
    t->cards_mask = UINT64_MAX;
  }
  if (h->all) {
    t->limit.bytes = h->all;
    t->limit.is_pct = 0;
    t->has_limit = 1;
  }
  for (int i = 0; i < VS_CFG_MAX_CARD_INDEX; i++) t->card_limit[i] = h->card[i];
  snprintf(cfg->file, sizeof cfg->file, "HAMi-core's variables (%.200s)", h->text);
  /* Processes with the same variables and tenant run the same config. */
  char key[sizeof h->text + VS_NAME_MAX + 2];
  int n = snprintf(key, sizeof key, "%s|%s", tenant, h->text);
  size_t len = n < 0 ? 0 : (size_t)n < sizeof key ? (size_t)n : sizeof key - 1;
  cfg->generation = vs_config_hash(key, len);
  VS_INFO("tenant '%s': limits from HAMi-core's variables %s (no config file)", tenant, h->text);
  return 1;
}

/* libFuzzer target for the config parser and what runs on its output:
 * any bytes must give either a config whose invariants hold or one error
 * line naming the input; never a crash, a leak or an overflow. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  vs_config *cfg = malloc(sizeof *cfg);
  vs_plan *plan = malloc(sizeof *plan);
  if (!text || !cfg || !plan) abort();
  memcpy(text, data, size);
  text[size] = 0;
  char err[VS_ERR_MAX] = "";
  if (vs_config_parse_string(text, "<fuzz>", cfg, err, sizeof err) == 0) {
    if (cfg->ntenants < 0 || cfg->ntenants > VS_CFG_MAX_TENANTS || cfg->ncards > VS_CFG_MAX_CARDS) abort();
    for (int i = 0; i < cfg->ntenants; i++) {
      const vs_tenant_cfg *t = &cfg->tenants[i];
      if (!t->name[0] || memchr(t->name, 0, VS_NAME_MAX) == NULL) abort();
      if (t->has_limit && !t->reserve.is_pct && !t->limit.is_pct && t->reserve.bytes > t->limit.bytes) abort();
    }
    static const uint64_t caps[] = {3ull << 30, 24ull << 30, 80ull << 30, 1};
    for (int k = 0; k < 4; k++) {
      if (vs_plan_build(cfg, k, NULL, caps[k], plan, err, sizeof err) == 0) {
        if (vs_plan_reserved(plan) > plan->capacity) abort();
        for (int i = 0; i < plan->ntenants; i++) {
          const vs_plan_tenant *t = &plan->tenants[i];
          if (t->reserve > t->limit) abort();
          if (vs_plan_total(plan, t->name) > plan->capacity) abort();
        }
      } else if (strncmp(err, "<fuzz>:", 7)) {
        abort();
      }
    }
    vs_config_check_cards(cfg, caps, 4, err, sizeof err);
    char name[VS_NAME_MAX];
    vs_config_select_tenant(cfg, NULL, text, name);
  } else if (strncmp(err, "<fuzz>:", 7) || !memchr(err, 0, sizeof err)) {
    abort();
  }
  free(plan);
  free(cfg);
  free(text);
  return 0;
}

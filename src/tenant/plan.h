/* The plan of one card: the config resolved against that card's capacity.
 * It is what the ledger enforces for a process; a process keeps the plan it
 * started with even when the file changes (generation tells them apart). */
#ifndef VS_TENANT_PLAN_H
#define VS_TENANT_PLAN_H
#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct vs_plan_tenant {
  char name[VS_NAME_MAX];
  uint64_t reserve;            /* bytes guaranteed on this card */
  uint64_t limit;              /* bytes at most; VS_NO_LIMIT when none */
  uint32_t warn_ppm;           /* warn when usage crosses this share of the limit; 0 = never */
  uint64_t wait_ms;            /* on_limit: 0 = fail, else wait that long */
  uint64_t spill_max;          /* on_limit = spill:MAX resolved on this card; 0 = no spilling (issue 13) */
} vs_plan_tenant;

typedef struct vs_plan {
  int card;                    /* physical index (-1 unknown): the same for every process on the card */
  uint64_t capacity;           /* C */
  uint64_t headroom;           /* H */
  uint64_t generation;         /* of the config it came from */
  int ntenants;
  vs_plan_tenant tenants[VS_CFG_MAX_TENANTS];
} vs_plan;

/* Resolves cfg for a card (index, UUID or NULL, capacity). Tenants whose
 * `cards` leave this card out get no reserve and no limit on it. Fails with
 * "FILE:LINE: reason" when the card is overcommitted or a reserve exceeds
 * its limit once percentages are resolved. */
int vs_plan_build(const vs_config *cfg, int card, const char *uuid, uint64_t capacity, vs_plan *out, char *err,
                  size_t errlen);
/* The same for a card the shim uses (issue 22): index is its physical index
 * ([card N], `cards = N`; -1 when this process cannot tell: then only UUID
 * rules match it), ordinal what this process calls it (HAMi-core's
 * CUDA_DEVICE_MEMORY_LIMIT_<i>, which is per visible device). */
int vs_plan_build_card(const vs_config *cfg, int index, int ordinal, const char *uuid, uint64_t capacity,
                       vs_plan *out, char *err, size_t errlen);

/* The tenant's entry, or NULL when the plan has none (no section). */
const vs_plan_tenant *vs_plan_find(const vs_plan *plan, const char *name);
/* The rules a tenant follows: its own section's, else [tenant default]'s
 * (a tenant without a section, BRIEF), else NULL (no limit). The reserve
 * is never inherited: a reservation belongs to the tenant named. */
const vs_plan_tenant *vs_plan_rules(const vs_plan *plan, const char *name);

/* What the tenant could ever hold on the card, others' reservations kept:
 * min(L_a, C - H - sum over t != a of R_t). */
uint64_t vs_plan_total(const vs_plan *plan, const char *tenant);

/* Sum of reservations and headroom, and what is left unreserved. */
uint64_t vs_plan_reserved(const vs_plan *plan);
#endif

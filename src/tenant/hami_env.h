/* HAMi-core's environment contract, so that vramshim can run under HAMi's
 * Kubernetes scheduler and device plugin in place of HAMi-core (see
 * docs/hami.md for the table of its variables, honoured or not, and why).
 *
 * HAMi's device plugin hands each container its memory limit through
 *   CUDA_DEVICE_MEMORY_LIMIT      the limit on every card the process sees
 *   CUDA_DEVICE_MEMORY_LIMIT_<i>  the limit on card i (wins over the first)
 * as HAMi-core reads them: decimal digits with an optional k, m or g
 * suffix, either case, binary (1g = 1024m = 1048576k = 1073741824), and 0
 * meaning "not set" (card i then falls back to the first; the first at 0
 * means no limit).
 *
 * With no config file these become the in-memory config of the process: its
 * tenant gets that limit on each card, so the cuMemGetInfo view (total = the
 * limit, at most the card) follows. With a config file the file wins and one
 * warning line names the variables it ignores. */
#ifndef VS_TENANT_HAMI_ENV_H
#define VS_TENANT_HAMI_ENV_H
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define VS_HAMI_LIMIT "CUDA_DEVICE_MEMORY_LIMIT"

/* HAMi's size syntax (above). 0 on success, -1 on anything else: a sign,
 * blanks, a decimal point, another unit, an overflow. Stricter than
 * HAMi-core, which reads "1gb" as 1 byte: such a value is an error here. */
int vs_hami_parse_size(const char *text, uint64_t *bytes);

/* The limits HAMi's variables in envp (a NULL-terminated environ) give. */
typedef struct vs_hami_limits {
  uint64_t all;                          /* CUDA_DEVICE_MEMORY_LIMIT; 0 = not set */
  uint64_t card[VS_CFG_MAX_CARD_INDEX];  /* CUDA_DEVICE_MEMORY_LIMIT_<i>; 0 = not set */
  int nvars;                             /* how many of the variables are set, non-empty */
  char text[512];                        /* "CUDA_DEVICE_MEMORY_LIMIT=1g, ..." for messages */
} vs_hami_limits;

/* 0 on success; -1 with "vramshim-style NAME=VALUE: reason" in err on a
 * malformed value. Per-card variables for an index above the last card a
 * config can name (VS_CFG_MAX_CARD_INDEX - 1) are ignored with a warning. */
int vs_hami_read(char *const *envp, vs_hami_limits *out, char *err, size_t errlen);

/* What the variables do to this process's config (cfg as loaded, from_file
 * 1 when a config file was read or failed to read, tenant the process's):
 *   no variable set           0, nothing changes
 *   a config file             0, nothing changes; one warning names the
 *                             ignored variables and the file
 *   otherwise                 1, cfg gets a [tenant <tenant>] with those
 *                             limits (one info line says so)
 *   a malformed value         -1, err says which (only without a file: a
 *                             file makes the variables irrelevant) */
int vs_hami_apply_env(char *const *envp, vs_config *cfg, int from_file, const char *tenant, char *err,
                      size_t errlen);
#endif

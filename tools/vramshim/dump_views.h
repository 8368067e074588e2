/* `vramshim dump`: where fresh dumps of live processes come from. */
#ifndef VS_DUMP_VIEWS_H
#define VS_DUMP_VIEWS_H

#include <stddef.h>

#include "dump_model.h"

/* Which live processes to ask (exactly one of the three). */
typedef struct dump_target {
  long pid;             /* > 0: this process */
  const char *tenant;   /* non-NULL: every process of this tenant */
  int all;              /* every process under the shim */
  double timeout_s;     /* how long to wait for the answers (> 0) */
  const char *ledger_dir; /* NULL: the config's ($VRAMSHIM_CONFIG), else the default */
} dump_target;

/* Asks the matching live processes for fresh dumps (dump_request.c). On
 * success *dumps holds *n dumps (each freed with vs_dump_free, the array
 * with free). -1 with the reason in err. */
int dump_request_live(const dump_target *t, vs_dump **dumps, size_t *n, char *err, size_t errlen);

#endif

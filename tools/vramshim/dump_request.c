/* Fresh dumps from live processes, through the tenant ledger: a request is
 * posted in the ledger and answered by the shim's background thread, which
 * writes the dump to dump_dir and posts its path back.
 *
 * The ledger request path is not in this build yet. This file is the one
 * place to wire it: fill dump_request_live() and nothing else changes. */
#include <stdio.h>

#include "dump_views.h"

int dump_request_live(const dump_target *t, vs_dump **dumps, size_t *n, char *err, size_t errlen) {
  (void)dumps;
  *n = 0;
  const char *what = t->pid > 0 ? "--pid" : t->tenant ? "--tenant" : "--all";
  snprintf(err, errlen,
           "%s is not available: this build has no ledger request path for live dumps; "
           "read a dump file instead (see dump_dir, and automatic dumps on refused allocations)",
           what);
  return -1;
}

/* Inside the observation concern: building a dump of this process
 * (observe_dump.c) from the cards' state and their arenas. */
#ifndef VS_OBSERVE_DUMP_H
#define VS_OBSERVE_DUMP_H

#include "dump_model.h"

/* A dump of every used card of this process. 0 or -1 (out of memory). The
 * tenant figures come from tenant_of(card) when it returns 1. */
typedef int (*vs_obs_tenant_fn)(int card, vs_dump_tenant_use *out);
int vs_obs_build_dump(vs_dump *d, const char *reason, vs_obs_tenant_fn tenant_of);

#endif

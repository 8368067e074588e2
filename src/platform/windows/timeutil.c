#include "timeutil.h"

struct tm *vs_plat_gmtime(time_t t, struct tm *out) { return gmtime_s(out, &t) == 0 ? out : NULL; }

struct tm *vs_plat_localtime(time_t t, struct tm *out) { return localtime_s(out, &t) == 0 ? out : NULL; }

int vs_plat_tsc_invariant(void) { return 0; }

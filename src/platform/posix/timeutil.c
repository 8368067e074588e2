#include "timeutil.h"

#include <stdio.h>
#include <string.h>

struct tm *vs_plat_gmtime(time_t t, struct tm *out) { return gmtime_r(&t, out); }

struct tm *vs_plat_localtime(time_t t, struct tm *out) { return localtime_r(&t, out); }

int vs_plat_tsc_invariant(void) {
#if defined(__x86_64__)
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f) return 0;
  char line[4096];
  int constant = 0, nonstop = 0;
  while (fgets(line, sizeof line, f) && !(constant && nonstop)) {
    if (strncmp(line, "flags", 5)) continue;
    constant = strstr(line, " constant_tsc") != NULL;
    nonstop = strstr(line, " nonstop_tsc") != NULL;
    break;
  }
  fclose(f);
  return constant && nonstop;
#else
  return 0;
#endif
}

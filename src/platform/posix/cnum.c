#include "cnum.h"

#include <locale.h>
#include <pthread.h>
#include <stdlib.h>

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

double vs_plat_strtod_c(const char *s, char **end, int *ok) {
  pthread_once(&c_locale_once, make_c_locale);
  *ok = c_locale != 0;
  if (!c_locale) return 0;
  return strtod_l(s, end, c_locale);
}

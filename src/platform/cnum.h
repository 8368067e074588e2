/* Numbers in the C locale whatever locale the program under the shim set
 * (a dump's "0.5" must never read as 0 under a locale with decimal
 * commas). POSIX: strtod_l with a newlocale("C"); Windows: _strtod_l with
 * _create_locale(LC_ALL, "C"). */
#ifndef VS_PLAT_CNUM_H
#define VS_PLAT_CNUM_H

/* strtod in the C locale; errno as strtod's. Returns 0 with *ok = 0 when no
 * C locale can be made (then nothing was parsed). */
double vs_plat_strtod_c(const char *s, char **end, int *ok);
#endif

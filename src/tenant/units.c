#include "units.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "log.h"

/* Parses "123", "1.5": integer part and up to 9 decimals as a fraction in
 * billionths, so "1.5GiB" is exact without floating point. Returns the
 * position after the number, or NULL when there is no digit. */
/* *big is set when the integer part does not fit 64 bits (well-formed but
 * out of range: the caller says -2). */
static const char *parse_number(const char *p, uint64_t *ip, uint64_t *frac_e9, int *big) {
  uint64_t v = 0;
  int digits = 0;
  *big = 0;
  while (isdigit((unsigned char)*p)) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) *big = 1;
    else v = v * 10 + d;
    p++;
    digits++;
  }
  uint64_t f = 0, scale = 100000000;
  if (*p == '.') {
    p++;
    int fd = 0;
    while (isdigit((unsigned char)*p)) {
      if (scale) f += (uint64_t)(*p - '0') * scale;
      scale /= 10;
      p++;
      fd++;
    }
    if (!fd) return NULL;
  }
  if (!digits) return NULL;
  *ip = v;
  *frac_e9 = f;
  return p;
}

static const char *skip_space(const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

/* v * mult + frac_e9 * mult / 1e9, or -2 above max. */
static int scale_exact(uint64_t v, uint64_t frac_e9, uint64_t mult, uint64_t max, uint64_t *out) {
  vs_u128 r = (vs_u128)v * mult + (vs_u128)frac_e9 * mult / 1000000000u;
  if (r > max) return -2;
  *out = (uint64_t)r;
  return 0;
}

int vs_parse_size(const char *text, vs_size *out) {
  static const struct { const char *unit; uint64_t mult; } units[] = {
      {"B", 1ull},          {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
      {"TiB", 1ull << 40},  {"KB", 1000ull},     {"MB", 1000000ull},  {"GB", 1000000000ull},
      {"TB", 1000000000000ull},
  };
  if (!text) return -1;
  uint64_t v, f;
  int big;
  const char *p = parse_number(skip_space(text), &v, &f, &big);
  if (!p) return -1;
  p = skip_space(p);
  if (*p == '%') {
    if (*skip_space(p + 1)) return -1;
    if (big || v > 100 || (v == 100 && f)) return -1;
    out->is_pct = 1;
    out->ppm = (uint32_t)(v * 10000 + f / 100000);
    out->bytes = 0;
    return 0;
  }
  uint64_t mult = 0;
  size_t ulen = 0;
  while (isalpha((unsigned char)p[ulen])) ulen++;
  if (ulen == 0) {
    if (f) return -1; /* fractional bytes */
    mult = 1;
  } else {
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (strlen(units[i].unit) == ulen && !strncmp(p, units[i].unit, ulen)) mult = units[i].mult;
    if (!mult) return -1;
  }
  if (*skip_space(p + ulen)) return -1;
  uint64_t bytes;
  if (big || scale_exact(v, f, mult, VS_SIZE_MAX, &bytes)) return -2;
  out->is_pct = 0;
  out->ppm = 0;
  out->bytes = bytes;
  return 0;
}

int vs_parse_duration_ms(const char *text, uint64_t *ms) {
  if (!text) return -1;
  uint64_t v, f;
  int big;
  const char *p = parse_number(skip_space(text), &v, &f, &big);
  if (!p) return -1;
  p = skip_space(p);
  uint64_t mult;
  size_t ulen;
  if (!strncmp(p, "ms", 2)) mult = 1, ulen = 2;
  else if (!strncmp(p, "min", 3)) mult = 60000, ulen = 3;
  else if (!strncmp(p, "s", 1)) mult = 1000, ulen = 1;
  else return -1;
  if (*skip_space(p + ulen)) return -1;
  return big ? -2 : scale_exact(v, f, mult, VS_DURATION_MAX_MS, ms);
}

int vs_parse_percent(const char *text, uint32_t *ppm) {
  vs_size s;
  if (vs_parse_size(text, &s) || !s.is_pct) return -1;
  *ppm = s.ppm;
  return 0;
}

uint64_t vs_size_resolve(vs_size s, uint64_t capacity) {
  if (!s.is_pct) return s.bytes;
  return (uint64_t)((vs_u128)capacity * s.ppm / VS_PPM_100);
}

const char *vs_size_str(vs_size s, char *buf, unsigned len) {
  if (s.is_pct) {
    if (s.ppm % 10000 == 0) snprintf(buf, len, "%u%%", s.ppm / 10000);
    else snprintf(buf, len, "%.4g%%", s.ppm / 10000.0);
    return buf;
  }
  return vs_fmt_bytes(s.bytes, buf, len);
}

const char *vs_bytes_or_none(uint64_t bytes, char *buf, unsigned len) {
  if (bytes != VS_NO_LIMIT) return vs_fmt_bytes(bytes, buf, len);
  snprintf(buf, len, "none");
  return buf;
}

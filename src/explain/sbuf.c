/* Growable text buffer; see sbuf.h. */
#include "sbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(vs_sbuf *b, size_t n) {
  if (b->failed) return -1;
  if (b->len + n + 1 <= b->cap) return 0;
  size_t nc = b->cap ? b->cap : 4096;
  while (nc < b->len + n + 1) {
    if (nc > SIZE_MAX / 2) { b->failed = 1; return -1; }
    nc *= 2;
  }
  char *q = realloc(b->p, nc);
  if (!q) { b->failed = 1; return -1; }
  b->p = q;
  b->cap = nc;
  return 0;
}

void vs_sb_put(vs_sbuf *b, const char *s, size_t n) {
  if (reserve(b, n)) return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

void vs_sb_puts(vs_sbuf *b, const char *s) { vs_sb_put(b, s, strlen(s)); }

void vs_sb_printf(vs_sbuf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) { vs_sb_put(b, tmp, (size_t)n); return; }
  if (reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void vs_sb_u64(vs_sbuf *b, uint64_t v) {
  char t[24];
  int i = sizeof t;
  do { t[--i] = (char)('0' + v % 10); v /= 10; } while (v);
  vs_sb_put(b, t + i, sizeof t - (size_t)i);
}

void vs_sb_i64(vs_sbuf *b, int64_t v) {
  if (v < 0) {
    vs_sb_put(b, "-", 1);
    vs_sb_u64(b, 0 - (uint64_t)v);
  } else {
    vs_sb_u64(b, (uint64_t)v);
  }
}

void vs_sb_hex(vs_sbuf *b, uint64_t v) {
  char t[20];
  int i = sizeof t;
  do { t[--i] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
  t[--i] = 'x';
  t[--i] = '0';
  vs_sb_put(b, t + i, sizeof t - (size_t)i);
}

void vs_sb_fixed(vs_sbuf *b, double v, int decimals) {
  if (!isfinite(v) || fabs(v) >= 1e15) v = 0;
  if (v < 0) { vs_sb_put(b, "-", 1); v = -v; }
  uint64_t scale = 1;
  for (int i = 0; i < decimals; i++) scale *= 10;
  uint64_t q = (uint64_t)llround(v * (double)scale);
  vs_sb_u64(b, q / scale);
  if (decimals <= 0) return;
  char t[24];
  uint64_t f = q % scale;
  for (int i = decimals - 1; i >= 0; i--) { t[i] = (char)('0' + f % 10); f /= 10; }
  vs_sb_put(b, ".", 1);
  vs_sb_put(b, t, (size_t)decimals);
}

/* Length of a valid UTF-8 sequence at s (max n bytes), 0 when invalid. */
size_t vs_utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned min;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) { len = 2; min = 0x80; c &= 0x1F; }
  else if ((c & 0xF0) == 0xE0) { len = 3; min = 0x800; c &= 0x0F; }
  else if ((c & 0xF8) == 0xF0) { len = 4; min = 0x10000; c &= 0x07; }
  else return 0;
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    c = (c << 6) | (s[i] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  return len;
}

void vs_sb_json_str(vs_sbuf *b, const char *s) {
  vs_sb_put(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      char e[2] = {'\\', (char)*c};
      vs_sb_put(b, e, 2);
    } else if (*c < 0x20 || *c == 0x7f) {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", *c);
      vs_sb_put(b, e, 6);
    } else if (*c >= 0x80) {
      /* Pass valid UTF-8 through; replace any other byte (an exe path can
       * hold anything) so the output stays valid JSON. */
      size_t n = vs_utf8_len(c, strnlen((const char *)c, 4));
      if (n) {
        vs_sb_put(b, (const char *)c, n);
        c += n - 1;
      } else {
        vs_sb_puts(b, "\\ufffd");
      }
    } else {
      vs_sb_put(b, (const char *)c, 1);
    }
  }
  vs_sb_put(b, "\"", 1);
}

void vs_sb_xml_str(vs_sbuf *b, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '&': vs_sb_puts(b, "&amp;"); break;
      case '<': vs_sb_puts(b, "&lt;"); break;
      case '>': vs_sb_puts(b, "&gt;"); break;
      case '"': vs_sb_puts(b, "&quot;"); break;
      default:
        if ((unsigned char)*s >= 0x20 || *s == '\t') vs_sb_put(b, s, 1);
    }
  }
}

char *vs_sb_take(vs_sbuf *b, size_t *len) {
  if (reserve(b, 0)) { vs_sb_free(b); return NULL; }
  char *p = b->p;
  if (len) *len = b->len;
  b->p = NULL;
  b->len = b->cap = 0;
  return p;
}

void vs_sb_free(vs_sbuf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

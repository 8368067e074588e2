/* Strict recursive-descent JSON parser; see json.h. */
#include "json.h"

#include "cnum.h"
#include "sbuf.h"

#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plat_types.h" /* VS_PRINTF */

typedef struct parser {
  const char *s;
  size_t len, pos;
  unsigned line, col;
  char *err;
  size_t errlen;
  int failed;
} parser;

static int perr(parser *p, const char *fmt, ...) VS_PRINTF(2, 3);
static int perr(parser *p, const char *fmt, ...) {
  if (p->failed) return -1;
  p->failed = 1;
  if (p->err && p->errlen) {
    int n = snprintf(p->err, p->errlen, "line %u, column %u: ", p->line, p->col);
    if (n >= 0 && (size_t)n < p->errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return -1;
}

static int at_end(const parser *p) { return p->pos >= p->len; }
static int peek(const parser *p) { return at_end(p) ? -1 : (unsigned char)p->s[p->pos]; }

static void advance(parser *p) {
  if (p->s[p->pos] == '\n') {
    p->line++;
    p->col = 1;
  } else {
    p->col++;
  }
  p->pos++;
}

static void skip_ws(parser *p) {
  while (!at_end(p)) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    advance(p);
  }
}

static const char *describe(parser *p, char *buf, size_t n) {
  int c = peek(p);
  if (c < 0) return "the end of the input (truncated?)";
  if (c >= 0x20 && c < 0x7f) snprintf(buf, n, "'%c'", c);
  else snprintf(buf, n, "byte 0x%02x", c);
  return buf;
}

static int expect_lit(parser *p, const char *lit) {
  size_t n = strlen(lit);
  for (size_t i = 0; i < n; i++) {
    if (at_end(p)) return perr(p, "truncated literal, expected '%s'", lit);
    if (p->s[p->pos] != lit[i]) return perr(p, "invalid literal, expected '%s'", lit);
    advance(p);
  }
  return 0;
}

/* Appends one code point as UTF-8. */
static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static int hex4(parser *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int c = peek(p);
    if (c < 0) return perr(p, "truncated \\u escape");
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return perr(p, "bad hex digit in \\u escape");
    advance(p);
  }
  *out = v;
  return 0;
}

static int parse_string(parser *p, char **out, size_t *outlen) {
  advance(p); /* opening quote */
  /* Decoded text is never longer than the source span. */
  size_t start = p->pos, end = start;
  while (end < p->len && p->s[end] != '"') end += (p->s[end] == '\\') ? 2 : 1;
  size_t cap = (end < p->len ? end : p->len) - start + 1;
  char *buf = malloc(cap + 4);
  if (!buf) return perr(p, "out of memory");
  size_t o = 0;
  for (;;) {
    int c = peek(p);
    if (c < 0) { free(buf); return perr(p, "unterminated string (truncated?)"); }
    if (c == '"') { advance(p); break; }
    if (c < 0x20) { free(buf); return perr(p, "control character 0x%02x in string", c); }
    if (c == '\\') {
      advance(p);
      int e = peek(p);
      if (e < 0) { free(buf); return perr(p, "truncated escape"); }
      advance(p);
      switch (e) {
        case '"': buf[o++] = '"'; break;
        case '\\': buf[o++] = '\\'; break;
        case '/': buf[o++] = '/'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        case 'u': {
          unsigned cp;
          if (hex4(p, &cp)) { free(buf); return -1; }
          if (cp >= 0xDC00 && cp <= 0xDFFF) { free(buf); return perr(p, "lone low surrogate in \\u escape"); }
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (peek(p) != '\\') { free(buf); return perr(p, "high surrogate without its low half"); }
            advance(p);
            if (peek(p) != 'u') { free(buf); return perr(p, "high surrogate without its low half"); }
            advance(p);
            if (hex4(p, &lo)) { free(buf); return -1; }
            if (lo < 0xDC00 || lo > 0xDFFF) { free(buf); return perr(p, "bad low surrogate"); }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          if (cp == 0) { free(buf); return perr(p, "NUL character in string"); }
          o += put_utf8(buf + o, cp);
          break;
        }
        default: free(buf); return perr(p, "invalid escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
      }
    } else {
      size_t n = vs_utf8_len((const unsigned char *)p->s + p->pos, p->len - p->pos);
      if (!n) { free(buf); return perr(p, "invalid UTF-8 in string"); }
      for (size_t i = 0; i < n; i++) { buf[o++] = p->s[p->pos]; advance(p); }
    }
  }
  buf[o] = 0;
  *out = buf;
  *outlen = o;
  return 0;
}

static int parse_number(parser *p, vs_json *v) {
  size_t start = p->pos;
  if (peek(p) == '-') advance(p);
  int c = peek(p);
  if (c == '0') {
    advance(p);
  } else if (c >= '1' && c <= '9') {
    while (peek(p) >= '0' && peek(p) <= '9') advance(p);
  } else {
    return perr(p, "invalid number");
  }
  if (peek(p) == '.') {
    advance(p);
    if (!(peek(p) >= '0' && peek(p) <= '9')) return perr(p, "invalid number: digits expected after '.'");
    while (peek(p) >= '0' && peek(p) <= '9') advance(p);
  }
  if (peek(p) == 'e' || peek(p) == 'E') {
    advance(p);
    if (peek(p) == '+' || peek(p) == '-') advance(p);
    if (!(peek(p) >= '0' && peek(p) <= '9')) return perr(p, "invalid number: digits expected in exponent");
    while (peek(p) >= '0' && peek(p) <= '9') advance(p);
  }
  size_t n = p->pos - start;
  if (n > 64) return perr(p, "number too long (%zu characters)", n);
  v->type = VS_JSON_NUMBER;
  v->str = malloc(n + 1);
  if (!v->str) return perr(p, "out of memory");
  memcpy(v->str, p->s + start, n);
  v->str[n] = 0;
  v->len = n;
  return 0;
}

static int parse_value(parser *p, vs_json *v, int depth);

static int push(parser *p, vs_json **items, size_t *n, size_t *cap, char ***keys) {
  if (*n < *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 4;
  vs_json *ni = realloc(*items, nc * sizeof **items);
  if (!ni) return perr(p, "out of memory");
  *items = ni;
  if (keys) {
    char **nk = realloc(*keys, nc * sizeof **keys);
    if (!nk) return perr(p, "out of memory");
    *keys = nk;
  }
  *cap = nc;
  return 0;
}

static int parse_array(parser *p, vs_json *v, int depth) {
  v->type = VS_JSON_ARRAY;
  advance(p);
  size_t cap = 0;
  skip_ws(p);
  if (peek(p) == ']') { advance(p); return 0; }
  for (;;) {
    if (push(p, &v->items, &v->n, &cap, NULL)) return -1;
    memset(&v->items[v->n], 0, sizeof *v->items);
    v->n++;
    if (parse_value(p, &v->items[v->n - 1], depth + 1)) return -1;
    skip_ws(p);
    char b[16];
    if (peek(p) == ',') { advance(p); continue; }
    if (peek(p) == ']') { advance(p); return 0; }
    return perr(p, "expected ',' or ']' in array, found %s", describe(p, b, sizeof b));
  }
}

static int parse_object(parser *p, vs_json *v, int depth) {
  v->type = VS_JSON_OBJECT;
  advance(p);
  size_t cap = 0;
  char b[16];
  skip_ws(p);
  if (peek(p) == '}') { advance(p); return 0; }
  for (;;) {
    skip_ws(p);
    if (peek(p) != '"') return perr(p, "expected a key string in object, found %s", describe(p, b, sizeof b));
    if (push(p, &v->items, &v->n, &cap, &v->keys)) return -1;
    char *key;
    size_t klen;
    unsigned kl = p->line, kc = p->col;
    if (parse_string(p, &key, &klen)) return -1;
    for (size_t i = 0; i < v->n; i++)
      if (!strcmp(v->keys[i], key)) {
        p->line = kl;
        p->col = kc;
        perr(p, "duplicate key \"%s\"", key);
        free(key);
        return -1;
      }
    v->keys[v->n] = key;
    memset(&v->items[v->n], 0, sizeof *v->items);
    v->n++;
    skip_ws(p);
    if (peek(p) != ':') return perr(p, "expected ':' after key \"%s\", found %s", key, describe(p, b, sizeof b));
    advance(p);
    if (parse_value(p, &v->items[v->n - 1], depth + 1)) return -1;
    skip_ws(p);
    if (peek(p) == ',') { advance(p); continue; }
    if (peek(p) == '}') { advance(p); return 0; }
    return perr(p, "expected ',' or '}' in object, found %s", describe(p, b, sizeof b));
  }
}

static int parse_value(parser *p, vs_json *v, int depth) {
  char b[16];
  if (depth > VS_JSON_MAX_DEPTH) return perr(p, "nesting deeper than %d", VS_JSON_MAX_DEPTH);
  skip_ws(p);
  v->line = p->line;
  v->col = p->col;
  int c = peek(p);
  switch (c) {
    case '{': return parse_object(p, v, depth);
    case '[': return parse_array(p, v, depth);
    case '"': v->type = VS_JSON_STRING; return parse_string(p, &v->str, &v->len);
    case 't': v->type = VS_JSON_BOOL; v->boolean = 1; return expect_lit(p, "true");
    case 'f': v->type = VS_JSON_BOOL; v->boolean = 0; return expect_lit(p, "false");
    case 'n': v->type = VS_JSON_NULL; return expect_lit(p, "null");
    default:
      if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
      return perr(p, "expected a value, found %s", describe(p, b, sizeof b));
  }
}

int vs_json_parse(const char *text, size_t len, vs_json *out, char *err, size_t errlen) {
  parser p = {text, len, 0, 1, 1, err, errlen, 0};
  memset(out, 0, sizeof *out);
  char b[16];
  if (parse_value(&p, out, 0) == 0) {
    skip_ws(&p);
    if (at_end(&p)) return 0;
    perr(&p, "unexpected %s after the end of the document", describe(&p, b, sizeof b));
  }
  vs_json_free(out);
  return -1;
}

void vs_json_free(vs_json *v) {
  if (!v) return;
  for (size_t i = 0; i < v->n; i++) {
    vs_json_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->str);
  memset(v, 0, sizeof *v);
}

const char *vs_json_type_name(vs_json_type t) {
  static const char *const n[] = {"null", "boolean", "number", "string", "array", "object"};
  return (unsigned)t <= VS_JSON_OBJECT ? n[t] : "?";
}

const vs_json *vs_json_get(const vs_json *obj, const char *key) {
  if (!obj || obj->type != VS_JSON_OBJECT) return NULL;
  for (size_t i = 0; i < obj->n; i++)
    if (!strcmp(obj->keys[i], key)) return &obj->items[i];
  return NULL;
}

int vs_json_u64(const vs_json *v, uint64_t *out) {
  if (!v || v->type != VS_JSON_NUMBER || v->str[0] == '-') return -1;
  uint64_t r = 0;
  for (const char *s = v->str; *s; s++) {
    if (*s < '0' || *s > '9') return -1;   /* fraction or exponent */
    unsigned d = (unsigned)(*s - '0');
    if (r > (UINT64_MAX - d) / 10) return -1;
    r = r * 10 + d;
  }
  *out = r;
  return 0;
}

int vs_json_i64(const vs_json *v, int64_t *out) {
  if (!v || v->type != VS_JSON_NUMBER) return -1;
  int neg = v->str[0] == '-';
  uint64_t r = 0;
  for (const char *s = v->str + neg; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    unsigned d = (unsigned)(*s - '0');
    if (r > (UINT64_MAX - d) / 10) return -1;
    r = r * 10 + d;
  }
  if (r > (uint64_t)INT64_MAX + (uint64_t)neg) return -1;
  *out = neg ? (int64_t)(0 - r) : (int64_t)r;
  return 0;
}

int vs_json_double(const vs_json *v, double *out) {
  if (!v || v->type != VS_JSON_NUMBER) return -1;
  /* The C locale: a program under the shim may have set another one. */
  errno = 0;
  char *end;
  int ok;
  double d = vs_plat_strtod_c(v->str, &end, &ok);
  if (!ok) return -1;
  if (*end || errno == ERANGE || !isfinite(d)) return -1;
  *out = d;
  return 0;
}

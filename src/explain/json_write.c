/* The JSON writer (json.h): the layout rules in one place, so every
 * document the tool prints is valid JSON by construction. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "json.h"

void vs_jw_init(vs_jw *w, int compact) {
  *w = (vs_jw){0};
  w->compact = compact;
}

static void newline(vs_jw *w, int indent) {
  static const char spaces[] = "                                                                ";
  vs_sb_put(&w->b, "\n", 1);
  while (indent > 0) {
    int k = indent < 64 ? indent : 64;
    vs_sb_put(&w->b, spaces, (size_t)k);
    indent -= k;
  }
}

/* The indent of a line that holds a member of the innermost container. */
static int member_indent(const vs_jw *w) {
  if (!w->depth) return 0;
  return w->st[w->depth - 1].indent + (w->st[w->depth - 1].block ? 2 : 0);
}

/* Before a member of the innermost container (a key in an object, a value
 * in an array): the separator and, in a BLOCK container, the new line. */
static void separate(vs_jw *w) {
  if (!w->depth) return;
  if (w->st[w->depth - 1].n++) vs_sb_put(&w->b, ",", 1);
  if (w->compact) return;
  if (w->st[w->depth - 1].block) newline(w, member_indent(w));
  else if (w->st[w->depth - 1].n > 1) vs_sb_put(&w->b, " ", 1);
}

/* Before any value: where it may stand. 0, or -1 (misuse: marked failed). */
static int value_start(vs_jw *w) {
  if (w->failed) return -1;
  if (w->depth && w->st[w->depth - 1].object) {
    if (!w->after_key) goto misuse;   /* a value in an object needs its key */
    w->after_key = 0;
    return 0;
  }
  if (!w->depth && w->b.len) goto misuse;   /* one value per writer */
  separate(w);
  return 0;
misuse:
  w->failed = 1;
  return -1;
}

void vs_jw_key(vs_jw *w, const char *key) {
  if (w->failed) return;
  if (!w->depth || !w->st[w->depth - 1].object || w->after_key) {
    w->failed = 1;
    return;
  }
  separate(w);
  vs_sb_json_str(&w->b, key);
  vs_sb_put(&w->b, w->compact ? ":" : ": ", w->compact ? 1 : 2);
  w->after_key = 1;
}

static void jw_open(vs_jw *w, int object, int layout) {
  int indent = member_indent(w);
  if (value_start(w)) return;
  if (w->depth == VS_JSON_MAX_DEPTH) {
    w->failed = 1;
    return;
  }
  w->st[w->depth].object = (unsigned char)object;
  w->st[w->depth].block = (unsigned char)(layout == VS_JSON_BLOCK);
  w->st[w->depth].indent = indent;
  w->st[w->depth].n = 0;
  w->depth++;
  vs_sb_put(&w->b, object ? "{" : "[", 1);
}

void vs_jw_object(vs_jw *w, int layout) { jw_open(w, 1, layout); }
void vs_jw_array(vs_jw *w, int layout) { jw_open(w, 0, layout); }

void vs_jw_end(vs_jw *w) {
  if (w->failed) return;
  if (!w->depth || w->after_key) {
    w->failed = 1;
    return;
  }
  w->depth--;
  if (!w->compact && w->st[w->depth].block && w->st[w->depth].n) newline(w, w->st[w->depth].indent);
  vs_sb_put(&w->b, w->st[w->depth].object ? "}" : "]", 1);
}

void vs_jw_str(vs_jw *w, const char *s) {
  if (value_start(w)) return;
  vs_sb_json_str(&w->b, s);
}

void vs_jw_strf(vs_jw *w, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp) {   /* the callers format short things: ids, versions */
    w->failed = 1;
    return;
  }
  vs_jw_str(w, tmp);
}

void vs_jw_u64(vs_jw *w, uint64_t v) {
  if (value_start(w)) return;
  vs_sb_u64(&w->b, v);
}

void vs_jw_i64(vs_jw *w, int64_t v) {
  if (value_start(w)) return;
  vs_sb_i64(&w->b, v);
}

void vs_jw_bool(vs_jw *w, int v) {
  if (value_start(w)) return;
  vs_sb_puts(&w->b, v ? "true" : "false");
}

void vs_jw_null(vs_jw *w) {
  if (value_start(w)) return;
  vs_sb_puts(&w->b, "null");
}

void vs_jw_fixed(vs_jw *w, double v, int decimals) {
  if (value_start(w)) return;
  vs_sb_fixed(&w->b, v, decimals);
}

void vs_jw_hex(vs_jw *w, uint64_t v) {
  if (value_start(w)) return;
  vs_sb_put(&w->b, "\"", 1);
  vs_sb_hex(&w->b, v);
  vs_sb_put(&w->b, "\"", 1);
}

void vs_jw_kstr(vs_jw *w, const char *key, const char *s) {
  vs_jw_key(w, key);
  vs_jw_str(w, s);
}

void vs_jw_ku64(vs_jw *w, const char *key, uint64_t v) {
  vs_jw_key(w, key);
  vs_jw_u64(w, v);
}

void vs_jw_ki64(vs_jw *w, const char *key, int64_t v) {
  vs_jw_key(w, key);
  vs_jw_i64(w, v);
}

void vs_jw_kbool(vs_jw *w, const char *key, int v) {
  vs_jw_key(w, key);
  vs_jw_bool(w, v);
}

void vs_jw_kfixed(vs_jw *w, const char *key, double v, int decimals) {
  vs_jw_key(w, key);
  vs_jw_fixed(w, v, decimals);
}

void vs_jw_ku64_or_null(vs_jw *w, const char *key, uint64_t v, uint64_t none) {
  vs_jw_key(w, key);
  if (v == none) vs_jw_null(w);
  else vs_jw_u64(w, v);
}

char *vs_jw_take(vs_jw *w, size_t *len) {
  if (w->failed || w->depth || w->after_key || !w->b.len) {
    vs_sb_free(&w->b);
    return NULL;
  }
  vs_sb_put(&w->b, "\n", 1);
  return vs_sb_take(&w->b, len);
}

int vs_jw_print(vs_jw *w, FILE *out) {
  size_t len;
  char *text = vs_jw_take(w, &len);
  if (!text) return -1;
  int rc = fwrite(text, 1, len, out) == len ? 0 : -1;
  free(text);
  return rc;
}

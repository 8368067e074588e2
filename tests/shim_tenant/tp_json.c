/* See tp_json.h. */
#include "tp_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tj_parse(const char *text, vs_json *doc, const char *what) {
  char err[256];
  if (vs_json_parse(text, strlen(text), doc, err, sizeof err) == 0) return 0;
  fprintf(stderr, "%s is not valid JSON: %s\n%.2000s\n", what, err, text);
  return -1;
}

const vs_json *tj_at(const vs_json *v, const char *path) {
  char step[128];
  while (v && *path) {
    size_t n = strcspn(path, "/");
    if (n >= sizeof step) return NULL;
    memcpy(step, path, n);
    step[n] = 0;
    path += n + (path[n] == '/');
    if (v->type == VS_JSON_OBJECT) {
      v = vs_json_get(v, step);
    } else if (v->type == VS_JSON_ARRAY) {
      char *end;
      unsigned long i = strtoul(step, &end, 10);
      v = (*step && !*end && i < v->n) ? &v->items[i] : NULL;
    } else {
      return NULL;
    }
  }
  return v;
}

const vs_json *tj_find_str(const vs_json *v, const char *path, const char *key, const char *s) {
  const vs_json *a = tj_at(v, path);
  if (!a || a->type != VS_JSON_ARRAY) return NULL;
  for (size_t i = 0; i < a->n; i++) {
    const char *x = tj_str(&a->items[i], key);
    if (x && !strcmp(x, s)) return &a->items[i];
  }
  return NULL;
}

const vs_json *tj_find_int(const vs_json *v, const char *path, const char *key, int64_t n) {
  const vs_json *a = tj_at(v, path);
  if (!a || a->type != VS_JSON_ARRAY) return NULL;
  for (size_t i = 0; i < a->n; i++) {
    int64_t x;
    if (tj_i64(&a->items[i], key, &x) == 0 && x == n) return &a->items[i];
  }
  return NULL;
}

int tj_u64(const vs_json *v, const char *path, uint64_t *out) {
  const vs_json *x = tj_at(v, path);
  return x ? vs_json_u64(x, out) : -1;
}

int tj_i64(const vs_json *v, const char *path, int64_t *out) {
  const vs_json *x = tj_at(v, path);
  return x ? vs_json_i64(x, out) : -1;
}

int tj_u64_is(const vs_json *v, const char *path, uint64_t want) {
  uint64_t x;
  return tj_u64(v, path, &x) == 0 && x == want;
}

const char *tj_str(const vs_json *v, const char *path) {
  const vs_json *x = tj_at(v, path);
  return x && x->type == VS_JSON_STRING ? x->str : NULL;
}

int tj_is_null(const vs_json *v, const char *path) {
  const vs_json *x = tj_at(v, path);
  return x && x->type == VS_JSON_NULL;
}

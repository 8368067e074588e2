/* A small strict JSON parser (RFC 8259) into a tree, for reading dumps.
 *
 * Strict: no comments, no trailing commas, no duplicate keys, no control
 * characters in strings, valid UTF-8 only, nesting at most VS_JSON_MAX_DEPTH.
 * Every error names what was expected and where (line, column). Numbers keep
 * their source text; the typed getters decide what fits. Never reads past
 * `len`, so truncated input is an error, not a crash. */
#ifndef VS_JSON_H
#define VS_JSON_H

#include <stddef.h>
#include <stdint.h>

#define VS_JSON_MAX_DEPTH 64

typedef enum { VS_JSON_NULL, VS_JSON_BOOL, VS_JSON_NUMBER, VS_JSON_STRING, VS_JSON_ARRAY, VS_JSON_OBJECT } vs_json_type;

typedef struct vs_json vs_json;
struct vs_json {
  vs_json_type type;
  unsigned line, col;          /* where the value starts */
  int boolean;
  char *str;                   /* STRING: NUL-terminated, decoded; NUMBER: source text copy */
  size_t len;
  size_t n;                    /* ARRAY/OBJECT: element count */
  vs_json *items;              /* ARRAY: elements; OBJECT: values */
  char **keys;                 /* OBJECT: keys */
};

/* 0 and *out filled, or -1 with "line L, column C: ..." in err. */
int vs_json_parse(const char *text, size_t len, vs_json *out, char *err, size_t errlen);
void vs_json_free(vs_json *v);

const char *vs_json_type_name(vs_json_type t);
const vs_json *vs_json_get(const vs_json *obj, const char *key);   /* NULL when absent */
/* Integer in [0, UINT64_MAX]: 0, or -1 (not an integer, negative, too large). */
int vs_json_u64(const vs_json *v, uint64_t *out);
int vs_json_i64(const vs_json *v, int64_t *out);
int vs_json_double(const vs_json *v, double *out);   /* finite numbers only */

#endif

/* JSON for every document the project reads or prints: a small strict parser
 * (RFC 8259) into a tree, for reading dumps (json.c), and the one writer
 * (json_write.c) that every JSON output goes through: dumps, dump lists,
 * `vramshim status`, `check`, `replay`, `history` (docs/schemas/).
 *
 * The parser is strict:
 * no comments, no trailing commas, no duplicate keys, no control
 * characters in strings, valid UTF-8 only, nesting at most VS_JSON_MAX_DEPTH.
 * Every error names what was expected and where (line, column). Numbers keep
 * their source text; the typed getters decide what fits. Never reads past
 * `len`, so truncated input is an error, not a crash. */
#ifndef VS_JSON_H
#define VS_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sbuf.h"

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

/* ---- Writer -------------------------------------------------------------- */
/* Builds one JSON value (usually a document) in memory: the writer puts the
 * commas, colons, quotes, escapes and indentation, so no caller assembles
 * JSON text. Every container is laid out in one of two ways:
 *   VS_JSON_BLOCK   one member per line, indented two spaces deeper than
 *                   the line the container starts on; `{}`/`[]` when empty
 *   VS_JSON_INLINE  members on the container's line, ", " between them
 * (a BLOCK container inside an INLINE one indents from the INLINE one's
 * line), so a document reads well in a pager and diffs line by line. A
 * COMPACT writer ignores layouts: no space, no newline (JSON Lines).
 *
 * Invariants: a value inside an object follows its key; a key only inside
 * an object; containers closed in order; nesting at most VS_JSON_MAX_DEPTH.
 * Breaking one (a bug in the caller) marks the writer failed, like running
 * out of memory: vs_jw_take then returns NULL. Numbers never depend on the
 * locale. Strings are escaped as RFC 8259 asks; invalid UTF-8 bytes become
 * U+FFFD. */
enum { VS_JSON_BLOCK = 1, VS_JSON_INLINE = 0 };

typedef struct vs_jw {
  vs_sbuf b;
  int compact;
  int depth;
  int after_key;               /* a key was written, its value is next */
  int failed;                  /* misuse; out of memory is b.failed */
  struct {
    unsigned char object, block;
    int indent;                /* of the line the container starts on */
    size_t n;                  /* members written */
  } st[VS_JSON_MAX_DEPTH];
} vs_jw;

void vs_jw_init(vs_jw *w, int compact);
void vs_jw_object(vs_jw *w, int layout);
void vs_jw_array(vs_jw *w, int layout);
void vs_jw_end(vs_jw *w);                 /* closes the innermost container */
void vs_jw_key(vs_jw *w, const char *key);
void vs_jw_str(vs_jw *w, const char *s);
void vs_jw_strf(vs_jw *w, const char *fmt, ...) VS_PRINTF(2, 3); /* a string value, formatted */
void vs_jw_u64(vs_jw *w, uint64_t v);
void vs_jw_i64(vs_jw *w, int64_t v);
void vs_jw_bool(vs_jw *w, int v);
void vs_jw_null(vs_jw *w);
void vs_jw_fixed(vs_jw *w, double v, int decimals);  /* |v| < 1e15, else 0 */
void vs_jw_hex(vs_jw *w, uint64_t v);     /* a string "0x..." (addresses: beyond 2^53) */
/* A key and its value. */
void vs_jw_kstr(vs_jw *w, const char *key, const char *s);
void vs_jw_ku64(vs_jw *w, const char *key, uint64_t v);
void vs_jw_ki64(vs_jw *w, const char *key, int64_t v);
void vs_jw_kbool(vs_jw *w, const char *key, int v);
void vs_jw_kfixed(vs_jw *w, const char *key, double v, int decimals);
/* v, or null when v == none (a limit that is not set). */
void vs_jw_ku64_or_null(vs_jw *w, const char *key, uint64_t v, uint64_t none);
/* The finished value and a newline, malloc'd and NUL-terminated (length
 * in *len if given); NULL when failed or not finished. Frees the writer's
 * buffer either way. */
char *vs_jw_take(vs_jw *w, size_t *len);
/* vs_jw_take, written to out: 0, or -1 (failed, or the write did). */
int vs_jw_print(vs_jw *w, FILE *out);

#endif

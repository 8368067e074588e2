/* The tool's JSON outputs read in the C tests with the project's own strict
 * parser (src/explain/json.c), then asserted on field by field: a test never
 * searches JSON as text (a field moved, reordered or re-indented must not
 * pass or fail a test by accident). Shared by shim_tenant, shim_spill,
 * faults and the Windows tests. */
#ifndef VS_TP_JSON_H
#define VS_TP_JSON_H

#include <stdint.h>

#include "json.h"

/* Parses text (a whole document) into doc: 0, or -1 with the parser's
 * error and the start of the text printed, what naming the document. */
int tj_parse(const char *text, vs_json *doc, const char *what);
/* The value at path: object keys and array indexes separated by '/'
 * ("cards/0/tenants"; "" is v itself); NULL when a step is absent or of
 * another type. */
const vs_json *tj_at(const vs_json *v, const char *path);
/* The first object of the array at path whose key is the string s (the
 * integer n); NULL when none. */
const vs_json *tj_find_str(const vs_json *v, const char *path, const char *key, const char *s);
const vs_json *tj_find_int(const vs_json *v, const char *path, const char *key, int64_t n);
/* An integer at path: 0, or -1 when absent or not an integer that fits. */
int tj_u64(const vs_json *v, const char *path, uint64_t *out);
int tj_i64(const vs_json *v, const char *path, int64_t *out);
/* 1 when the value at path is an unsigned integer equal to want. */
int tj_u64_is(const vs_json *v, const char *path, uint64_t want);
/* The string at path, or NULL (absent, or not a string). */
const char *tj_str(const vs_json *v, const char *path);
/* 1 when the value at path is null. */
int tj_is_null(const vs_json *v, const char *path);

#endif

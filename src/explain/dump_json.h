/* The dump's JSON form (docs/dump-format.md, docs/dump.schema.json).
 * The writer never depends on the locale; the reader is strict about
 * syntax and types and names what is wrong and where, and ignores keys it
 * does not know (a newer minor version may add some). */
#ifndef VS_DUMP_JSON_H
#define VS_DUMP_JSON_H

#include <stddef.h>

#include "dump_model.h"
#include "json.h"

/* The JSON text, malloc'd and NUL-terminated (length in *len if given);
 * NULL when memory runs out. */
char *vs_dump_to_json(const vs_dump *d, size_t *len);
/* The dump as the next value of w (a document of its own, or an element of
 * a list: `vramshim dump --all --json`). */
void vs_dump_write_json(vs_jw *w, const vs_dump *d);
/* Writes the JSON text to fd (all of it, retrying short writes). 0 or -1. */
int vs_dump_write_fd(const vs_dump *d, int fd);

/* Refuses a dump larger than this (a guard against feeding it anything). */
#define VS_DUMP_MAX_FILE (1024ull * 1024 * 1024)

/* 0 and *out filled (free with vs_dump_free), or -1 with a message in err:
 * "line 3, column 7: ..." for syntax, "cards[0].regions[2].size: ..." for
 * content. Accepts schema major version 1, any minor. */
int vs_dump_from_json(const char *text, size_t len, vs_dump *out, char *err, size_t errlen);
int vs_dump_read_file(const char *path, vs_dump *out, char *err, size_t errlen);

#endif

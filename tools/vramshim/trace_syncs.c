/* The sidecar of the program's synchronisations (trace_syncs.h). */
#include "trace_syncs.h"

#include "file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A whole field: decimal, or 0x-prefixed hex (the trace's own rule). */
static int parse_num(const char *s, uint64_t *out) { return vs_trace_parse_u64(s, strlen(s), 1, out) ? -1 : 0; }

int vs_trace_syncs_load(const char *path, vs_trace *t, char *err, size_t errlen) {
  t->syncs = NULL;
  t->nsyncs = 0;
  FILE *f = vs_plat_fopen_regular(path, "r");
  if (!f) {
    if (errno == ENOENT) return 0;
    snprintf(err, errlen, "%s: cannot open: %s", path, vs_plat_open_strerror(errno));
    return -1;
  }
  char line[512];
  size_t n = 0, cap = 0, lineno = 0;
  vs_trace_sync *v = NULL;
  uint64_t last = 0;
  int rc = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    size_t len = strlen(line);
    if (len == sizeof line - 1 && line[len - 1] != '\n') {
      snprintf(err, errlen, "%s:%zu: line too long", path, lineno);
      rc = -1;
      break;
    }
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (lineno == 1) {
      if (strcmp(line, "After,Sync,Stream")) {
        snprintf(err, errlen, "%s:1: missing header: the first line must be 'After,Sync,Stream'", path);
        rc = -1;
        break;
      }
      continue;
    }
    if (!len) continue;
    char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c1 || !c2 || strchr(c2 + 1, ',')) {
      snprintf(err, errlen, "%s:%zu: expected 3 columns (After,Sync,Stream)", path, lineno);
      rc = -1;
      break;
    }
    *c1 = *c2 = 0;
    vs_trace_sync s = {0, 0, 0};
    if (parse_num(line, &s.after) || s.after > t->nev) {
      snprintf(err, errlen, "%s:%zu: bad After '%s': not a count of the trace's %zu allocate and free lines", path,
               lineno, line, t->nev);
      rc = -1;
      break;
    }
    if (s.after < last) {
      snprintf(err, errlen, "%s:%zu: After %llu is before the line above (%llu)", path, lineno,
               (unsigned long long)s.after, (unsigned long long)last);
      rc = -1;
      break;
    }
    last = s.after;
    if (!strcmp(c1 + 1, "context")) {
      s.context = 1;
      if (c2[1]) {
        snprintf(err, errlen, "%s:%zu: a context sync names no stream", path, lineno);
        rc = -1;
        break;
      }
    } else if (!strcmp(c1 + 1, "stream")) {
      if (parse_num(c2 + 1, &s.stream)) {
        snprintf(err, errlen, "%s:%zu: bad Stream '%s': not a hex (0x...) or decimal handle", path, lineno, c2 + 1);
        rc = -1;
        break;
      }
      if (s.stream == 1) s.stream = 0;   /* CU_STREAM_LEGACY: the legacy stream */
    } else {
      snprintf(err, errlen, "%s:%zu: unknown Sync '%s' (context or stream)", path, lineno, c1 + 1);
      rc = -1;
      break;
    }
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 1024;
      vs_trace_sync *nv = realloc(v, nc * sizeof *nv);
      if (!nv) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = -1;
        break;
      }
      v = nv;
      cap = nc;
    }
    v[n++] = s;
  }
  if (!rc && ferror(f)) {
    snprintf(err, errlen, "%s: read error", path);
    rc = -1;
  }
  if (!rc && lineno == 0) {
    snprintf(err, errlen, "%s:1: missing header: the first line must be 'After,Sync,Stream'", path);
    rc = -1;
  }
  fclose(f);
  if (rc) {
    free(v);
    return -1;
  }
  t->syncs = v;
  t->nsyncs = n;
  return 0;
}

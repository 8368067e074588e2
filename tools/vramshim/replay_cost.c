/* The driver cost table of `vramshim replay`: see replay_cost.h. */
#include "replay_cost.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const vs_call_names[VS_NCALLS] = {
    "cuMemAlloc", "cuMemFree",  "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate",  "cuMemMap",
    "cuMemSetAccess", "cuMemUnmap", "cuMemRelease", "cuCtxSynchronize", "cuEventRecord", "cuEventQuery",
    "cuStreamWaitEvent"};

int vs_cost_load(const char *path, vs_cost_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  snprintf(t->path, sizeof t->path, "%s", path);
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open the driver cost table: %s", path, strerror(errno));
    return -1;
  }
  char line[512];
  int ln = 0, rc = 0, header = 0;
  while (!rc && fgets(line, sizeof line, f)) {
    ln++;
    line[strcspn(line, "\r\n")] = '\0';
    if (!line[0] || line[0] == '#') continue;
    if (!header) {
      if (strncmp(line, "call,size_bytes,ns", 18)) {
        snprintf(err, errlen, "%s:%d: expected the header 'call,size_bytes,ns,source'", path, ln);
        rc = -1;
      }
      header = 1;
      continue;
    }
    char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c1 || !c2) {
      snprintf(err, errlen, "%s:%d: expected call,size_bytes,ns[,source]", path, ln);
      rc = -1;
      break;
    }
    *c1 = '\0';
    int k = -1;
    for (int i = 0; i < VS_NCALLS; i++)
      if (!strcmp(line, vs_call_names[i])) k = i;
    char *end;
    errno = 0;
    unsigned long long size = strtoull(c1 + 1, &end, 10);
    int bad_size = end == c1 + 1 || end != c2 || errno;
    double ns = strtod(c2 + 1, &end);
    int bad_ns = end == c2 + 1 || (*end && *end != ',') || !(ns >= 0) || ns > 1e12;
    if (k < 0) snprintf(err, errlen, "%s:%d: unknown call '%s'", path, ln, line), rc = -1;
    else if (bad_size) snprintf(err, errlen, "%s:%d: bad size_bytes", path, ln), rc = -1;
    else if (bad_ns) snprintf(err, errlen, "%s:%d: bad ns (a number of nanoseconds)", path, ln), rc = -1;
    else if (t->n[k] == VS_COST_POINTS) snprintf(err, errlen, "%s:%d: more than %d sizes for %s", path, ln, VS_COST_POINTS, line), rc = -1;
    else if (t->n[k] && t->size[k][t->n[k] - 1] >= size)
      snprintf(err, errlen, "%s:%d: sizes of %s must ascend", path, ln, line), rc = -1;
    else {
      t->size[k][t->n[k]] = size;
      t->ns[k][t->n[k]++] = ns;
    }
  }
  fclose(f);
  for (int i = 0; !rc && i < VS_NCALLS; i++)
    if (!t->n[i]) {
      snprintf(err, errlen, "%s: no cost for %s", path, vs_call_names[i]);
      rc = -1;
    }
  return rc;
}

double vs_cost_ns(const vs_cost_table *t, vs_call_kind k, uint64_t size) {
  uint32_t n = t->n[k];
  const uint64_t *s = t->size[k];
  const double *v = t->ns[k];
  if (!n) return 0;
  if (size <= s[0] || n == 1) return v[0];
  if (size >= s[n - 1]) return v[n - 1];
  uint32_t i = 1;
  while (s[i] < size) i++;
  double x0 = log2((double)(s[i - 1] ? s[i - 1] : 1)), x1 = log2((double)s[i]), x = log2((double)size);
  return v[i - 1] + (v[i] - v[i - 1]) * (x - x0) / (x1 - x0);
}

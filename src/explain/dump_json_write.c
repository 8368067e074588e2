/* Dump -> JSON, through the JSON writer (json.h). One key per line down to
 * the card figures; blocks and samples one per line, so a dump reads well
 * in a pager and diffs well. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dump_json.h"
#include "json.h"
#include "timeutil.h"

static void iso_time(char *s, size_t len, uint64_t ms) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  vs_plat_gmtime(t, &tm);
  size_t n = strftime(s, len, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(s + n, len - n, ".%03uZ", (unsigned)(ms % 1000));
}

static void write_card(vs_jw *w, const vs_dump_card *c) {
  vs_jw_object(w, VS_JSON_BLOCK);
  vs_jw_ki64(w, "index", c->index);
  vs_jw_kstr(w, "arena", c->arena);
  vs_jw_ku64(w, "capacity", c->capacity);
  vs_jw_ku64(w, "live_bytes", c->live_bytes);
  vs_jw_ku64(w, "live_count", c->live_count);
  vs_jw_ku64(w, "peak_live_bytes", c->peak_live_bytes);
  vs_jw_ku64(w, "reserved_bytes", c->reserved_bytes);
  vs_jw_ku64(w, "peak_reserved_bytes", c->peak_reserved_bytes);
  vs_jw_ku64(w, "internal_waste", c->internal_waste);
  vs_jw_ku64(w, "free_bytes", c->free_bytes);
  vs_jw_ku64(w, "pending_bytes", c->pending_bytes);
  vs_jw_ku64(w, "largest_free", c->largest_free);
  vs_jw_kfixed(w, "external_fragmentation", c->external_fragmentation, 6);
  vs_jw_ku64(w, "requests", c->requests);
  vs_jw_ku64(w, "served_from_cache", c->served_from_cache);
  vs_jw_ku64(w, "spilled_bytes", c->spilled_bytes);           /* 1.1 */
  vs_jw_ku64(w, "peak_spilled_bytes", c->peak_spilled_bytes); /* 1.1 */
  vs_jw_ku64(w, "spilled_count", c->spilled_count);           /* 1.1 */
  vs_jw_ku64(w, "pool_reserved_bytes", c->pool_reserved_bytes);   /* 1.3 */
  vs_jw_ku64(w, "graph_reserved_bytes", c->graph_reserved_bytes); /* 1.3 */

  vs_jw_key(w, "driver_calls");
  vs_jw_object(w, VS_JSON_INLINE);
  for (size_t i = 0; i < c->ncalls; i++) vs_jw_ku64(w, c->calls[i].name, c->calls[i].count);
  vs_jw_end(w);

  vs_jw_key(w, "free_histogram");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (unsigned i = 0; i < VS_DUMP_HIST_BUCKETS; i++) {
    if (!c->hist_count[i] && !c->hist_bytes[i]) continue;
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_ku64(w, "log2", i);
    vs_jw_ku64(w, "count", c->hist_count[i]);
    vs_jw_ku64(w, "bytes", c->hist_bytes[i]);
    vs_jw_end(w);
  }
  vs_jw_end(w);

  vs_jw_key(w, "size_classes");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (size_t i = 0; i < c->nclasses; i++) {
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_ku64(w, "size", c->classes[i].size);
    vs_jw_ku64(w, "live", c->classes[i].live);
    vs_jw_ku64(w, "slots", c->classes[i].slots);
    vs_jw_end(w);
  }
  vs_jw_end(w);

  if (c->tenant.present) {
    vs_jw_key(w, "tenant");
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_ku64(w, "reserve", c->tenant.reserve);
    vs_jw_ku64_or_null(w, "limit", c->tenant.limit, VS_DUMP_UNLIMITED);
    vs_jw_ku64(w, "usage", c->tenant.usage);
    vs_jw_ku64(w, "spilled", c->tenant.spilled);                /* 1.1 */
    vs_jw_ku64_or_null(w, "spill_max", c->tenant.spill_max, 0); /* 1.1 */
    vs_jw_ku64(w, "overhead", c->tenant.overhead);              /* 1.2 */
    vs_jw_end(w);
  }

  vs_jw_key(w, "regions");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (size_t i = 0; i < c->nregions; i++) {
    const vs_dump_region *r = &c->regions[i];
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_key(w, "base");
    vs_jw_hex(w, r->base);
    vs_jw_ku64(w, "size", r->size);
    vs_jw_kstr(w, "kind", vs_dump_region_kind_name(r->kind));
    if (r->class_size) vs_jw_ku64(w, "class_size", r->class_size);
    vs_jw_key(w, "blocks");
    vs_jw_array(w, VS_JSON_BLOCK);
    for (size_t j = 0; j < r->nblocks; j++) {
      const vs_dump_block *k = &r->blocks[j];
      vs_jw_object(w, VS_JSON_INLINE);
      vs_jw_ku64(w, "offset", k->offset);
      vs_jw_ku64(w, "size", k->size);
      vs_jw_kstr(w, "state", vs_dump_block_state_name(k->state));
      vs_jw_end(w);
    }
    vs_jw_end(w);
    vs_jw_end(w);
  }
  vs_jw_end(w);

  vs_jw_key(w, "timeline");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (size_t i = 0; i < c->nsamples; i++) {
    const vs_dump_sample *s = &c->samples[i];
    vs_jw_object(w, VS_JSON_INLINE);
    vs_jw_ku64(w, "t_ms", s->t_ms);
    vs_jw_ku64(w, "live", s->live);
    vs_jw_ku64(w, "reserved", s->reserved);
    vs_jw_ku64(w, "largest_free", s->largest_free);
    vs_jw_ku64(w, "spilled", s->spilled);   /* 1.1 */
    vs_jw_end(w);
  }
  vs_jw_end(w);
  vs_jw_end(w);
}

void vs_dump_write_json(vs_jw *w, const vs_dump *d) {
  char when[48];
  vs_jw_object(w, VS_JSON_BLOCK);
  vs_jw_key(w, "schema_version");
  vs_jw_strf(w, "%u.%u", d->schema_major, d->schema_minor);
  vs_jw_kstr(w, "generator", "vramshim");
  vs_jw_kstr(w, "reason", d->reason);
  vs_jw_ku64(w, "time_unix_ms", d->time_unix_ms);
  iso_time(when, sizeof when, d->time_unix_ms);
  vs_jw_kstr(w, "time_utc", when);
  vs_jw_key(w, "process");
  vs_jw_object(w, VS_JSON_INLINE);
  vs_jw_ki64(w, "pid", d->pid);
  vs_jw_kstr(w, "exe", d->exe);
  vs_jw_end(w);
  vs_jw_kstr(w, "tenant", d->tenant);
  vs_jw_key(w, "cards");
  vs_jw_array(w, VS_JSON_BLOCK);
  for (size_t i = 0; i < d->ncards; i++) write_card(w, &d->cards[i]);
  vs_jw_end(w);
  vs_jw_end(w);
}

char *vs_dump_to_json(const vs_dump *d, size_t *len) {
  vs_jw w;
  vs_jw_init(&w, 0);
  vs_dump_write_json(&w, d);
  return vs_jw_take(&w, len);
}

int vs_dump_write_fd(const vs_dump *d, int fd) {
  size_t len;
  char *text = vs_dump_to_json(d, &len);
  if (!text) {
    errno = ENOMEM;
    return -1;
  }
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(fd, text + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      free(text);
      errno = e;
      return -1;
    }
    off += (size_t)w;
  }
  free(text);
  return 0;
}

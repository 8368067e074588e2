/* Dump -> JSON text. One key per line down to the card figures; blocks and
 * samples one per line, so a dump reads well in a pager and diffs well. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dump_json.h"
#include "sbuf.h"
#include "timeutil.h"

static void key(vs_sbuf *b, int indent, const char *k) {
  static const char spaces[] = "                ";
  vs_sb_put(b, spaces, (size_t)(indent < 16 ? indent : 16));
  vs_sb_json_str(b, k);
  vs_sb_put(b, ": ", 2);
}

static void kv_u64(vs_sbuf *b, int indent, const char *k, uint64_t v) {
  key(b, indent, k);
  vs_sb_u64(b, v);
  vs_sb_put(b, ",\n", 2);
}

static void iso_time(vs_sbuf *b, uint64_t ms) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  char s[40];
  vs_plat_gmtime(t, &tm);
  strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
  vs_sb_puts(b, s);
  vs_sb_printf(b, ".%03uZ", (unsigned)(ms % 1000));
}

static void write_card(vs_sbuf *b, const vs_dump_card *c) {
  vs_sb_puts(b, "    {\n");
  key(b, 6, "index");
  vs_sb_i64(b, c->index);
  vs_sb_puts(b, ",\n");
  key(b, 6, "arena");
  vs_sb_json_str(b, c->arena);
  vs_sb_puts(b, ",\n");
  kv_u64(b, 6, "capacity", c->capacity);
  kv_u64(b, 6, "live_bytes", c->live_bytes);
  kv_u64(b, 6, "live_count", c->live_count);
  kv_u64(b, 6, "peak_live_bytes", c->peak_live_bytes);
  kv_u64(b, 6, "reserved_bytes", c->reserved_bytes);
  kv_u64(b, 6, "peak_reserved_bytes", c->peak_reserved_bytes);
  kv_u64(b, 6, "internal_waste", c->internal_waste);
  kv_u64(b, 6, "free_bytes", c->free_bytes);
  kv_u64(b, 6, "pending_bytes", c->pending_bytes);
  kv_u64(b, 6, "largest_free", c->largest_free);
  key(b, 6, "external_fragmentation");
  vs_sb_fixed(b, c->external_fragmentation, 6);
  vs_sb_puts(b, ",\n");
  kv_u64(b, 6, "requests", c->requests);
  kv_u64(b, 6, "served_from_cache", c->served_from_cache);
  kv_u64(b, 6, "spilled_bytes", c->spilled_bytes);           /* 1.1 */
  kv_u64(b, 6, "peak_spilled_bytes", c->peak_spilled_bytes); /* 1.1 */
  kv_u64(b, 6, "spilled_count", c->spilled_count);           /* 1.1 */

  key(b, 6, "driver_calls");
  vs_sb_puts(b, "{");
  for (size_t i = 0; i < c->ncalls; i++) {
    vs_sb_puts(b, i ? ", " : "");
    vs_sb_json_str(b, c->calls[i].name);
    vs_sb_puts(b, ": ");
    vs_sb_u64(b, c->calls[i].count);
  }
  vs_sb_puts(b, "},\n");

  key(b, 6, "free_histogram");
  vs_sb_puts(b, "[");
  int first = 1;
  for (unsigned i = 0; i < VS_DUMP_HIST_BUCKETS; i++) {
    if (!c->hist_count[i] && !c->hist_bytes[i]) continue;
    vs_sb_puts(b, first ? "\n        " : ",\n        ");
    first = 0;
    vs_sb_printf(b, "{\"log2\": %u, \"count\": ", i);
    vs_sb_u64(b, c->hist_count[i]);
    vs_sb_puts(b, ", \"bytes\": ");
    vs_sb_u64(b, c->hist_bytes[i]);
    vs_sb_puts(b, "}");
  }
  vs_sb_puts(b, first ? "],\n" : "\n      ],\n");

  key(b, 6, "size_classes");
  vs_sb_puts(b, "[");
  for (size_t i = 0; i < c->nclasses; i++) {
    vs_sb_puts(b, i ? ",\n        " : "\n        ");
    vs_sb_puts(b, "{\"size\": ");
    vs_sb_u64(b, c->classes[i].size);
    vs_sb_puts(b, ", \"live\": ");
    vs_sb_u64(b, c->classes[i].live);
    vs_sb_puts(b, ", \"slots\": ");
    vs_sb_u64(b, c->classes[i].slots);
    vs_sb_puts(b, "}");
  }
  vs_sb_puts(b, c->nclasses ? "\n      ],\n" : "],\n");

  if (c->tenant.present) {
    key(b, 6, "tenant");
    vs_sb_puts(b, "{\"reserve\": ");
    vs_sb_u64(b, c->tenant.reserve);
    vs_sb_puts(b, ", \"limit\": ");
    if (c->tenant.limit == VS_DUMP_UNLIMITED) vs_sb_puts(b, "null");
    else vs_sb_u64(b, c->tenant.limit);
    vs_sb_puts(b, ", \"usage\": ");
    vs_sb_u64(b, c->tenant.usage);
    vs_sb_puts(b, ", \"spilled\": ");   /* 1.1 */
    vs_sb_u64(b, c->tenant.spilled);
    vs_sb_puts(b, ", \"spill_max\": ");
    if (c->tenant.spill_max) vs_sb_u64(b, c->tenant.spill_max);
    else vs_sb_puts(b, "null");
    vs_sb_puts(b, ", \"overhead\": ");   /* 1.2 */
    vs_sb_u64(b, c->tenant.overhead);
    vs_sb_puts(b, "},\n");
  }

  key(b, 6, "regions");
  vs_sb_puts(b, "[");
  for (size_t i = 0; i < c->nregions; i++) {
    const vs_dump_region *r = &c->regions[i];
    vs_sb_puts(b, i ? ",\n        {\"base\": \"" : "\n        {\"base\": \"");
    vs_sb_hex(b, r->base);
    vs_sb_puts(b, "\", \"size\": ");
    vs_sb_u64(b, r->size);
    vs_sb_puts(b, ", \"kind\": ");
    vs_sb_json_str(b, vs_dump_region_kind_name(r->kind));
    if (r->class_size) {
      vs_sb_puts(b, ", \"class_size\": ");
      vs_sb_u64(b, r->class_size);
    }
    vs_sb_puts(b, ", \"blocks\": [");
    for (size_t j = 0; j < r->nblocks; j++) {
      const vs_dump_block *k = &r->blocks[j];
      vs_sb_puts(b, j ? ",\n          {\"offset\": " : "\n          {\"offset\": ");
      vs_sb_u64(b, k->offset);
      vs_sb_puts(b, ", \"size\": ");
      vs_sb_u64(b, k->size);
      vs_sb_puts(b, ", \"state\": ");
      vs_sb_json_str(b, vs_dump_block_state_name(k->state));
      vs_sb_puts(b, "}");
    }
    vs_sb_puts(b, r->nblocks ? "\n        ]}" : "]}");
  }
  vs_sb_puts(b, c->nregions ? "\n      ],\n" : "],\n");

  key(b, 6, "timeline");
  vs_sb_puts(b, "[");
  for (size_t i = 0; i < c->nsamples; i++) {
    const vs_dump_sample *s = &c->samples[i];
    vs_sb_puts(b, i ? ",\n        {\"t_ms\": " : "\n        {\"t_ms\": ");
    vs_sb_u64(b, s->t_ms);
    vs_sb_puts(b, ", \"live\": ");
    vs_sb_u64(b, s->live);
    vs_sb_puts(b, ", \"reserved\": ");
    vs_sb_u64(b, s->reserved);
    vs_sb_puts(b, ", \"largest_free\": ");
    vs_sb_u64(b, s->largest_free);
    vs_sb_puts(b, ", \"spilled\": ");   /* 1.1 */
    vs_sb_u64(b, s->spilled);
    vs_sb_puts(b, "}");
  }
  vs_sb_puts(b, c->nsamples ? "\n      ]\n" : "]\n");
  vs_sb_puts(b, "    }");
}

char *vs_dump_to_json(const vs_dump *d, size_t *len) {
  vs_sbuf b = {0};
  vs_sb_puts(&b, "{\n");
  key(&b, 2, "schema_version");
  vs_sb_printf(&b, "\"%u.%u\",\n", d->schema_major, d->schema_minor);
  key(&b, 2, "generator");
  vs_sb_puts(&b, "\"vramshim\",\n");
  key(&b, 2, "reason");
  vs_sb_json_str(&b, d->reason);
  vs_sb_puts(&b, ",\n");
  kv_u64(&b, 2, "time_unix_ms", d->time_unix_ms);
  key(&b, 2, "time_utc");
  vs_sb_puts(&b, "\"");
  iso_time(&b, d->time_unix_ms);
  vs_sb_puts(&b, "\",\n");
  key(&b, 2, "process");
  vs_sb_puts(&b, "{\"pid\": ");
  vs_sb_i64(&b, d->pid);
  vs_sb_puts(&b, ", \"exe\": ");
  vs_sb_json_str(&b, d->exe);
  vs_sb_puts(&b, "},\n");
  key(&b, 2, "tenant");
  vs_sb_json_str(&b, d->tenant);
  vs_sb_puts(&b, ",\n");
  key(&b, 2, "cards");
  vs_sb_puts(&b, "[\n");
  for (size_t i = 0; i < d->ncards; i++) {
    write_card(&b, &d->cards[i]);
    vs_sb_puts(&b, i + 1 < d->ncards ? ",\n" : "\n");
  }
  vs_sb_puts(&b, "  ]\n}\n");
  return vs_sb_take(&b, len);
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

/* Dump JSON: round trip, and bad input refused with a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_json.h"
#include "layout.h"

static void assert_same(const vs_dump *a, const vs_dump *b) {
  assert_int_equal(a->schema_major, b->schema_major);
  assert_int_equal(a->schema_minor, b->schema_minor);
  assert_int_equal(a->pid, b->pid);
  assert_string_equal(a->exe, b->exe);
  assert_string_equal(a->tenant, b->tenant);
  assert_string_equal(a->reason, b->reason);
  assert_int_equal(a->time_unix_ms, b->time_unix_ms);
  assert_int_equal(a->ncards, b->ncards);
  for (size_t i = 0; i < a->ncards; i++) {
    const vs_dump_card *x = &a->cards[i], *y = &b->cards[i];
    assert_int_equal(x->index, y->index);
    assert_string_equal(x->arena, y->arena);
    assert_int_equal(x->capacity, y->capacity);
    assert_int_equal(x->live_bytes, y->live_bytes);
    assert_int_equal(x->live_count, y->live_count);
    assert_int_equal(x->peak_live_bytes, y->peak_live_bytes);
    assert_int_equal(x->reserved_bytes, y->reserved_bytes);
    assert_int_equal(x->peak_reserved_bytes, y->peak_reserved_bytes);
    assert_int_equal(x->internal_waste, y->internal_waste);
    assert_int_equal(x->free_bytes, y->free_bytes);
    assert_int_equal(x->pending_bytes, y->pending_bytes);
    assert_int_equal(x->largest_free, y->largest_free);
    assert_true(x->external_fragmentation - y->external_fragmentation < 1e-6 &&
                y->external_fragmentation - x->external_fragmentation < 1e-6);
    assert_int_equal(x->requests, y->requests);
    assert_int_equal(x->served_from_cache, y->served_from_cache);
    assert_memory_equal(x->hist_count, y->hist_count, sizeof x->hist_count);
    assert_memory_equal(x->hist_bytes, y->hist_bytes, sizeof x->hist_bytes);
    assert_int_equal(x->ncalls, y->ncalls);
    for (size_t k = 0; k < x->ncalls; k++) {
      assert_string_equal(x->calls[k].name, y->calls[k].name);
      assert_int_equal(x->calls[k].count, y->calls[k].count);
    }
    assert_int_equal(x->nclasses, y->nclasses);
    assert_memory_equal(x->classes, y->classes, x->nclasses * sizeof *x->classes);
    assert_int_equal(x->tenant.present, y->tenant.present);
    assert_int_equal(x->tenant.reserve, y->tenant.reserve);
    assert_int_equal(x->tenant.limit, y->tenant.limit);
    assert_int_equal(x->tenant.usage, y->tenant.usage);
    assert_int_equal(x->tenant.spilled, y->tenant.spilled);
    assert_int_equal(x->tenant.spill_max, y->tenant.spill_max);
    assert_int_equal(x->spilled_bytes, y->spilled_bytes);
    assert_int_equal(x->peak_spilled_bytes, y->peak_spilled_bytes);
    assert_int_equal(x->spilled_count, y->spilled_count);
    assert_int_equal(x->pool_reserved_bytes, y->pool_reserved_bytes);
    assert_int_equal(x->graph_reserved_bytes, y->graph_reserved_bytes);
    assert_int_equal(x->nregions, y->nregions);
    for (size_t r = 0; r < x->nregions; r++) {
      assert_int_equal(x->regions[r].base, y->regions[r].base);
      assert_int_equal(x->regions[r].size, y->regions[r].size);
      assert_int_equal(x->regions[r].kind, y->regions[r].kind);
      assert_int_equal(x->regions[r].class_size, y->regions[r].class_size);
      assert_int_equal(x->regions[r].nblocks, y->regions[r].nblocks);
      /* field by field: the struct's padding is not part of the dump */
      for (size_t k = 0; k < x->regions[r].nblocks; k++) {
        assert_int_equal(x->regions[r].blocks[k].offset, y->regions[r].blocks[k].offset);
        assert_int_equal(x->regions[r].blocks[k].size, y->regions[r].blocks[k].size);
        assert_int_equal(x->regions[r].blocks[k].state, y->regions[r].blocks[k].state);
      }
    }
    assert_int_equal(x->nsamples, y->nsamples);
    assert_memory_equal(x->samples, y->samples, x->nsamples * sizeof *x->samples);
  }
}

static void test_round_trip(void **state) {
  (void)state;
  vs_dump d, e;
  layout_dump(&d, 30);
  /* Awkward strings survive: quotes, backslash, control and non-ASCII. */
  snprintf(d.exe, sizeof d.exe, "/opt/\"odd\"\\dir/\tserv\xc3\xa9r");
  vs_dump_card *c2 = vs_dump_add_card(&d, 3);   /* an arena = off card, tenant limit none */
  vs_dump_alloc al[] = {{0x7f0000000000ull, 4096}, {0x7f0000100000ull, 1 * MiB}};
  vs_dump_card_from_allocations(c2, al, 2);
  c2->tenant = (vs_dump_tenant_use){1, 0, VS_DUMP_UNLIMITED, 1 * MiB + 4096, 768 * MiB, 2048 * MiB, 300 * MiB};   /* 1.2: overhead */
  c2->spilled_bytes = 512 * MiB;   /* 1.1 fields survive the round trip */
  c2->peak_spilled_bytes = 768 * MiB;
  c2->spilled_count = 2;
  c2->pool_reserved_bytes = 40 * MiB;   /* 1.3 fields too */
  c2->graph_reserved_bytes = 6 * MiB;
  size_t len;
  char *text = vs_dump_to_json(&d, &len);
  assert_non_null(text);
  assert_int_equal(strlen(text), len);
  char err[256] = "";
  int rc = vs_dump_from_json(text, len, &e, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  assert_int_equal(rc, 0);
  assert_same(&d, &e);
  /* Written again, byte for byte the same: the JSON is normalised. */
  size_t len2;
  char *text2 = vs_dump_to_json(&e, &len2);
  assert_int_equal(len, len2);
  assert_memory_equal(text, text2, len);
  free(text2);
  free(text);
  vs_dump_free(&d);
  vs_dump_free(&e);
}

/* Every strict prefix of a valid dump is refused, with a message. */
static void test_truncated(void **state) {
  (void)state;
  vs_dump d, e;
  layout_dump(&d, 3);
  size_t len;
  char *text = vs_dump_to_json(&d, &len);
  /* Trailing whitespace is still a whole document; cut before it. */
  while (len && (text[len - 1] == '\n' || text[len - 1] == ' ')) len--;
  for (size_t n = 0; n < len; n++) {
    char err[256] = "";
    char *copy = malloc(n ? n : 1);   /* exact size: ASan catches any over-read */
    memcpy(copy, text, n);
    assert_int_equal(vs_dump_from_json(copy, n, &e, err, sizeof err), -1);
    assert_true(err[0] != 0);
    free(copy);
  }
  char err[256];
  assert_int_equal(vs_dump_from_json(text, len / 2, &e, err, sizeof err), -1);
  assert_non_null(strstr(err, "line "));
  free(text);
  vs_dump_free(&d);
}

/* Replaces the first occurrence of `from` in the sample with `to`, parses,
 * and expects a refusal whose message contains `want`. */
static void expect_refused(const char *from, const char *to, const char *want) {
  vs_dump d, e;
  layout_dump(&d, 2);
  size_t len;
  char *text = vs_dump_to_json(&d, &len);
  vs_dump_free(&d);
  char *at = strstr(text, from);
  if (!at) fail_msg("'%s' not in the sample", from);
  size_t nl = len - strlen(from) + strlen(to);
  char *bad = malloc(nl);
  size_t pre = (size_t)(at - text);
  memcpy(bad, text, pre);
  memcpy(bad + pre, to, strlen(to));
  memcpy(bad + pre + strlen(to), at + strlen(from), len - pre - strlen(from));
  char err[512] = "";
  int rc = vs_dump_from_json(bad, nl, &e, err, sizeof err);
  if (rc == 0) vs_dump_free(&e);
  if (rc != -1 || !strstr(err, want))
    fail_msg("'%s' -> '%s': rc %d, message '%s', wanted '%s'", from, to, rc, err, want);
  free(bad);
  free(text);
}

/* The version this build writes, as it stands in a dump. */
static const char *version_text(void) {
  static char v[64];
  snprintf(v, sizeof v, "\"schema_version\": \"%u.%u\"", VS_DUMP_SCHEMA_MAJOR, VS_DUMP_SCHEMA_MINOR);
  return v;
}

static void test_bad_documents(void **state) {
  (void)state;
  expect_refused(version_text(), "\"schema_version\": \"2.0\"", "not readable");
  expect_refused(version_text(), "\"schema_version\": 1", "expected string");
  expect_refused("\"spill_max\": null", "\"spill_max\": \"lots\"", "spill_max");
  expect_refused("\"live_bytes\": ", "\"live_bytes\": \"12\", \"x\": ", "cards[0].live_bytes");
  expect_refused("\"live_bytes\": ", "\"live_bytes\": -", "non-negative");
  expect_refused("\"live_bytes\": ", "\"live_bytes\": 1e400, \"y\": ", "integer");
  expect_refused("\"capacity\": ", "\"capacity\": 99999999999999999999999, \"z\": ", "64 bits");
  expect_refused("\"capacity\": ", "\"capacity\": 18446744073709551615, \"z\": ", "implausibly large");
  expect_refused("\"capacity\": ", "\"capacity\": 1.5, \"z\": ", "cards[0].capacity");
  expect_refused("\"live_count\": ", "\"live_count\": 1, \"live_count\": ", "duplicate key");
  expect_refused("\"kind\": \"chunk\"", "\"kind\": \"heap\"", "unknown region kind");
  expect_refused("\"state\": \"free\"", "\"state\": \"gone\"", "unknown block state");
  expect_refused("\"base\": \"0x10000000\"", "\"base\": 268435456", "cards[0].regions[0].base");
  expect_refused("\"base\": \"0x20000000\"", "\"base\": \"0x10900000\"", "overlap");
  expect_refused("{\"offset\": 0, \"size\": 8388608", "{\"offset\": 0, \"size\": 9388608", "overlaps");
  expect_refused("\"external_fragmentation\": ", "\"external_fragmentation\": 1.5, \"q\": ", "from 0 to 1");
  expect_refused("\"process\": {\"pid\": 4242", "\"process\": {\"pid\": true", "process.pid");
  expect_refused("\"cards\": [", "\"cards\": {\"a\": 1}, \"c2\": [", "cards");
  expect_refused("\"regions\": [", "\"regions\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "nesting");
  expect_refused("\"tenant\": \"llm\"", "\"tenant\": \"ll\\u0000m\"", "NUL");
  expect_refused("\"tenant\": \"llm\"", "\"tenant\": \"l\xff\"", "UTF-8");
  expect_refused("\"index\": 0", "\"index\": 5000", "implausibly");
  expect_refused("{\"log2\": 19", "{\"log2\": 48", "implausibly");
  expect_refused("\n}\n", "\n},\n", "after the end");
}

/* A 1.0 dump (before the spill fields) reads, with nothing spilled. */
static void test_older_minor_is_read(void **state) {
  (void)state;
  static const char old[] =
      "{\"schema_version\": \"1.0\", \"time_unix_ms\": 1, \"process\": {\"pid\": 1, \"exe\": \"x\"}, \"tenant\": \"t\",\n"
      " \"reason\": \"manual\", \"cards\": [{\"index\": 0, \"arena\": \"off\", \"capacity\": 0, \"live_bytes\": 0,\n"
      " \"live_count\": 0, \"peak_live_bytes\": 0, \"reserved_bytes\": 0, \"peak_reserved_bytes\": 0,\n"
      " \"internal_waste\": 0, \"free_bytes\": 0, \"pending_bytes\": 0, \"largest_free\": 0,\n"
      " \"external_fragmentation\": 0, \"driver_calls\": {}, \"free_histogram\": [], \"size_classes\": [],\n"
      " \"tenant\": {\"reserve\": 0, \"limit\": null, \"usage\": 0}, \"regions\": [],\n"
      " \"timeline\": [{\"t_ms\": 1, \"live\": 2, \"reserved\": 3, \"largest_free\": 0}]}]}\n";
  vs_dump e;
  char err[256] = "";
  int rc = vs_dump_from_json(old, strlen(old), &e, err, sizeof err);
  if (rc) fail_msg("%s", err);
  assert_int_equal(e.schema_minor, 0);
  assert_int_equal(e.cards[0].spilled_bytes, 0);
  assert_int_equal(e.cards[0].tenant.spilled, 0);
  assert_int_equal(e.cards[0].tenant.spill_max, 0);
  assert_int_equal(e.cards[0].samples[0].spilled, 0);
  vs_dump_free(&e);
}

static void test_newer_minor_is_read(void **state) {
  (void)state;
  vs_dump d, e;
  layout_dump(&d, 1);
  size_t len;
  char *text = vs_dump_to_json(&d, &len);
  vs_dump_free(&d);
  /* A dump of a later minor version (this build's + 1) with a field this
   * reader does not know. */
  char *v = strstr(text, version_text());
  assert_non_null(v);
  char later[64];
  snprintf(later, sizeof later, "\"schema_version\": \"%u.%u\"", VS_DUMP_SCHEMA_MAJOR, VS_DUMP_SCHEMA_MINOR + 1);
  assert_int_equal(strlen(later), strlen(version_text()));   /* one digit either way: patched in place */
  memcpy(v, later, strlen(later));
  char *t = malloc(len + 64);
  char *at = strstr(text, "\"cards\"");
  size_t pre = (size_t)(at - text);
  memcpy(t, text, pre);
  int n = sprintf(t + pre, "\"future_field\": {\"x\": [1, 2]}, ");
  memcpy(t + pre + (size_t)n, at, len - pre);
  char err[256];
  assert_int_equal(vs_dump_from_json(t, len + (size_t)n, &e, err, sizeof err), 0);
  assert_int_equal(e.schema_minor, VS_DUMP_SCHEMA_MINOR + 1);
  vs_dump_free(&e);
  free(t);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_older_minor_is_read),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_bad_documents),
      cmocka_unit_test(test_newer_minor_is_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

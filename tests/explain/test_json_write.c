/* The JSON writer (src/explain/json.h): the two layouts and the compact
 * form, escaping, and misuse refused (NULL) instead of broken JSON. Every
 * document it writes is read back with the strict parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "json.h"

/* The text, checked to parse strictly. */
static char *take_parsed(vs_jw *w) {
  size_t len;
  char *t = vs_jw_take(w, &len);
  assert_non_null(t);
  assert_int_equal(strlen(t), len);
  vs_json doc;
  char err[256];
  if (vs_json_parse(t, len, &doc, err, sizeof err)) fail_msg("not JSON (%s):\n%s", err, t);
  vs_json_free(&doc);
  return t;
}

static void layouts(void **state) {
  (void)state;
  vs_jw w;
  vs_jw_init(&w, 0);
  vs_jw_object(&w, VS_JSON_BLOCK);
  vs_jw_kstr(&w, "a", "x");
  vs_jw_key(&w, "list");
  vs_jw_array(&w, VS_JSON_BLOCK);
  vs_jw_object(&w, VS_JSON_INLINE);
  vs_jw_ku64(&w, "n", 1);
  vs_jw_ku64_or_null(&w, "limit", UINT64_MAX, UINT64_MAX);
  vs_jw_key(&w, "inner");
  vs_jw_array(&w, VS_JSON_BLOCK);
  vs_jw_i64(&w, -2);
  vs_jw_end(&w);
  vs_jw_end(&w);
  vs_jw_end(&w);
  vs_jw_key(&w, "empty");
  vs_jw_array(&w, VS_JSON_BLOCK);
  vs_jw_end(&w);
  vs_jw_key(&w, "flags");
  vs_jw_array(&w, VS_JSON_INLINE);
  vs_jw_bool(&w, 1);
  vs_jw_bool(&w, 0);
  vs_jw_null(&w);
  vs_jw_fixed(&w, 0.25, 4);
  vs_jw_hex(&w, 0x7f00);
  vs_jw_end(&w);
  vs_jw_end(&w);
  char *t = take_parsed(&w);
  assert_string_equal(t,
                      "{\n"
                      "  \"a\": \"x\",\n"
                      "  \"list\": [\n"
                      "    {\"n\": 1, \"limit\": null, \"inner\": [\n"
                      "      -2\n"
                      "    ]}\n"
                      "  ],\n"
                      "  \"empty\": [],\n"
                      "  \"flags\": [true, false, null, 0.2500, \"0x7f00\"]\n"
                      "}\n");
  free(t);
}

static void compact(void **state) {
  (void)state;
  vs_jw w;
  vs_jw_init(&w, 1);
  vs_jw_object(&w, VS_JSON_BLOCK);
  vs_jw_kstr(&w, "k", "v");
  vs_jw_key(&w, "o");
  vs_jw_object(&w, VS_JSON_INLINE);
  vs_jw_ku64(&w, "a", 1);
  vs_jw_ku64(&w, "b", 2);
  vs_jw_end(&w);
  vs_jw_end(&w);
  char *t = take_parsed(&w);
  assert_string_equal(t, "{\"k\":\"v\",\"o\":{\"a\":1,\"b\":2}}\n");
  free(t);
}

static void escapes(void **state) {
  (void)state;
  vs_jw w;
  vs_jw_init(&w, 0);
  vs_jw_object(&w, VS_JSON_INLINE);
  vs_jw_kstr(&w, "q\"\\", "tab\there\nnew \x01 \xff caf\xc3\xa9");
  vs_jw_key(&w, "f");
  vs_jw_strf(&w, "%016llx", 0x1234ull);
  vs_jw_end(&w);
  char *t = take_parsed(&w);
  assert_string_equal(t, "{\"q\\\"\\\\\": \"tab\\u0009here\\u000anew \\u0001 \\ufffd caf\xc3\xa9\", "
                         "\"f\": \"0000000000001234\"}\n");
  free(t);
}

/* Each misuse leaves the writer failed: no text, never half a document. */
static void misuse(void **state) {
  (void)state;
  vs_jw w;
  vs_jw_init(&w, 0);   /* a value in an object without its key */
  vs_jw_object(&w, VS_JSON_BLOCK);
  vs_jw_u64(&w, 1);
  vs_jw_end(&w);
  assert_null(vs_jw_take(&w, NULL));

  vs_jw_init(&w, 0);   /* a key in an array */
  vs_jw_array(&w, VS_JSON_BLOCK);
  vs_jw_key(&w, "k");
  vs_jw_end(&w);
  assert_null(vs_jw_take(&w, NULL));

  vs_jw_init(&w, 0);   /* a container left open */
  vs_jw_object(&w, VS_JSON_BLOCK);
  assert_null(vs_jw_take(&w, NULL));

  vs_jw_init(&w, 0);   /* a key without its value */
  vs_jw_object(&w, VS_JSON_BLOCK);
  vs_jw_key(&w, "k");
  vs_jw_end(&w);
  assert_null(vs_jw_take(&w, NULL));

  vs_jw_init(&w, 0);   /* two values at the top */
  vs_jw_u64(&w, 1);
  vs_jw_u64(&w, 2);
  assert_null(vs_jw_take(&w, NULL));

  vs_jw_init(&w, 0);   /* one end too many */
  vs_jw_array(&w, VS_JSON_INLINE);
  vs_jw_end(&w);
  vs_jw_end(&w);
  assert_null(vs_jw_take(&w, NULL));

  vs_jw_init(&w, 0);   /* nothing written */
  assert_null(vs_jw_take(&w, NULL));

  vs_jw_init(&w, 0);   /* deeper than the parser reads */
  for (int i = 0; i <= VS_JSON_MAX_DEPTH; i++) vs_jw_array(&w, VS_JSON_INLINE);
  for (int i = 0; i <= VS_JSON_MAX_DEPTH; i++) vs_jw_end(&w);
  assert_null(vs_jw_take(&w, NULL));

  vs_jw_init(&w, 0);   /* as deep as the parser reads: fine */
  for (int i = 0; i < VS_JSON_MAX_DEPTH; i++) vs_jw_array(&w, VS_JSON_INLINE);
  for (int i = 0; i < VS_JSON_MAX_DEPTH; i++) vs_jw_end(&w);
  free(take_parsed(&w));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(layouts), cmocka_unit_test(compact), cmocka_unit_test(escapes),
                                     cmocka_unit_test(misuse)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}

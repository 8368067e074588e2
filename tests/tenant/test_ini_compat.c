/* The Windows build's INI reader (src/tenant/ini_compat, compiled here
 * under the vs_compat_ names) against Debian's inih, which the Linux build
 * uses: for every example config of the repository and a set of odd
 * inputs, both must hand the same (section, name, value) calls to the
 * handler, in the same order, and return the same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vs_compat_ini_parse_stream(ini_reader reader, void *stream, ini_handler handler, void *user);
int vs_compat_ini_parse_string(const char *string, ini_handler handler, void *user);

struct calls {
  char text[1 << 16];
  size_t n;
  int count, refuse_at; /* the handler returns 0 at call refuse_at (1-based; 0: never) */
};

static int record(void *user, const char *section, const char *name, const char *value) {
  struct calls *c = user;
  int w = snprintf(c->text + c->n, sizeof c->text - c->n, "[%s] <%s> = <%s>\n", section, name, value);
  if (w > 0 && (size_t)w < sizeof c->text - c->n) c->n += (size_t)w;
  return ++c->count != c->refuse_at;
}

/* The config parser's way of feeding inih: one line at a time (fgets-like). */
struct lines {
  const char *p;
};
static char *line_reader(char *str, int num, void *stream) {
  struct lines *l = stream;
  if (!*l->p) return NULL;
  int i = 0;
  while (i < num - 1 && l->p[i]) {
    str[i] = l->p[i];
    if (l->p[i++] == '\n') break;
  }
  str[i] = 0;
  l->p += i;
  return str;
}

static int g_compared;

static void same(const char *what, const char *text) {
  static struct calls a, b;
  for (int refuse = 0; refuse <= 2; refuse++) {
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.refuse_at = b.refuse_at = refuse;
    int ra = ini_parse_string(text, record, &a), rb = vs_compat_ini_parse_string(text, record, &b);
    if (ra != rb || strcmp(a.text, b.text))
      fail_msg("%s (string, refusing call %d): inih returned %d with\n%s\nthe compat reader %d with\n%s", what, refuse,
               ra, a.text, rb, b.text);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.refuse_at = b.refuse_at = refuse;
    struct lines la = {text}, lb = {text};
    ra = ini_parse_stream(line_reader, &la, record, &a);
    rb = vs_compat_ini_parse_stream(line_reader, &lb, record, &b);
    if (ra != rb || strcmp(a.text, b.text))
      fail_msg("%s (stream, refusing call %d): inih returned %d with\n%s\nthe compat reader %d with\n%s", what, refuse,
               ra, a.text, rb, b.text);
  }
  g_compared++;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return strlen(buf) == n ? buf : NULL; /* no NUL bytes: both take C strings */
}

static void example_configs(void **state) {
  (void)state;
  DIR *d = opendir(VS_EXAMPLES);
  assert_non_null(d);
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", VS_EXAMPLES, e->d_name);
    char *text = slurp(path);
    if (!text) continue;
    same(path, text);
    files++;
  }
  closedir(d);
  print_message("compared %d files of %s\n", files, VS_EXAMPLES);
  assert_true(files >= 2);
}

static void odd_inputs(void **state) {
  (void)state;
  static const char *cases[] = {
      "",
      "\n\n",
      "key = value\n",
      "[global]\nledger_dir = /run/vramshim\n",
      "\xEF\xBB\xBF[card 0]\nheadroom = 1GiB\n",
      "; comment\n# comment\n[tenant a] ; trailing comment\nlimit = 1GiB ; why\nreserve=2GiB;no space\n",
      "[tenant a]\nmatch_exe = vllm\n  continued value\n\tand more\n",
      "[broken\nkey = v\n",
      "no delimiter here\nkey = v\n",
      "key : colon value\n",
      "k=\n=v\n = \n",
      "[a]\r\nx = 1\r\n[b]\r\ny = 2\r\n",
      "[a-very-long-section-name-that-is-longer-than-fifty-bytes-in-total]\nk = v\n",
      "[t]\na-very-long-key-name-that-is-longer-than-fifty-bytes-in-total-too = v\n",
      "[t]\nk = a line that is much longer than two hundred bytes: "
      "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
      "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789\nz = 1\n",
      "[]\nk = v\n",
      "[x]]\nk = v ; c ; d\n",
      "  [indented]\n  key = v\n",
      "k = v\n  ; an indented comment\n",
      "[t]\nk = \"quoted ; not a comment\"\n",
      "k==v\nk:=v\n",
      "[t]\nk = v\nno value line\n[u\nz = 2\n",
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char what[32];
    snprintf(what, sizeof what, "odd input %zu", i);
    same(what, cases[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(example_configs),
      cmocka_unit_test(odd_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Dump files: private directory, exclusive creation, no symlinks, rate
 * limit; the written file reads back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dump_file.h"
#include "dump_json.h"
#include "layout.h"

static char root[256];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/vs-dumpfile-test-XXXXXX");
  return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[640];
  snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", root, root);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_write_and_read_back(void **state) {
  (void)state;
  char dir[400], path[600], err[256];
  snprintf(dir, sizeof dir, "%s/a/b/dumps", root);   /* parents are created too */
  vs_dump d, e;
  layout_dump(&d, 5);
  assert_int_equal(vs_dump_write_file(&d, dir, 0, path, sizeof path, err, sizeof err), 0);
  struct stat st;
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_non_null(strstr(path, "/vramshim-4242-0-"));
  assert_non_null(strstr(path, ".json"));
  assert_int_equal(vs_dump_read_file(path, &e, err, sizeof err), 0);
  assert_int_equal(e.cards[0].largest_free, 32 * MiB);
  vs_dump_free(&e);
  /* Same pid, card and millisecond: a second name, never an overwrite. */
  char path2[600];
  assert_int_equal(vs_dump_write_file(&d, dir, 0, path2, sizeof path2, err, sizeof err), 0);
  assert_string_not_equal(path, path2);
  assert_int_equal(vs_dump_write_file(&d, dir, -1, path2, sizeof path2, err, sizeof err), 0);
  assert_non_null(strstr(path2, "-all-"));
  vs_dump_free(&d);
}

static void test_refuses_unsafe_dirs(void **state) {
  (void)state;
  char dir[400], link[400], path[600], err[256];
  vs_dump d;
  layout_dump(&d, 0);
  /* World-writable: refused, not silently used or chmod'ed. */
  snprintf(dir, sizeof dir, "%s/open", root);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(chmod(dir, 0777), 0);
  assert_int_equal(vs_dump_write_file(&d, dir, 0, path, sizeof path, err, sizeof err), -1);
  assert_non_null(strstr(err, "writable by group or others"));
  /* A symlink to a good directory: refused (not followed). */
  snprintf(dir, sizeof dir, "%s/good", root);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(link, sizeof link, "%s/link", root);
  assert_int_equal(symlink(dir, link), 0);
  assert_int_equal(vs_dump_write_file(&d, link, 0, path, sizeof path, err, sizeof err), -1);
  assert_non_null(strstr(err, "symlink"));
  /* A file where the directory should be. */
  snprintf(dir, sizeof dir, "%s/file", root);
  FILE *f = fopen(dir, "w");
  fclose(f);
  assert_int_equal(vs_dump_write_file(&d, dir, 0, path, sizeof path, err, sizeof err), -1);
  assert_int_equal(vs_dump_dir_prepare("", err, sizeof err), -1);
  vs_dump_free(&d);
}

static void test_write_logged(void **state) {
  (void)state;
  char dir[400], path[600];
  snprintf(dir, sizeof dir, "%s/logged", root);
  vs_dump d;
  layout_dump(&d, 0);
  assert_int_equal(vs_dump_write_logged(&d, dir, 0, "allocation of 2.00 GiB refused (quota)", path, sizeof path), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(chmod(dir, 0777), 0);
  assert_int_equal(vs_dump_write_logged(&d, dir, -1, "test", path, sizeof path), -1);
  vs_dump_free(&d);
}

static void test_ratelimit(void **state) {
  (void)state;
  vs_ratelimit rl = {0};
  assert_int_equal(vs_ratelimit_allow(&rl, 100000, VS_DUMP_AUTO_INTERVAL_MS), 1);
  assert_int_equal(vs_ratelimit_allow(&rl, 100001, VS_DUMP_AUTO_INTERVAL_MS), 0);
  assert_int_equal(vs_ratelimit_allow(&rl, 109999, VS_DUMP_AUTO_INTERVAL_MS), 0);
  assert_int_equal(vs_ratelimit_allow(&rl, 110000, VS_DUMP_AUTO_INTERVAL_MS), 1);
  assert_int_equal(vs_ratelimit_allow(&rl, 110000, VS_DUMP_AUTO_INTERVAL_MS), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_and_read_back),
      cmocka_unit_test(test_refuses_unsafe_dirs),
      cmocka_unit_test(test_write_logged),
      cmocka_unit_test(test_ratelimit),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}

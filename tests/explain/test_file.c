/* Dump files: private directory, exclusive creation, no symlinks, rate
 * limit; the written file reads back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
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

/* Files of dir whose names start with prefix. */
static int count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
  closedir(d);
  return n;
}

/* Issue 23: a shared sticky folder (as /var/tmp/vramshim, 1777) is never
 * one user's: each user writes in <dir>/<uid>, 0700. Before the fix: the
 * first user's process refused it ("writable by group or others"), or made
 * the default folder 0700 for itself, after which other users' dumps failed. */
static void test_shared_folder(void **state) {
  (void)state;
  char dir[400], sub[420], path[600], err[256];
  snprintf(dir, sizeof dir, "%s/shared", root);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(chmod(dir, 01777), 0);
  vs_dump d;
  layout_dump(&d, 0);
  if (vs_dump_write_file(&d, dir, 0, path, sizeof path, err, sizeof err)) fail_msg("%s", err);
  snprintf(sub, sizeof sub, "%s/%u/", dir, (unsigned)geteuid());
  assert_true(!strncmp(path, sub, strlen(sub)));
  struct stat st;
  sub[strlen(sub) - 1] = 0;
  assert_int_equal(lstat(sub, &st), 0);
  assert_true(S_ISDIR(st.st_mode) && st.st_uid == geteuid());
  assert_int_equal(st.st_mode & 07777, 0700);
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 07777, 01777);   /* the shared folder itself is left alone */
  /* A symlink planted as the user's folder is not followed. */
  char dir2[400], target[420], link[440];
  snprintf(dir2, sizeof dir2, "%s/shared2", root);
  assert_int_equal(mkdir(dir2, 0700), 0);
  assert_int_equal(chmod(dir2, 01777), 0);
  snprintf(target, sizeof target, "%s/elsewhere", root);
  assert_int_equal(mkdir(target, 0700), 0);
  snprintf(link, sizeof link, "%s/%u", dir2, (unsigned)geteuid());
  assert_int_equal(symlink(target, link), 0);
  assert_int_equal(vs_dump_write_file(&d, dir2, 0, path, sizeof path, err, sizeof err), -1);
  assert_non_null(strstr(err, "symlink"));
  assert_int_equal(count_files(target, "vramshim-"), 0);
  vs_dump_free(&d);
}

/* Issue 23: no partial file under a dump's name (written as .NAME.part,
 * renamed when complete), stale parts of killed writers removed, and a
 * folder keeps its VS_DUMP_FOLDER_KEEP newest dumps whichever processes
 * wrote them. Before the fix: a kill during a dump left an empty file, and
 * 30 processes left 497 files. */
static void test_folder_bounded(void **state) {
  (void)state;
  char dir[400], path[600], err[256], stale[700], fresh[700];
  snprintf(dir, sizeof dir, "%s/bounded", root);
  vs_dump d;
  layout_dump(&d, 0);
  uint64_t t0 = d.time_unix_ms;
  /* Parts of killed writers: one an hour old, one from this second. */
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(stale, sizeof stale, "%s/.vramshim-77-0-20000101T000000.000Z.json.part", dir);
  snprintf(fresh, sizeof fresh, "%s/.vramshim-78-0-29991231T235959.000Z.json.part", dir);
  assert_int_equal(close(open(stale, O_WRONLY | O_CREAT, 0600)), 0);
  assert_int_equal(close(open(fresh, O_WRONLY | O_CREAT, 0600)), 0);
  /* A file of the user's own, not a dump: never touched. */
  char mine[700];
  snprintf(mine, sizeof mine, "%s/vramshim-notes.txt", dir);
  assert_int_equal(close(open(mine, O_WRONLY | O_CREAT, 0600)), 0);
  const int n = VS_DUMP_FOLDER_KEEP + 10;
  for (int i = 0; i < n; i++) {
    d.pid = 1000 + i % 7;            /* several processes */
    d.time_unix_ms = t0 + 1000ull * i; /* each second a newer dump */
    if (vs_dump_write_file(&d, dir, 0, path, sizeof path, err, sizeof err)) fail_msg("%s", err);
    assert_null(strstr(path, ".part"));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > 0);
  }
  assert_int_equal(count_files(dir, "vramshim-") - 1, VS_DUMP_FOLDER_KEEP);
  assert_int_equal(access(mine, F_OK), 0);
  assert_int_equal(access(stale, F_OK), -1);
  assert_int_equal(access(fresh, F_OK), 0);
  assert_int_equal(count_files(dir, ".vramshim-"), 1);
  /* The newest stayed: the last one written is there. */
  assert_int_equal(access(path, F_OK), 0);
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
      cmocka_unit_test(test_shared_folder),
      cmocka_unit_test(test_folder_bounded),
      cmocka_unit_test(test_ratelimit),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}

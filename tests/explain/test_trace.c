/* Trace recorder: output parses as RMM CSV and equals the events, from
 * several threads; buffering; %p/%d; a forked child writes its own file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/vs-trace-test-XXXXXX");
  assert_non_null(mkdtemp(dir));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[640];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

typedef struct ev { long thread; double t; char action[20]; uint64_t ptr, size, stream; } ev;

/* Parses an RMM CSV file strictly; returns the number of events. */
static size_t parse(const char *path, ev *out, size_t max) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[256];
  assert_non_null(fgets(line, sizeof line, f));
  assert_string_equal(line, "Thread,Time,Action,Pointer,Size,Stream\n");
  size_t n = 0;
  while (fgets(line, sizeof line, f)) {
    assert_true(n < max);
    unsigned h, m, s, us;
    char act[20];
    unsigned long long ptr, size, stream;
    long th;
    int k = sscanf(line, "%ld,%u:%u:%u.%u,%19[a-z ],0x%llx,%llu,0x%llx\n", &th, &h, &m, &s, &us, act, &ptr, &size,
                   &stream);
    if (k != 9) fail_msg("unparsable line: %s", line);
    assert_true(m < 60 && s < 60 && us < 1000000);
    /* Microseconds are exactly six digits. */
    assert_non_null(strchr(line, '.'));
    assert_int_equal(strchr(line, '.')[7], ',');
    out[n] = (ev){th, h * 3600.0 + m * 60.0 + s + us / 1e6, "", ptr, size, stream};
    snprintf(out[n].action, sizeof out[n].action, "%s", act);
    n++;
  }
  fclose(f);
  return n;
}

static void test_events_round_trip(void **state) {
  (void)state;
  char pat[300], path[400], err[256];
  snprintf(pat, sizeof pat, "%s/trace-%%p-card%%d.csv", dir);
  vs_trace *t = vs_trace_create(pat, 2, err, sizeof err);
  assert_non_null(t);
  snprintf(path, sizeof path, "%s/trace-%ld-card2.csv", dir, (long)getpid());
  assert_string_equal(vs_trace_path(t), path);
  vs_trace_alloc(t, 0x7f0000000000ull, 1048576, 0);
  vs_trace_alloc_failed(t, 1ull << 40, 0x5555);
  vs_trace_free(t, 0x7f0000000000ull, 1048576, 0);
  /* Buffered: nothing is written before a flush. */
  struct stat st;
  assert_int_equal(stat(path, &st), -1);
  assert_int_equal(vs_trace_flush(t), 0);
  ev e[8];
  assert_int_equal(parse(path, e, 8), 3);
  assert_string_equal(e[0].action, "allocate");
  assert_int_equal(e[0].ptr, 0x7f0000000000ull);
  assert_int_equal(e[0].size, 1048576);
  assert_true(e[0].t == 0.0);
  assert_string_equal(e[1].action, "allocate failure");
  assert_int_equal(e[1].ptr, 0);
  assert_int_equal(e[1].size, 1ull << 40);
  assert_int_equal(e[1].stream, 0x5555);
  assert_string_equal(e[2].action, "free");
  assert_true(e[2].t >= e[1].t && e[1].t >= e[0].t);
  uint64_t rec, drop;
  vs_trace_counts(t, &rec, &drop);
  assert_int_equal(rec, 3);
  assert_int_equal(drop, 0);
  vs_trace_destroy(t);
}

#define THREADS 4
#define PER_THREAD 20000   /* enough to fill the buffer many times */

static void *worker(void *arg) {
  vs_trace *t = arg;
  uint64_t base = (uint64_t)(uintptr_t)pthread_self() << 8;
  for (uint64_t i = 0; i < PER_THREAD; i++) {
    vs_trace_alloc(t, base + i * 512, 512 + i, 0);
    vs_trace_free(t, base + i * 512, 512 + i, 0);
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  char pat[300], err[256];
  snprintf(pat, sizeof pat, "%s/mt-%%d.csv", dir);
  vs_trace *t = vs_trace_create(pat, 0, err, sizeof err);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, t);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  char path[400];
  snprintf(path, sizeof path, "%s", vs_trace_path(t));
  vs_trace_destroy(t);   /* flushes */
  size_t max = THREADS * PER_THREAD * 2;
  ev *e = malloc(max * sizeof *e);
  size_t n = parse(path, e, max);
  assert_int_equal(n, max);
  /* Per thread: every allocate is followed (later) by its free, in order,
   * and times never go backwards in the file. */
  for (size_t i = 1; i < n; i++) assert_true(e[i].t >= e[i - 1].t);
  uint64_t allocs = 0, frees = 0, bytes = 0;
  for (size_t i = 0; i < n; i++) {
    if (!strcmp(e[i].action, "allocate")) allocs++, bytes += e[i].size;
    else if (!strcmp(e[i].action, "free")) frees++, bytes -= e[i].size;
  }
  assert_int_equal(allocs, THREADS * PER_THREAD);
  assert_int_equal(frees, THREADS * PER_THREAD);
  assert_int_equal(bytes, 0);
  free(e);
}

static void test_fork_child_own_file(void **state) {
  (void)state;
  char pat[300], err[256];
  snprintf(pat, sizeof pat, "%s/fork-%%p.csv", dir);
  vs_trace *t = vs_trace_create(pat, 0, err, sizeof err);
  vs_trace_alloc(t, 0x1000, 100, 0);   /* buffered in the parent at fork */
  pid_t pid = fork();
  if (pid == 0) {
    vs_trace_alloc(t, 0x2000, 200, 0);
    vs_trace_flush(t);
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  vs_trace_flush(t);
  char pp[400], cp[400];
  snprintf(pp, sizeof pp, "%s/fork-%ld.csv", dir, (long)getpid());
  snprintf(cp, sizeof cp, "%s/fork-%ld.csv", dir, (long)pid);
  ev e[4];
  assert_int_equal(parse(pp, e, 4), 1);
  assert_int_equal(e[0].ptr, 0x1000);
  assert_int_equal(parse(cp, e, 4), 1);   /* only its own event: not the parent's */
  assert_int_equal(e[0].ptr, 0x2000);
  assert_true(e[0].t == 0.0);             /* its own time origin */
  vs_trace_destroy(t);
}

static void test_bad_pattern_and_symlink(void **state) {
  (void)state;
  char err[256] = "", pat[300], target[300];
  assert_null(vs_trace_create("/tmp/x-%q.csv", 0, err, sizeof err));
  assert_non_null(strstr(err, "bad path pattern"));
  assert_null(vs_trace_create("", 0, err, sizeof err));
  /* The file is never opened through a symlink: recording stops instead. */
  snprintf(pat, sizeof pat, "%s/link.csv", dir);
  snprintf(target, sizeof target, "%s/victim", dir);
  assert_int_equal(symlink(target, pat), 0);
  vs_trace *t = vs_trace_create(pat, 0, err, sizeof err);
  vs_trace_alloc(t, 1, 2, 3);
  assert_int_equal(vs_trace_flush(t), -1);
  vs_trace_alloc(t, 1, 2, 3);
  uint64_t rec, drop;
  vs_trace_counts(t, &rec, &drop);
  assert_int_equal(drop, 1);
  struct stat st;
  assert_int_equal(stat(target, &st), -1);
  vs_trace_destroy(t);
  char out[64];
  assert_int_equal(vs_trace_expand("a%%b-%p-%d", 12, 3, out, sizeof out), 0);
  assert_string_equal(out, "a%b-12-3");
  assert_int_equal(vs_trace_expand("abcdefgh%p", 123456, 0, out, 10), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_events_round_trip),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_fork_child_own_file),
      cmocka_unit_test(test_bad_pattern_and_symlink),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}

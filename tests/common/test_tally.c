/* Per-thread tallies (src/common/tally.h): exact sums across threads that
 * count, exit and are replaced; a reader never sees a count go backwards;
 * a fork child keeps the counts of threads that did not come along. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tally.h"

#define N 4
static _Atomic uint64_t g_retired[N];
static vs_tally g_t = VS_TALLY_INIT(N, g_retired);

static int list_len(vs_tally_block *b) {
  int n = 0;
  for (; b; b = b->next) n++;
  return n;
}

#define THREADS 4
#define ADDS 200000

static void *counter(void *arg) {
  long k = (long)arg;
  for (long i = 0; i < ADDS; i++) {
    vs_tally_add(&g_t, 0, 1);
    vs_tally_add(&g_t, 1, (uint64_t)k);
    /* counter 2 goes up here and down on the next thread's turn: sums to 0 */
    vs_tally_add(&g_t, 2, (k & 1) ? 1 : (uint64_t)-1);
  }
  return NULL;
}

/* Read while the counters run: counter 0 only rises. */
static _Atomic int g_stop;
static void *reader(void *arg) {
  uint64_t *backwards = arg, last = 0;
  while (!atomic_load(&g_stop)) {
    uint64_t v = vs_tally_sum(&g_t, 0);
    if (v < last) (*backwards)++;
    last = v;
  }
  return NULL;
}

static void exact_across_threads(void **state) {
  (void)state;
  vs_tally_reset(&g_t);
  uint64_t backwards = 0;
  pthread_t r, th[THREADS];
  atomic_store(&g_stop, 0);
  assert_int_equal(pthread_create(&r, NULL, reader, &backwards), 0);
  /* two waves, so the second reuses the first's blocks */
  for (int wave = 0; wave < 2; wave++) {
    for (long k = 0; k < THREADS; k++) assert_int_equal(pthread_create(&th[k], NULL, counter, (void *)k), 0);
    for (int k = 0; k < THREADS; k++) pthread_join(th[k], NULL);
    /* every counting thread has exited: its block is spare, its counts
     * retired; a thread starting after another's exit took that block */
    pthread_mutex_lock(&g_t.mu);
    int spare = list_len(g_t.spare), live = list_len(g_t.blocks);
    pthread_mutex_unlock(&g_t.mu);
    assert_in_range(spare, 1, THREADS);
    assert_int_equal(live, 0);
  }
  atomic_store(&g_stop, 1);
  pthread_join(r, NULL);
  uint64_t sums[3];
  vs_tally_sums(&g_t, 0, 3, sums);
  assert_int_equal(sums[0], 2ull * THREADS * ADDS);
  assert_int_equal(sums[1], 2ull * ADDS * (0 + 1 + 2 + 3));
  assert_int_equal(sums[2], 0);
  assert_int_equal(backwards, 0);
}

static void reset_and_own_block(void **state) {
  (void)state;
  vs_tally_add(&g_t, 3, 7);
  vs_tally_add(&g_t, 3, 5);
  assert_int_equal(vs_tally_sum(&g_t, 3), 12);
  vs_tally_reset(&g_t);
  uint64_t sums[N];
  vs_tally_sums(&g_t, 0, N, sums);
  for (int i = 0; i < N; i++) assert_int_equal(sums[i], 0);
  vs_tally_add(&g_t, 3, 1);
  assert_int_equal(vs_tally_sum(&g_t, 3), 1);
}

/* A thread that counted and is still running when the process forks: the
 * child has no such thread, and keeps its count. */
static pthread_barrier_t g_counted, g_forked;
static void *counts_and_waits(void *arg) {
  (void)arg;
  vs_tally_add(&g_t, 0, 10);
  pthread_barrier_wait(&g_counted);
  pthread_barrier_wait(&g_forked);
  return NULL;
}

static void fork_keeps_counts(void **state) {
  (void)state;
  vs_tally_reset(&g_t);
  vs_tally_add(&g_t, 0, 1);   /* this thread's block */
  pthread_barrier_init(&g_counted, NULL, 2);
  pthread_barrier_init(&g_forked, NULL, 2);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, counts_and_waits, NULL), 0);
  pthread_barrier_wait(&g_counted);
  vs_tally_atfork_prepare();
  pid_t pid = fork();
  if (pid == 0) {
    vs_tally_atfork_child();
    int ok = vs_tally_sum(&g_t, 0) == 11 && list_len(g_t.blocks) == 1 && g_t.blocks == vs_tally_mine_[g_t.slot];
    vs_tally_add(&g_t, 0, 1);
    ok = ok && vs_tally_sum(&g_t, 0) == 12;
    _exit(ok ? 0 : 1);
  }
  vs_tally_atfork_parent();
  assert_true(pid > 0);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  pthread_barrier_wait(&g_forked);
  pthread_join(th, NULL);
  assert_int_equal(vs_tally_sum(&g_t, 0), 11);
}

int main(int argc, char **argv) {
  /* The fork case alone: ThreadSanitizer does not follow a threaded fork. */
  if (argc > 1 && argv[1][0] == 'f') {
    const struct CMUnitTest tests[] = {cmocka_unit_test(fork_keeps_counts)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(exact_across_threads),
      cmocka_unit_test(reset_and_own_block),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

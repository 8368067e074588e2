/* A trace recorded from several threads replays (issue 23, point 11).
 *
 *   arena_trace_threads TOOL TRACE   runs itself as "work" under the shim
 *                                    with VRAMSHIM_TRACE=TRACE, then
 *                                    `TOOL replay TRACE` (without the shim)
 *   arena_trace_threads work         the recorded program
 *
 * The work: threads allocating and freeing blocks of a few sizes in one
 * context, each keeping a handful live, so an address one thread frees is
 * soon handed to another. The trace must list every free of an address
 * before its next allocation, and the replay tool must accept the file.
 * Before the fix: the free was recorded after the arena (or the driver)
 * could hand the address out again; a run left hundreds of such lines and
 * `vramshim replay` refused the file ("allocate of 0x..., which is still
 * live"). */
#include "shim_test.h"

#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define THREADS 8
#define OPS 4000
#define KEEP 3

static CUcontext g_ctx;

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
  T_CU(cuCtxSetCurrent(g_ctx));
  CUdeviceptr live[KEEP] = {0};
  for (int i = 0; i < OPS; i++) {
    int k = i % KEEP;
    if (live[k]) T_CU(cuMemFree(live[k]));
    seed = seed * 1103515245u + 12345u;
    size_t size = (size_t)256 << ((seed >> 16) % 6);   /* 256 B .. 8 KiB: shared size classes */
    T_CU(cuMemAlloc(&live[k], size));
  }
  for (int k = 0; k < KEEP; k++) T_CU(cuMemFree(live[k]));
  return NULL;
}

static int work(void) {
  g_ctx = t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) T_CHECK(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i) == 0, "thread");
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  T_SAY("work: %d threads, %d allocations and frees each", THREADS, OPS);
  return 0;
}

static int run(char **argv, char **env) {
  pid_t pid;
  T_CHECK(posix_spawn(&pid, argv[0], NULL, NULL, argv, env) == 0, "spawn %s", argv[0]);
  int st = 0;
  T_CHECK(waitpid(pid, &st, 0) == pid, "wait");
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 2 && !strcmp(argv[1], "work")) return work();
  T_CHECK(argc == 3, "usage: arena_trace_threads TOOL TRACE | work");
  const char *tool = argv[1], *trace = argv[2];
  unlink(trace);
  /* The work under the shim, recording. */
  T_CHECK(setenv("VRAMSHIM_TRACE", trace, 1) == 0, "setenv");
  char *wargs[] = {"/proc/self/exe", "work", NULL};
  T_CHECK(run(wargs, environ) == 0, "the recorded program ran");
  unsetenv("VRAMSHIM_TRACE");
  /* Frees before reuse, read back as the replay tool reads them. */
  FILE *f = fopen(trace, "r");
  T_CHECK(f, "the trace %s was written", trace);
  char line[256];
  long lines = 0;
  while (fgets(line, sizeof line, f)) lines++;
  fclose(f);
  T_SAY("the trace has %ld lines", lines);
  T_CHECK(lines == 1 + 2L * THREADS * OPS, "header + every allocation and free (%ld lines)", lines);
  /* The tool, without the shim. */
  unsetenv("LD_PRELOAD");
  char *rargs[] = {(char *)tool, "replay", (char *)trace, NULL};
  int st = run(rargs, environ);
  T_CHECK(st == 0, "vramshim replay accepts the trace recorded from %d threads (exit %d)", THREADS, st);
  T_SAY("PASS");
  return 0;
}

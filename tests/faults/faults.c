/* Fault injection (issue 10): real processes, each preloaded with
 * libvramshim.so over the simulated driver, sharing one card's ledger.
 *
 *   faults_prog case NAME WORKDIR TOOL [ARG]   the orchestrator (cases below)
 *   faults_prog WORKER ARGS...                 a worker (see main)
 *
 * Each case says what it checks and what it did before the fix. */
#include "tenant_proc.h"
#include "tp_json.h"

#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stddef.h>

#include "ledger.h"
#include "ledger_lock.h"
#include "ledger_shm.h"
#include "vramsim.h"

static const char *g_tool;

/* ---- workers ------------------------------------------------------------------ */
static void hold_until_term(void) {
  while (tp_wait_signal() != SIGTERM) {
  }
  exit(0);
}

static int w_hold(int argc, char **argv) {
  tp_cuda_up();
  for (int i = 0; i < argc; i++) {
    CUdeviceptr p;
    CUresult r = cuMemAlloc(&p, strtoull(argv[i], NULL, 10) * MiB);
    CHECK(r == CUDA_SUCCESS, "hold: cuMemAlloc(%s MiB) = %d", argv[i], (int)r);
  }
  SAY("holding");
  hold_until_term();
  return 0;
}

static int w_try(int argc, char **argv) {
  CHECK(argc >= 2, "try MIB ok|oom");
  tp_cuda_up();
  CUdeviceptr p;
  CUresult r = cuMemAlloc(&p, strtoull(argv[0], NULL, 10) * MiB);
  printf("result=%d\n", (int)r);
  CHECK(!strcmp(argv[1], "ok") ? r == CUDA_SUCCESS : r == CUDA_ERROR_OUT_OF_MEMORY, "try %s MiB: %d", argv[0],
        (int)r);
  return 0;
}

/* rawclone MIB: holds MIB, then makes a child with a bare clone(2) (no
 * CLONE_VM, so no fork handlers ran in it, as a sandbox or a language
 * runtime may) that returns through exit(): its atexit handlers and
 * destructors run over a copy of our state. Then holds, making no CUDA call
 * (a call would let the shim see and mend what the child did). */
static int w_rawclone(int argc, char **argv) {
  CHECK(argc == 1, "rawclone MIB");
  tp_cuda_up();
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, strtoull(argv[0], NULL, 10) * MiB) == CUDA_SUCCESS, "rawclone: cuMemAlloc");
  fflush(NULL);   /* the child's exit flushes its copy of our buffers */
  pid_t c = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
  CHECK(c >= 0, "clone: %s", strerror(errno));
  if (c == 0) exit(0);
  int st;
  CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the cloned child exits 0");
  SAY("cloned child exited");
  hold_until_term();
  return 0;
}

/* oversize PRE_MIB MIB at-once|bounded: holds PRE_MIB, asks MIB (refused),
 * and checks that the process holds on the card no more than before the
 * request; with at-once, that it made no driver call to grow (cuMemCreate,
 * cuMemAlloc). Then holds until SIGTERM. */
static int w_oversize(int argc, char **argv) {
  CHECK(argc == 3, "oversize PRE_MIB MIB at-once|bounded");
  tp_cuda_up();
  CUdeviceptr p, q;
  uint64_t pre = strtoull(argv[0], NULL, 10) * MiB, big = strtoull(argv[1], NULL, 10) * MiB;
  if (pre) CHECK(cuMemAlloc(&p, pre) == CUDA_SUCCESS, "pre-allocation");
  uint64_t used0 = vramsim_card_used(0), creates0 = vramsim_calls("cuMemCreate"),
           allocs0 = vramsim_calls("cuMemAlloc_v2");
  CUresult r = cuMemAlloc(&q, big);
  uint64_t used1 = vramsim_card_used(0), creates1 = vramsim_calls("cuMemCreate"),
           allocs1 = vramsim_calls("cuMemAlloc_v2");
  printf("result=%d used_before=%llu used_after=%llu cuMemCreate=%llu cuMemAlloc=%llu\n", (int)r,
         (unsigned long long)used0, (unsigned long long)used1, (unsigned long long)(creates1 - creates0),
         (unsigned long long)(allocs1 - allocs0));
  fflush(stdout);
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "the oversized request is refused (%d)", (int)r);
  CHECK(used1 <= used0, "after the refusal the card holds %llu MiB, before %llu MiB: the process kept what it grew",
        (unsigned long long)(used1 / MiB), (unsigned long long)(used0 / MiB));
  if (!strcmp(argv[2], "at-once"))
    CHECK(creates1 == creates0 && allocs1 <= allocs0 + 1, "no growth for a request that can never fit "
          "(%llu cuMemCreate, %llu cuMemAlloc)", (unsigned long long)(creates1 - creates0),
          (unsigned long long)(allocs1 - allocs0));
  SAY("holding");
  hold_until_term();
  return 0;
}

/* churn HOLD_MIB: holds HOLD_MIB, then allocates and frees 2 MiB blocks
 * without pause (load on the ledger) until SIGTERM. */
static int w_churn(int argc, char **argv) {
  CHECK(argc == 1, "churn HOLD_MIB");
  tp_cuda_up();
  CUdeviceptr p, q;
  CHECK(cuMemAlloc(&p, strtoull(argv[0], NULL, 10) * MiB) == CUDA_SUCCESS, "churn: hold");
  SAY("holding");
  for (unsigned i = 0;; i++) {
    sigset_t pend;
    sigpending(&pend);
    if (sigismember(&pend, SIGTERM)) exit(0);
    CUresult r = cuMemAlloc(&q, (uint64_t)(1 + i % 8) * 2 * MiB);
    if (r == CUDA_SUCCESS) CHECK(cuMemFree(q) == CUDA_SUCCESS, "churn: free");
    if (i % 64 == 0) {
      usleep(200);
    }
  }
}

/* traced N: N allocations and frees (recorded with VRAMSHIM_TRACE), then
 * "done" and hold until killed. */
static int w_traced(int argc, char **argv) {
  CHECK(argc == 1, "traced N");
  tp_cuda_up();
  int n = atoi(argv[0]);
  for (int i = 0; i < n; i++) {
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, (uint64_t)(1 + i % 4) * MiB) == CUDA_SUCCESS, "alloc");
    CHECK(cuMemFree(p) == CUDA_SUCCESS, "free");
  }
  SAY("done");
  hold_until_term();
  return 0;
}

/* forkstorm N MIB: forks N children that each start CUDA and take MIB
 * (their own ledger slots), kills them all with SIGKILL once all hold,
 * and exits at once (issue 23: the dead go with the last process). */
static int w_forkstorm(int argc, char **argv) {
  CHECK(argc == 2, "forkstorm N MIB");
  tp_cuda_up();
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, 8 * MiB) == CUDA_SUCCESS, "parent alloc");
  int n = atoi(argv[0]);
  uint64_t size = strtoull(argv[1], NULL, 10) * MiB;
  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  pid_t kids[64];
  CHECK(n > 0 && n <= 64, "1..64 children");
  fflush(stdout);
  for (int i = 0; i < n; i++) {
    kids[i] = fork();
    CHECK(kids[i] >= 0, "fork");
    if (kids[i] == 0) {
      tp_cuda_up();   /* CUDA does not survive fork: the child starts its own */
      CUdeviceptr q;
      char ok = cuMemAlloc(&q, size) == CUDA_SUCCESS ? 'y' : 'n';
      if (write(fds[1], &ok, 1) != 1) _exit(2);
      for (;;) pause();
    }
  }
  close(fds[1]);   /* a child that dies before answering ends the read */
  for (int i = 0; i < n; i++) {
    char c = 0;
    CHECK(read(fds[0], &c, 1) == 1 && c == 'y', "child %d holds its memory", i);
  }
  for (int i = 0; i < n; i++) kill(kids[i], SIGKILL);
  for (int i = 0; i < n; i++) waitpid(kids[i], NULL, 0);
  SAY("children killed");
  return 0;
}

/* idle N MIB: keeps 1 MiB live, says "ready", and on SIGUSR1 allocates N
 * blocks of MIB, frees them all, says "freed" and goes idle (no call)
 * until SIGTERM. */
static int w_idle(int argc, char **argv) {
  CHECK(argc == 2, "idle N MIB");
  tp_cuda_up();
  CUdeviceptr keep, p[64];
  CHECK(cuMemAlloc(&keep, MiB) == CUDA_SUCCESS, "idle: the live MiB");
  SAY("ready");
  CHECK(tp_wait_signal() == SIGUSR1, "idle: go");
  int n = atoi(argv[0]);
  CHECK(n > 0 && n <= 64, "1..64 blocks");
  for (int i = 0; i < n; i++)
    CHECK(cuMemAlloc(&p[i], strtoull(argv[1], NULL, 10) * MiB) == CUDA_SUCCESS, "idle: block %d", i);
  for (int i = 0; i < n; i++) CHECK(cuMemFree(p[i]) == CUDA_SUCCESS, "idle: free %d", i);
  SAY("freed");
  hold_until_term();
  return 0;
}

/* cache MIB: allocates MIB in 64 MiB blocks, frees them all (its arena
 * keeps them cached), says "cached" and goes idle until SIGTERM. */
static int w_cache(int argc, char **argv) {
  CHECK(argc == 1, "cache MIB");
  tp_cuda_up();
  CUdeviceptr p[64];
  int n = (int)(strtoull(argv[0], NULL, 10) / 64);
  CHECK(n > 0 && n <= 64, "64 MiB .. 4 GiB");
  for (int i = 0; i < n; i++) CHECK(cuMemAlloc(&p[i], 64 * MiB) == CUDA_SUCCESS, "cache: block %d", i);
  for (int i = 0; i < n; i++) CHECK(cuMemFree(p[i]) == CUDA_SUCCESS, "cache: free %d", i);
  SAY("cached");
  hold_until_term();
  return 0;
}

/* trydev MIB: cuMemAlloc(MIB) must succeed with device memory (not a
 * spilled block: that is host memory to the driver). */
static int w_trydev(int argc, char **argv) {
  CHECK(argc == 1, "trydev MIB");
  tp_cuda_up();
  CUdeviceptr p;
  CUresult r = cuMemAlloc(&p, strtoull(argv[0], NULL, 10) * MiB);
  CHECK(r == CUDA_SUCCESS, "trydev: cuMemAlloc(%s MiB) = %d", argv[0], (int)r);
  unsigned type = 0;
  CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CUDA_SUCCESS, "trydev: memory type");
  CHECK(type == CU_MEMORYTYPE_DEVICE, "trydev: %s MiB served from %s memory", argv[0],
        type == CU_MEMORYTYPE_HOST ? "host (spilled)" : "other");
  return 0;
}

/* pitch MIB: cuMemAllocPitch of MIB rows of 1 MiB (a request the driver
 * serves in every arena mode) must succeed. */
static int w_pitch(int argc, char **argv) {
  CHECK(argc == 1, "pitch MIB");
  tp_cuda_up();
  CUdeviceptr p;
  size_t pitch = 0;
  CUresult r = cuMemAllocPitch(&p, &pitch, MiB, strtoull(argv[0], NULL, 10), 4);
  CHECK(r == CUDA_SUCCESS, "pitch: cuMemAllocPitch(1 MiB x %s) = %d", argv[0], (int)r);
  return 0;
}

/* poolalloc MIB: cuMemAllocFromPoolAsync of MIB from a pool of its own
 * on card 0 (the driver's pool, never the arena's), then a sync: it must
 * be served. */
static int w_poolalloc(int argc, char **argv) {
  CHECK(argc == 1, "poolalloc MIB");
  tp_cuda_up();
  CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                          .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  CUmemoryPool pool;
  CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS, "poolalloc: cuMemPoolCreate");
  CUdeviceptr p;
  CUresult r = cuMemAllocFromPoolAsync(&p, strtoull(argv[0], NULL, 10) * MiB, pool, NULL);
  CHECK(r == CUDA_SUCCESS, "poolalloc: cuMemAllocFromPoolAsync(%s MiB) = %d", argv[0], (int)r);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS, "poolalloc: sync");
  return 0;
}

/* viewfree MIB: polls cuMemGetInfo (every 20 ms, at most 3 s: another
 * process publishes its cache from its background thread) until free is
 * at least MIB; prints what it saw, and fails when it never was. */
static int w_viewfree(int argc, char **argv) {
  CHECK(argc == 1, "viewfree MIB");
  tp_cuda_up();
  uint64_t want = strtoull(argv[0], NULL, 10) * MiB, t0 = tp_now_ns();
  size_t f = 0, t = 0;
  for (;;) {
    CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS, "viewfree: cuMemGetInfo");
    if (f >= want || tp_now_ns() - t0 > 3000000000ull) break;
    struct timespec nap = {0, 20000000};
    nanosleep(&nap, NULL);
  }
  printf("free=%llu total=%llu\n", (unsigned long long)(f / MiB), (unsigned long long)(t / MiB));
  CHECK(f >= want, "the view's free memory: %llu MiB, at least %s MiB expected", (unsigned long long)(f / MiB),
        argv[0]);
  return 0;
}

/* ---- cases ---------------------------------------------------------------------- */
static vs_ledger_snapshot g_snap __attribute__((unused));

/* Workers: tp_spawn's, killed when the orchestrator exits unless reaped
 * (a failed CHECK must not leave workers holding the simulated card, and a
 * reaped worker's pid may be another process's by then). */

static int wait_line(const char *file, const char *needle, int timeout_ms) {
  for (int t = 0; t < timeout_ms; t += 10) {
    char *s = tp_read(file);
    int found = strstr(s, needle) != NULL;
    free(s);
    if (found) return 0;
    tp_sleep_ms(10);
  }
  return -1;
}

static void stop(pid_t p) {
  kill(p, SIGTERM);
  tp_wait(p);
}

/* (1) Hoarding after a refusal. A request larger than the card, and one
 * larger than the tenant's limit, fail at once without a driver call; a
 * request that fits the card but not next to a neighbour grows, is
 * refused, and gives back what it grew: a neighbour then gets the memory.
 * Before the fix: the 5 GiB request on the 4 GiB card made ~2,000
 * cuMemCreate calls (VMM) and kept 4 GiB mapped; the neighbour's 1 GiB
 * request then failed with OUT_OF_MEMORY. */
static int case_hoard(const char *mode) {
  char global[64];
  snprintf(global, sizeof global, "arena = %s\n", mode);
  tp_config(global, "[tenant small]\nlimit = 1GiB\n[tenant big]\n[tenant n]\n");
  const char *a1[] = {"oversize", "64", "5120", "at-once", NULL};
  pid_t a = tp_spawn("card", "big", NULL, a1);
  CHECK(wait_line("card.out", "holding", 20000) == 0, "larger than the card: refused at once (card.err)");
  stop(a);
  const char *a2[] = {"oversize", "64", "2048", "at-once", NULL};
  pid_t b = tp_spawn("limit", "small", NULL, a2);
  CHECK(wait_line("limit.out", "holding", 20000) == 0, "larger than the limit: refused at once (limit.err)");
  stop(b);
  char *err = tp_read("limit.err");
  CHECK(strstr(err, "tenant 'small' on card 0: refused 2.00 GiB"), "the refusal is logged: %s", err);
  free(err);
  /* A neighbour holds 2 GiB; 3 GiB fits the card but not next to it. */
  const char *hn[] = {"hold", "2048", NULL};
  pid_t n = tp_spawn("neighbour", "n", NULL, hn);
  CHECK(wait_line("neighbour.out", "holding", 20000) == 0, "the neighbour holds 2 GiB");
  const char *a3[] = {"oversize", "64", "3072", "bounded", NULL};
  pid_t c = tp_spawn("grown", "big", NULL, a3);
  CHECK(wait_line("grown.out", "holding", 20000) == 0, "a refused growth is given back (grown.err)");
  const char *t1[] = {"try", "1536", "ok", NULL};
  pid_t d = tp_spawn("after", "n", NULL, t1);
  CHECK(tp_wait(d) == 0, "a neighbour gets 1.5 GiB after the refusal (after.err)");
  char *out = tp_read("card.out");
  SAY("%s: larger than the card: %s", mode, out);
  free(out);
  out = tp_read("grown.out");
  SAY("%s: refused after growing: %s", mode, out);
  free(out);
  stop(c);
  stop(n);
  return 0;
}

/* `vramshim status` of the test's ledger dir into FILE (in the workdir); its text, malloc'd. */
static char *status_to(const char *file, const char *opts) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s status %s --ledger-dir %s > %s 2>&1", g_tool, opts, tp_path("ledger"), tp_path(file));
  int rc = system(cmd);
  (void)rc;
  return tp_read(file);
}

/* (2) A reservation holds while a live process runs under a config that
 * has it, and ends with the last such process; status says where it comes
 * from. Before the fix: after the llm process exited, under a config
 * without llm, 3 GiB on the 4 GiB card stayed refused (llm's 2 GiB still
 * reserved) until the ledger was deleted. */
static int case_reserve(void) {
  tp_config("", "[tenant llm]\nreserve = 2GiB\n[tenant x]\n");
  const char *h[] = {"hold", "64", NULL};
  pid_t a = tp_spawn("llm", "llm", NULL, h);
  CHECK(wait_line("llm.out", "holding", 20000) == 0, "llm holds 64 MiB");
  char *st = status_to("status1.txt", "");
  char want[128];
  snprintf(want, sizeof want, "reservation of llm (2.00 GiB) held by the config of 1 live process: pid %d", (int)a);
  CHECK(strstr(st, want), "status names the reservation's process: %s", st);
  free(st);
  tp_config("", "[tenant x]\n");   /* the new config has no llm */
  const char *t1[] = {"try", "3072", "oom", NULL};
  CHECK(tp_wait(tp_spawn("during", "x", NULL, t1)) == 0, "while llm runs its reservation holds (during.err)");
  stop(a);
  const char *t2[] = {"try", "3072", "ok", NULL};
  CHECK(tp_wait(tp_spawn("after", "x", NULL, t2)) == 0, "the reservation ended with its last process (after.err)");
  /* JSON: parsed; no tenant on any card reserves memory or names a holder. */
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s status --json --ledger-dir %s > %s 2> %s", g_tool, tp_path("ledger"),
           tp_path("status2.json"), tp_path("status2.err"));
  CHECK(system(cmd) == 0, "%s", cmd);
  st = tp_read("status2.json");
  vs_json doc;
  CHECK(tj_parse(st, &doc, "status --json") == 0, "status --json parses");
  const vs_json *cards = tj_at(&doc, "cards");
  int tenants = 0, left = 0;
  for (size_t c = 0; cards && cards->type == VS_JSON_ARRAY && c < cards->n; c++) {
    const vs_json *ts = tj_at(&cards->items[c], "tenants");
    for (size_t t = 0; ts && ts->type == VS_JSON_ARRAY && t < ts->n; t++) {
      const vs_json *held = tj_at(&ts->items[t], "reserve_held_by");
      tenants++;
      left += !tj_u64_is(&ts->items[t], "reserve", 0) || !held || held->type != VS_JSON_ARRAY || held->n != 0;
    }
  }
  CHECK(tenants > 0 && left == 0, "status shows no reservation left (%d of %d tenants reserve): %s", left, tenants, st);
  vs_json_free(&doc);
  free(st);
  SAY("llm's 2 GiB reservation ended with its process; 3 GiB admitted under the new config");
  return 0;
}

/* The path of card 0's ledger file in the test's ledger dir (static). */
static const char *ledger_file(void) {
  static char path[1024];
  char ids[4][VS_NAME_MAX], err[VS_ERR_MAX], name[VS_NAME_MAX + 16];
  CHECK(vs_ledger_list(tp_path("ledger"), ids, 4, err, sizeof err) == 1, "one ledger file");
  CHECK(vs_ledger_file_name(ids[0], name, sizeof name) == 0, "name");
  snprintf(path, sizeof path, "%s/%s", tp_path("ledger"), name);
  return path;
}

/* Polls the ledger until tenants a and b each count at least 1 GiB. */
static int both_counted(int timeout_ms) {
  for (int t = 0; t < timeout_ms; t += 20) {
    if (tp_snapshot(&g_snap) == 0) {
      const vs_snap_tenant *a = tp_tenant(&g_snap, "a"), *b = tp_tenant(&g_snap, "b");
      /* At least what each holds, and not more than a churning 1 GiB
       * process can (a damaged file would show anything). */
      if (a && b && a->used >= GiB && b->used >= GiB && a->used <= GiB + 256 * MiB && b->used <= GiB + 256 * MiB)
        return 0;
    }
    tp_sleep_ms(20);
  }
  return -1;
}

/* (3, 4) The ledger file truncated, deleted, overwritten in place or
 * replaced while processes use it (one churning, one idle): no process
 * crashes, both carry their usage into the ledger now at the path (one
 * "re-attached" line each), and admission still counts them.
 * Before the fix: truncate killed both with SIGBUS (exit 135); after a
 * delete or a replacement the next process started an empty ledger and
 * was admitted 1.5 GiB next to b's 2 GiB reservation and a's 1 GiB; an
 * overwritten header was re-initialised silently by the next process. */
static int case_ledger(const char *mode) {
  tp_config("", "[tenant a]\n[tenant b]\nreserve = 2GiB\n[tenant c]\n");
  const char *ca[] = {"churn", "1024", NULL}, *hb[] = {"hold", "1024", NULL};
  pid_t a = tp_spawn("a", "a", NULL, ca), b = tp_spawn("b", "b", NULL, hb);
  CHECK(wait_line("a.out", "holding", 20000) == 0 && wait_line("b.out", "holding", 20000) == 0, "a and b hold 1 GiB");
  CHECK(both_counted(20000) == 0, "both counted before the fault");
  const char *path = ledger_file();
  if (!strcmp(mode, "truncate")) {
    CHECK(truncate(path, 0) == 0, "truncate %s", path);
  } else if (!strcmp(mode, "delete")) {
    CHECK(unlink(path) == 0, "unlink %s", path);
  } else if (!strcmp(mode, "overwrite")) {
    int fd = open(path, O_WRONLY);
    CHECK(fd >= 0, "open %s", path);
    char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 131 + 7);
    CHECK(pwrite(fd, junk, sizeof junk, 0) == (ssize_t)sizeof junk, "overwrite the header");
    close(fd);
  } else if (!strcmp(mode, "replace")) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && ftruncate(fd, 4096) == 0, "a replacement file");
    close(fd);
    CHECK(rename(tmp, path) == 0, "rename over the ledger");
  } else {
    CHECK(0, "mode %s", mode);
  }
  tp_sleep_ms(300);
  int st;
  CHECK(!tp_exited(a, &st), "a survives the %s (exit %d)", mode, st);
  CHECK(!tp_exited(b, &st), "b survives the %s (exit %d)", mode, st);
  uint64_t t0 = tp_now_ns();
  int ok = both_counted(20000) == 0, sa = -1, sb = -1;
  if (!ok) {
    tp_exited(a, &sa);
    tp_exited(b, &sb);
  }
  CHECK(ok, "both carried their usage into the ledger now at the path (exit status a %d, b %d; -1: running)", sa, sb);
  SAY("%s: both processes counted again %.0f ms later", mode, (double)(tp_now_ns() - t0) / 1e6);
  /* c may take at most 4 GiB - b's 2 GiB reservation - a's 1 GiB. */
  const char *t1[] = {"try", "1536", "oom", NULL}, *t2[] = {"try", "512", "ok", NULL};
  CHECK(tp_wait(tp_spawn("c1", "c", NULL, t1)) == 0, "1.5 GiB more is refused: a and b still count (c1.err)");
  CHECK(tp_wait(tp_spawn("c2", "c", NULL, t2)) == 0, "512 MiB fits (c2.err)");
  CHECK(!tp_exited(a, &st) && !tp_exited(b, &st), "both still run");
  char *ea = tp_read("a.err"), *eb = tp_read("b.err");
  SAY("a: %s", ea);
  CHECK(tp_count_lines(ea, "re-attached") == 1 && tp_count_lines(eb, "re-attached") == 1,
        "one re-attached line each (a: %d, b: %d)", tp_count_lines(ea, "re-attached"), tp_count_lines(eb, "re-attached"));
  free(ea);
  free(eb);
  stop(a);
  stop(b);
  return 0;
}

/* (5) A ledger dir or file planted by another local user is refused with
 * a clear message and exit 78 (passthrough: the program runs, unenforced);
 * so is a world-writable dir. Needs root (a throwaway user is created);
 * skipped (77) otherwise. Before the fix: the planted dir and file were
 * used (the process ran, its usage readable and writable by that user). */
static int case_takeover(void) {
  if (geteuid() != 0) {
    SAY("SKIP: needs root to create a throwaway user");
    return 77;
  }
  const char *user = "vsfault10";
  if (!getpwnam(user)) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "useradd -M -N -r -s /usr/sbin/nologin %s >/dev/null 2>&1", user);
    if (system(cmd) != 0 || !getpwnam(user)) {
      SAY("SKIP: cannot create user %s", user);
      return 77;
    }
  }
  struct passwd *pw = getpwnam(user);
  uid_t uid = pw->pw_uid;
  gid_t gid = pw->pw_gid;
  const char *t[] = {"try", "64", "ok", NULL};
  /* The card's ledger file name, from a run in our own dir. */
  tp_config("", "[tenant x]\n");
  CHECK(tp_wait(tp_spawn("own", "x", NULL, t)) == 0, "a run in our own dir (own.err)");
  char name[512];
  snprintf(name, sizeof name, "%s", strrchr(ledger_file(), '/') + 1);
  char conf[2048];
  /* 1. a dir owned by the other user */
  char *planted = strdup(tp_path("planted"));
  CHECK(mkdir(planted, 0755) == 0 && chown(planted, uid, gid) == 0, "plant %s", planted);
  snprintf(conf, sizeof conf, "[global]\nledger_dir = %s\n[tenant x]\n", planted);
  tp_config(NULL, conf);
  int st = tp_wait(tp_spawn("dir", "x", NULL, t));
  char *err = tp_read("dir.err");
  CHECK(st == 78 && strstr(err, "belongs to another user"), "a planted dir: exit 78 (%d), clear message: %s", st, err);
  free(err);
  st = tp_wait(tp_spawn("dirpass", "x", "VRAMSHIM_ON_ERROR=passthrough", t));
  err = tp_read("dirpass.err");
  CHECK(st == 0 && strstr(err, "WITHOUT quota enforcement"), "passthrough runs unenforced (%d): %s", st, err);
  free(err);
  /* 2. our dir, a file in it planted by the other user */
  char *mine = strdup(tp_path("mine"));
  CHECK(mkdir(mine, 0755) == 0, "mkdir");
  char fpath[1100];
  snprintf(fpath, sizeof fpath, "%s/%s", mine, name);
  int fd = open(fpath, O_WRONLY | O_CREAT | O_EXCL, 0644);
  CHECK(fd >= 0 && fchown(fd, uid, gid) == 0, "plant %s", fpath);
  close(fd);
  snprintf(conf, sizeof conf, "[global]\nledger_dir = %s\n[tenant x]\n", mine);
  tp_config(NULL, conf);
  st = tp_wait(tp_spawn("file", "x", NULL, t));
  err = tp_read("file.err");
  CHECK(st == 78 && strstr(err, "belongs to another user"), "a planted file: exit 78 (%d): %s", st, err);
  free(err);
  /* 3. a world-writable dir */
  char *open_dir = strdup(tp_path("open"));
  CHECK(mkdir(open_dir, 0777) == 0 && chmod(open_dir, 0777) == 0, "mkdir");
  snprintf(conf, sizeof conf, "[global]\nledger_dir = %s\n[tenant x]\n", open_dir);
  tp_config(NULL, conf);
  st = tp_wait(tp_spawn("wdir", "x", NULL, t));
  err = tp_read("wdir.err");
  CHECK(st == 78 && strstr(err, "world-writable"), "a world-writable dir: exit 78 (%d): %s", st, err);
  free(err);
  /* The tool refuses them too. */
  char *stt = NULL;
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s status --ledger-dir %s > %s 2>&1", g_tool, planted, tp_path("status.txt"));
  int rc = system(cmd);
  stt = tp_read("status.txt");
  CHECK(rc != 0 && strstr(stt, "belongs to another user"), "status refuses the planted dir: %s", stt);
  free(stt);
  char del[128];
  snprintf(del, sizeof del, "userdel %s >/dev/null 2>&1", user);
  rc = system(del);
  (void)rc;
  free(planted);
  free(mine);
  free(open_dir);
  SAY("planted dir, planted file, world-writable dir: refused (exit 78)");
  return 0;
}

/* Runs cmd (a shell line) under `timeout 30`; its exit status (124: it hung). */
static int run_sh(const char *cmd) {
  char line[4096];
  snprintf(line, sizeof line, "timeout 30 sh -c '%s'", cmd);
  /* Not under the shim, nor its config (the FIFO): the shell and the tool
   * are not what is tested here. */
  char *pre = getenv("LD_PRELOAD") ? strdup(getenv("LD_PRELOAD")) : NULL;
  char *cfg = getenv("VRAMSHIM_CONFIG") ? strdup(getenv("VRAMSHIM_CONFIG")) : NULL;
  unsetenv("LD_PRELOAD");
  unsetenv("VRAMSHIM_CONFIG");
  int st = system(line);
  if (pre) setenv("LD_PRELOAD", pre, 1);
  if (cfg) setenv("VRAMSHIM_CONFIG", cfg, 1);
  free(pre);
  free(cfg);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* (6) A FIFO as every path the shim or the tool opens: the config file (at
 * load, also with passthrough), the ledger file, VRAMSHIM_TRACE,
 * VRAMSHIM_LOG=file:, and `vramshim check FIFO`, `vramshim dump FIFO`,
 * `vramshim replay FIFO`, `vramshim dump FILE --svg FIFO`. Each ends at once
 * with a clear message (or, for the trace and the log, runs without them).
 * Before the fix: the config FIFO hung the program at load (also with
 * passthrough), and check / dump hung (killed by timeout, 124). */
static int case_fifo(void) {
  const char *fifo = strdup(tp_path("fifo"));
  CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
  char cmd[4096];
  const char *self = "/proc/self/exe";
  (void)self;
  /* The config file. */
  setenv("VRAMSHIM_CONFIG", fifo, 1);
  const char *t[] = {"try", "64", "ok", NULL};
  int st = tp_wait(tp_spawn("cfg", "x", NULL, t));
  char *err = tp_read("cfg.err");
  CHECK(st == 78 && strstr(err, "not a regular file"), "config FIFO: exit 78 (%d), clear message: %s", st, err);
  free(err);
  st = tp_wait(tp_spawn("cfgpass", "x", "VRAMSHIM_ON_ERROR=passthrough", t));
  CHECK(st == 0, "config FIFO with passthrough: runs (%d)", st);
  /* The tool. */
  snprintf(cmd, sizeof cmd, "%s check %s > %s 2>&1", g_tool, fifo, tp_path("check.txt"));
  st = run_sh(cmd);
  err = tp_read("check.txt");
  CHECK(st != 124 && st != 0 && strstr(err, "not a regular file"), "check FIFO: %d, %s", st, err);
  free(err);
  snprintf(cmd, sizeof cmd, "%s dump %s > %s 2>&1", g_tool, fifo, tp_path("dump.txt"));
  st = run_sh(cmd);
  err = tp_read("dump.txt");
  CHECK(st != 124 && st != 0 && strstr(err, "not a regular file"), "dump FIFO: %d, %s", st, err);
  free(err);
  snprintf(cmd, sizeof cmd, "%s replay %s > %s 2>&1", g_tool, fifo, tp_path("replay.txt"));
  st = run_sh(cmd);
  err = tp_read("replay.txt");
  CHECK(st != 124 && st != 0 && strstr(err, "not a regular file"), "replay FIFO: %d, %s", st, err);
  free(err);
  /* The ledger file, the trace and the log. */
  tp_config("", "[tenant x]\n");
  CHECK(tp_wait(tp_spawn("own", "x", NULL, t)) == 0, "a run to name the ledger (own.err)");
  const char *lf = ledger_file();
  CHECK(unlink(lf) == 0 && mkfifo(lf, 0600) == 0, "a FIFO as the ledger");
  st = tp_wait(tp_spawn("ledger", "x", NULL, t));
  err = tp_read("ledger.err");
  CHECK(st == 78 && strstr(err, "not a regular file"), "ledger FIFO: exit 78 (%d): %s", st, err);
  free(err);
  CHECK(unlink(lf) == 0, "unlink");
  char env[1200];
  snprintf(env, sizeof env, "VRAMSHIM_TRACE=%s", fifo);
  st = tp_wait(tp_spawn("trace", "x", env, t));
  CHECK(st == 0, "trace FIFO: the program runs (%d)", st);
  snprintf(env, sizeof env, "VRAMSHIM_LOG=file:%s", fifo);
  st = tp_wait(tp_spawn("log", "x", env, t));
  err = tp_read("log.err");
  CHECK(st == 0 && strstr(err, "not a regular file"), "log FIFO: runs, logs to stderr (%d): %s", st, err);
  free(err);
  free((void *)fifo);
  SAY("a FIFO as config, ledger, trace, log, and for check/dump/replay: no hang, clear messages");
  return 0;
}

/* (13) A trace with a Size of exactly 1 PiB, the documented maximum: the
 * arena policies refuse it (no card is that large) instead of failing.
 * Before the fix: "internal error on allocation 0" for chunks and vmm. */
static int case_pib(void) {
  FILE *f = fopen(tp_path("pib.csv"), "w");
  CHECK(f, "write the trace");
  fprintf(f, "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.1,allocate,0x1000,1125899906842624,0\n"
             "1,00:00:00.2,free,0x1000,1125899906842624,0\n1,00:00:00.3,allocate,0x2000,4096,0\n");
  fclose(f);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s replay %s > %s 2>&1", g_tool, tp_path("pib.csv"), tp_path("pib.txt"));
  int st = run_sh(cmd);
  char *out = tp_read("pib.txt");
  SAY("%s", out);
  CHECK(st <= 1 && !strstr(out, "internal error") && strstr(out, "policy vmm: 1 allocations refused"),
        "1 PiB: refused by the arena policies, no internal error (%d)", st);
  free(out);
  return 0;
}

/* (9) A tenant without a section follows [tenant default]'s rules under
 * its own name, and one line says so. Before the fix: VRAMSHIM_TENANT=typo
 * had no limit at all (1.5 GiB admitted past default's 1 GiB). */
static int case_unknown(void) {
  tp_config("", "[tenant default]\nlimit = 1GiB\n");
  const char *big[] = {"try", "1536", "oom", NULL}, *small[] = {"try", "512", "ok", NULL};
  CHECK(tp_wait(tp_spawn("typo", "typo", NULL, big)) == 0, "1.5 GiB refused under default's 1 GiB limit (typo.err)");
  char *err = tp_read("typo.err");
  CHECK(tp_count_lines(err, "tenant 'typo' has no section") == 1 && strstr(err, "follows [tenant default]'s rules (limit 1.00 GiB)"),
        "one line says so: %s", err);
  CHECK(strstr(err, "tenant 'typo' on card 0: refused 1.50 GiB"), "refused under its own name: %s", err);
  free(err);
  CHECK(tp_wait(tp_spawn("typo2", "typo", NULL, small)) == 0, "512 MiB fits (typo2.err)");
  return 0;
}

/* (11) A process that exits normally gives its slot back at exit: status
 * shows it gone at once, without any allocation by another process.
 * Before the fix: "(dead, reclaim pending)" until another process
 * allocated on the card. */
static int case_exit(void) {
  tp_config("", "[tenant x]\n");
  const char *h[] = {"hold", "64", NULL};
  pid_t keep = tp_spawn("keep", "x", NULL, h);   /* the ledger stays in use */
  CHECK(wait_line("keep.out", "holding", 20000) == 0, "a process holds 64 MiB");
  const char *t[] = {"try", "128", "ok", NULL};
  pid_t p = tp_spawn("exits", "x", NULL, t);
  CHECK(tp_wait(p) == 0, "exits normally");
  uint64_t t0 = tp_now_ns();
  int gone = 0;
  while (!gone && tp_now_ns() - t0 < 10000000000ull) { /* given back before the exit: at once */
    CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
    gone = 1;
    for (int i = 0; i < g_snap.nprocs; i++) gone &= g_snap.procs[i].pid != p;
    if (!gone) tp_sleep_ms(10);
  }
  SAY("the exited process's slot was gone %.1f ms after its exit", (double)(tp_now_ns() - t0) / 1e6);
  char *st = status_to("status.txt", "");
  CHECK(gone && !strstr(st, "dead, reclaim pending"), "the exited process's slot is gone: %s", st);
  free(st);
  const vs_snap_tenant *x = tp_tenant(&g_snap, "x");
  CHECK(x && x->recorded == x->used, "the tenant total counts only the live (%llu, %llu)", (unsigned long long)x->recorded,
        (unsigned long long)x->used);
  stop(keep);
  return 0;
}

/* (24) A child the fork handlers never saw (a bare clone(2)) that returns
 * through exit() gives back nothing of its parent's: the parent's slot and
 * its charge stay in the ledger. Before the fix the child's destructors
 * freed the slot (its pid was the parent's copy): the tenant's books lost
 * the parent's memory until the parent's background check noticed and
 * took a new slot ("ledger ... was damaged"), and in between another
 * process could be admitted past the limit. */
static int case_rawclone(void) {
  tp_config("", "[tenant x]\n");
  const char *w[] = {"rawclone", "64", NULL};
  pid_t p = tp_spawn("parent", "x", NULL, w);
  CHECK(wait_line("parent.out", "cloned child exited", 20000) == 0, "the parent's cloned child exited");
  /* Longer than the shim's background check of its ledgers, which noticed
   * a freed slot before the fix and took a new one. */
  tp_sleep_ms(1500);
  CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
  uint64_t held = 0;
  int found = 0;
  for (int i = 0; i < g_snap.nprocs; i++)
    if (g_snap.procs[i].pid == p) found = 1, held = g_snap.procs[i].held;
  const vs_snap_tenant *x = tp_tenant(&g_snap, "x");
  SAY("after the child's exit: the parent's slot %s, holding %llu MiB; tenant x uses %llu MiB",
      found ? "present" : "GONE", (unsigned long long)(held / MiB), x ? (unsigned long long)(x->used / MiB) : 0ull);
  CHECK(found && held >= 64 * MiB, "the parent's slot and its 64 MiB stay in the ledger");
  CHECK(x && x->used >= 64 * MiB && x->recorded == x->used, "tenant x's books keep the parent's memory");
  stop(p);
  char *err = tp_read("parent.err");
  CHECK(!err || !strstr(err, "damaged"), "the parent saw no damaged ledger: %s", err ? err : "");
  free(err);
  return 0;
}

/* Worker: allocates (so the ledger is mapped and guarded) unless told
 * "plain", then sends itself SIGBUS as `kill -BUS` would. */
static int w_sigbus(int argc, char **argv) {
  if (!(argc >= 1 && !strcmp(argv[0], "plain"))) {
    tp_cuda_up();
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, 64 * MiB) == CUDA_SUCCESS, "cuMemAlloc");
  }
  kill(getpid(), SIGBUS);
  /* POSIX delivers a signal a process sends itself before kill returns
   * only when no other thread has it unblocked; the shim's background
   * thread keeps SIGBUS unblocked (a fault it takes must reach the guard),
   * so the signal may land there an instant later. Any program with a
   * second thread sees the same; what must hold is that the process ends. */
  tp_sleep_ms(2000);
  printf("alive after SIGBUS\n");
  return 0;
}

/* (3) The ledger's SIGBUS guard takes only faults inside a ledger mapping:
 * a SIGBUS sent to the process does what it does without the shim (ends
 * it). Before the fix: the guard swallowed it, and set SIGBUS back to its
 * default, so the next truncated ledger killed the process. */
static int case_sigbus(void) {
  tp_config("", "[tenant x]\n");
  /* The oracle: the same process that never opened a ledger (no guard);
   * under a sanitizer its own SIGBUS handler decides, in both. */
  const char *plain[] = {"sigbus", "plain", NULL}, *w[] = {"sigbus", NULL};
  int want = tp_wait(tp_spawn("plain", "x", NULL, plain));
  int st = tp_wait(tp_spawn("sigbus", "x", NULL, w));
  char *out = tp_read("sigbus.out");
  CHECK(want >= 128 && st == want && !strstr(out, "alive"),
        "a sent SIGBUS ends the process as without the ledger's guard (status %d, without it %d)", st, want);
  free(out);
  SAY("kill -BUS ended the process (status %d), as without the guard", st);
  return 0;
}

/* (12) `vramshim check` reports every error of a file at once. Before the
 * fix: only the first (line 2). */
static int case_checkall(void) {
  FILE *f = fopen(tp_path("bad.conf"), "w");
  CHECK(f, "write");
  fprintf(f, "[global]\narena = cuda\nbogus = 1\n[tenant a]\nlimit = lots\non_limit = wait:99999h\n"
             "this line is wrong\n[nosuch]\nlimit = 1GiB\n[tenant b]\nreserve = 8GiB\nlimit = 4GiB\n");
  fclose(f);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s check %s > %s 2>&1", g_tool, tp_path("bad.conf"), tp_path("check.txt"));
  int st = run_sh(cmd);
  char *out = tp_read("check.txt");
  SAY("%s", out);
  static const char *const lines[] = {":2: bad value 'cuda'", ":3: unknown key 'bogus'", ":5: bad size 'lots'",
                                      ":6: bad value 'wait:99999h'", ":7: syntax error", ":8: unknown section [nosuch]",
                                      ":11: reserve 8.00 GiB of tenant 'b' is above its limit", "bad.conf: 7 errors"};
  CHECK(st == 1, "check fails (%d)", st);
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) CHECK(strstr(out, lines[i]), "reports '%s'", lines[i]);
  free(out);
  return 0;
}

/* Lines of a trace file that are complete RMM CSV records (6 fields,
 * ending in a newline); -1 when a complete line is malformed. */
static int trace_lines(const char *file) {
  char *txt = tp_read(file);
  int n = 0;
  for (char *p = txt, *e; (e = strchr(p, '\n')); p = e + 1) {
    int commas = 0;
    for (char *q = p; q < e; q++) commas += *q == ',';
    if (commas != 5) {
      n = -1;
      break;
    }
    n++;
  }
  free(txt);
  return n;
}

/* (10) With VRAMSHIM_TRACE, records reach the file within a second of the
 * event (the background writer flushes), and a process killed with
 * SIGKILL leaves a valid CSV of everything before its last second.
 * Before the fix: no file at all (records were written only when a 256 KiB
 * buffer filled, or at exit). */
static int case_trace(void) {
  tp_config("", "[tenant x]\n");
  char env[1200];
  snprintf(env, sizeof env, "VRAMSHIM_TRACE=%s", tp_path("trace.csv"));
  const char *args[] = {"traced", "200", NULL};
  pid_t p = tp_spawn("traced", "x", env, args);
  CHECK(wait_line("traced.out", "done", 20000) == 0, "the traced process ran (traced.err)");
  uint64_t t0 = tp_now_ns();
  int n = 0;
  while ((n = trace_lines("trace.csv")) < 401 && tp_now_ns() - t0 < 20000000000ull) tp_sleep_ms(10);
  double ms = (double)(tp_now_ns() - t0) / 1e6;
  SAY("400 records and the header in the file %.0f ms after the last event", ms);
  CHECK(n == 401, "header + 400 records in the file while the process runs (%d lines)", n);
  kill(p, SIGKILL);
  tp_wait(p);
  CHECK(trace_lines("trace.csv") == 401, "a valid CSV after SIGKILL");
  char *txt = tp_read("trace.csv");
  CHECK(!strncmp(txt, "Thread,Time,Action,Pointer,Size,Stream\n", 39), "the RMM header");
  free(txt);
  return 0;
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* (7) A flood of dump requests: one dump per second at most, each request
 * inside the interval answered with the last dump's path; at most 16 files
 * kept per process (the interval shortened by a test hook for that part).
 * Before the fix: every request wrote a dump (40 requests, 40 files). */
static int case_flood(void) {
  tp_config("", "[tenant x]\n");
  const char *h[] = {"hold", "64", NULL};
  pid_t p = tp_spawn("held", "x", NULL, h);
  CHECK(wait_line("held.out", "holding", 20000) == 0 && tp_wait_held(p, 64 * MiB, 20000) == 0, "a process holds memory");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "for i in $(seq 40); do %s dump --pid %d --ledger-dir %s > /dev/null || exit 1; done", g_tool,
           (int)p, tp_path("ledger"));
  uint64_t t0 = tp_now_ns();
  int st = run_sh(cmd);
  double s_taken = (double)(tp_now_ns() - t0) / 1e9;
  int files = count_files(tp_path("dumps"));
  SAY("40 requests in %.2f s: %d dump files", s_taken, files);
  CHECK(st == 0, "every request answered (%d)", st);
  CHECK(files >= 1 && files <= (int)s_taken + 2, "at most one dump per second (%d files in %.2f s)", files, s_taken);
  stop(p);
  /* The cap, with a 1 ms interval. */
  pid_t q = tp_spawn("held2", "x", "VRAMSHIM_TEST_DUMP_INTERVAL_MS=1", h);
  CHECK(wait_line("held2.out", "holding", 20000) == 0 && tp_wait_held(q, 64 * MiB, 20000) == 0, "holds");
  snprintf(cmd, sizeof cmd, "for i in $(seq 30); do %s dump --pid %d --ledger-dir %s > /dev/null || exit 1; sleep 0.01; done",
           g_tool, (int)q, tp_path("ledger"));
  st = run_sh(cmd);
  int files2 = count_files(tp_path("dumps")) - files;
  SAY("30 spaced requests to a second process: it keeps %d files", files2);
  CHECK(st == 0 && files2 == 16, "a process keeps its 16 newest dumps (%d)", files2);
  stop(q);
  return 0;
}

/* ---- issue 23: the ledger's lock ------------------------------------------------ */
/* Waits up to ms for pid to exit: 1 with its status in *st, 0 still running. */
static int exited_within(pid_t pid, int ms, int *st) {
  for (int t = 0; t < ms; t += 10) {
    if (tp_exited(pid, st)) return 1;
    tp_sleep_ms(10);
  }
  return tp_exited(pid, st);
}

/* The ledger slot of pid in the file at path (read as the tool would), or -1. */
static int slot_of(const char *path, int pid) {
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0, "open %s", path);
  int found = -1;
  for (int i = 0; i < VS_LEDGER_SLOTS && found < 0; i++) {
    int32_t p = 0;
    uint32_t st = 0;
    if (pread(fd, &p, sizeof p, (off_t)offsetof(vs_ledger_shm, slots[i].pid)) == (ssize_t)sizeof p &&
        pread(fd, &st, sizeof st, (off_t)offsetof(vs_ledger_shm, slots[i].state)) == (ssize_t)sizeof st &&
        p == pid && st == VS_SLOT_ACTIVE)
      found = i;
  }
  close(fd);
  return found;
}

static void put_u32(const char *path, uint64_t off, uint32_t v) {
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0 && pwrite(fd, &v, sizeof v, (off_t)off) == (ssize_t)sizeof v, "write %s at %llu", path,
        (unsigned long long)off);
  close(fd);
}

static int count_damaged(void) {
  DIR *d = opendir(tp_path("ledger"));
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strstr(e->d_name, ".damaged-")) n++;
  if (d) closedir(d);
  return n;
}

/* (23.1) Garbage in the ledger's lock word, while a churns and b holds:
 * nobody hangs, a new process is served, a and b exit when told.
 *   dead:   the word names slot 100, which no process holds (to the old
 *           robust mutex, whose first word sat at the same offset: a thread
 *           id that never existed);
 *   live:   the word names a's slot, as if a held it for ever (the old
 *           mutex: a thread id past pid_max);
 *   bogus:  an owner no holder can write: the file is moved aside;
 *   version, size: bytes over the header's version or size field: the
 *           file is moved aside (before: "another vramshim version's ledger
 *           in use", exit 78 for every new process while a and b ran);
 *   random: 2,000 seeded random bytes anywhere in the file.
 * Before the fix (dead, live): a and b blocked for good, also on their way
 * out, and so did every new process. */
static int case_lockword(const char *mode) {
  tp_config("", "[tenant a]\n[tenant b]\n[tenant c]\n");
  const char *ca[] = {"churn", "1024", NULL}, *hb[] = {"hold", "1024", NULL};
  pid_t a = tp_spawn("a", "a", NULL, ca), b = tp_spawn("b", "b", NULL, hb);
  CHECK(wait_line("a.out", "holding", 20000) == 0 && wait_line("b.out", "holding", 20000) == 0, "a and b hold 1 GiB");
  CHECK(both_counted(20000) == 0, "both counted before the fault");
  const char *path = ledger_file();
  uint64_t at = offsetof(vs_ledger_shm, lk.word);
  CHECK(at == 16, "the lock word lies where the old mutex's owner word lay (offset %llu)", (unsigned long long)at);
  if (!strcmp(mode, "dead")) {
    put_u32(path, at, 101u << VS_LOCK_NONCE_BITS | 4242u);
  } else if (!strcmp(mode, "live")) {
    int k = slot_of(path, a);
    CHECK(k >= 0 && k < 126, "a's slot (%d)", k);
    put_u32(path, at, (uint32_t)(k + 1) << VS_LOCK_NONCE_BITS | 5u);
  } else if (!strcmp(mode, "bogus")) {
    put_u32(path, at, 445u << VS_LOCK_NONCE_BITS | 12345u);
  } else if (!strcmp(mode, "version") || !strcmp(mode, "size")) {
    /* Bytes over the header's version or size field (the same offsets in
     * every layout since version 1): damage, not another version's file. */
    put_u32(path, !strcmp(mode, "version") ? offsetof(vs_ledger_shm, version) : offsetof(vs_ledger_shm, size),
            0x5a5a0054u);
  } else if (!strncmp(mode, "random", 6)) {   /* random[:SEED] */
    int fd = open(path, O_WRONLY);
    CHECK(fd >= 0, "open %s", path);
    srand(mode[6] == ':' ? (unsigned)atoi(mode + 7) : 23u);
    for (int i = 0; i < 2000; i++) {
      unsigned char byte = (unsigned char)rand();
      off_t off = (off_t)((uint64_t)rand() * 2654435761u % sizeof(vs_ledger_shm));
      CHECK(pwrite(fd, &byte, 1, off) == 1, "a random byte");
    }
    close(fd);
    /* Bytes written over a live process's own slot are found by that
     * process (its background thread checks its slot every
     * VS_LEDGER_CHECK_MS) and it re-attaches; until then others count
     * what the slot says. */
    tp_sleep_ms(4 * VS_LEDGER_RECLAIM_MS);
  } else {
    CHECK(0, "mode %s", mode);
  }
  uint64_t t0 = tp_now_ns();
  const char *t1[] = {"try", "64", "ok", NULL};
  pid_t c = tp_spawn("c", "c", NULL, t1);
  int st = -1;
  CHECK(exited_within(c, TP_EVENTUALLY_MS, &st) && st == 0, "a new process is served (exit %d, c.err)", st);
  SAY("%s: a new process started and got 64 MiB %.0f ms after the damage", mode, (double)(tp_now_ns() - t0) / 1e6);
  CHECK(!tp_exited(a, &st) && !tp_exited(b, &st), "a and b still run");
  if (strncmp(mode, "random", 6) != 0) {
    /* The books are right again (the taker rebuilt them, or the new file holds both). */
    CHECK(both_counted(TP_EVENTUALLY_MS) == 0, "both still counted");
  }
  if (!strcmp(mode, "bogus") || !strcmp(mode, "version") || !strcmp(mode, "size")) {
    CHECK(count_damaged() == 1, "the damaged file is moved aside (%d files)", count_damaged());
    const char *t2[] = {"try", "64", "ok", NULL};
    CHECK(tp_wait(tp_spawn("c2", "c", NULL, t2)) == 0, "a new process is served from the new file (c2.err)");
  }
  t0 = tp_now_ns();
  kill(a, SIGTERM);
  kill(b, SIGTERM);
  int sa = -1, sb = -1;
  CHECK(exited_within(a, TP_EVENTUALLY_MS, &sa) && exited_within(b, TP_EVENTUALLY_MS, &sb) && sa == 0 && sb == 0,
        "a and b exit when told (%d, %d)", sa, sb);
  SAY("%s: a and b exited %.0f ms after SIGTERM", mode, (double)(tp_now_ns() - t0) / 1e6);
  return 0;
}

/* (23.2) A process stopped (SIGSTOP: docker pause, a debugger, Ctrl-Z)
 * inside the ledger's lock, between charging its slot and its tenant:
 * another process's allocation goes on while it stays stopped (the lock
 * is taken over after its lease, the totals rebuilt from the slots); once
 * it resumes and finishes, the books are exact (its release finds the
 * lock lost and rebuilds them). Before the fix: the other process waited
 * as long as the holder stayed stopped. */
static int case_stopped(void) {
  tp_config("", "[tenant v]\n[tenant w]\n");
  const char *h64[] = {"hold", "64", NULL};
  pid_t s = tp_spawn("stalled", "v", "VRAMSHIM_TEST_LEDGER_STALL=stop", h64);
  int wst = 0;
  CHECK(waitpid(s, &wst, WUNTRACED) == s && WIFSTOPPED(wst), "stopped inside the ledger lock");
  uint64_t t0 = tp_now_ns();
  const char *tr[] = {"try", "64", "ok", NULL};
  pid_t o = tp_spawn("other", "w", NULL, tr);
  int st = -1;
  CHECK(exited_within(o, TP_EVENTUALLY_MS, &st) && st == 0, "the other process went on while the holder is stopped "
        "(exit %d, other.err)", st);
  SAY("a holder stopped inside the lock: another process started and got 64 MiB in %.0f ms", (double)(tp_now_ns() - t0) / 1e6);
  t0 = tp_now_ns();
  pid_t o2 = tp_spawn("other2", "w", NULL, tr);
  CHECK(exited_within(o2, TP_EVENTUALLY_MS, &st) && st == 0, "the next one too (exit %d)", st);
  SAY("the next process: %.0f ms", (double)(tp_now_ns() - t0) / 1e6);
  CHECK(!tp_exited(s, &st), "the holder is still stopped");
  char *e = tp_read("other.err");
  CHECK(strstr(e, "took the lock over"), "the takeover is logged: %s", e);
  free(e);
  kill(s, SIGCONT);
  CHECK(wait_line("stalled.out", "holding", TP_EVENTUALLY_MS) == 0, "the holder resumes and finishes its allocation");
  const vs_snap_tenant *v = NULL;
  const vs_snap_proc *p = NULL;
  for (uint64_t end = tp_now_ns() + TP_EVENTUALLY_MS * 1000000ull; tp_now_ns() < end; tp_sleep_ms(10)) {
    if (tp_snapshot(&g_snap)) continue;
    v = tp_tenant(&g_snap, "v");
    p = tp_proc(&g_snap, s);
    if (v && p && p->held >= 64 * MiB && v->recorded == p->held && v->used == p->held) break;
  }
  CHECK(v && p && p->held >= 64 * MiB && v->recorded == p->held,
        "the books are exact after it resumed: tenant v records %llu, its process holds %llu",
        v ? (unsigned long long)v->recorded : 0ull, p ? (unsigned long long)p->held : 0ull);
  e = tp_read("stalled.err");
  CHECK(strstr(e, "another process took it over"), "the resumed holder says it lost the lock: %s", e);
  free(e);
  stop(s);
  return 0;
}

/* (23.5) Dead processes are reclaimed within VS_LEDGER_RECLAIM_MS whatever
 * the survivors do: here the only survivor churns from its arena cache and
 * never calls the ledger; and the forked children a process killed are
 * reclaimed when it exits at once after (no survivor at all). Before the
 * fix: the killed 2 GiB holder stayed "(dead, reclaim pending)" for as long
 * as the survivor churned; the children stayed listed after the parent's
 * exit. */
static int case_reclaim_storm(void);
static int case_reclaim(const char *part) {
  tp_config("", "[tenant v]\n[tenant s]\n");
  if (!strcmp(part, "forkstorm")) return case_reclaim_storm();
  const char *hv[] = {"hold", "2048", NULL}, *cs[] = {"churn", "64", NULL};
  pid_t v = tp_spawn("victim", "v", NULL, hv), c = tp_spawn("survivor", "s", NULL, cs);
  CHECK(tp_wait_held(v, 2 * GiB, TP_EVENTUALLY_MS) == 0 && wait_line("survivor.out", "holding", 20000) == 0,
        "the victim holds 2 GiB, the survivor churns");
  tp_sleep_ms(500);   /* the survivor's cache is warm: its churn no longer calls the ledger */
  uint64_t t0 = tp_now_ns();
  kill(v, SIGKILL);
  tp_wait(v);
  int gone = 0;
  for (uint64_t end = tp_now_ns() + TP_EVENTUALLY_MS * 1000000ull; !gone && tp_now_ns() < end;) {
    const vs_snap_tenant *tv;
    gone = tp_snapshot(&g_snap) == 0 && !tp_proc(&g_snap, v) && (tv = tp_tenant(&g_snap, "v")) && tv->recorded == 0;
    if (!gone) tp_sleep_ms(5);
  }
  CHECK(gone, "the dead holder's 2 GiB are reclaimed while the survivor churns from its cache");
  SAY("a dead 2 GiB holder reclaimed %.0f ms after kill -9 (the survivor only churns its cache; documented: %d ms)",
      (double)(tp_now_ns() - t0) / 1e6, VS_LEDGER_RECLAIM_MS);
  int st;
  CHECK(!tp_exited(c, &st), "the survivor still runs");
  stop(c);
  return 0;
}

/* The fork storm: 8 children of 128 MiB killed, the parent exits at once
 * (a threaded process forks: not a test for ThreadSanitizer). */
static int case_reclaim_storm(void) {
  const char *fs[] = {"forkstorm", "8", "128", NULL};
  pid_t f = tp_spawn("storm", "s", NULL, fs);
  CHECK(tp_wait(f) == 0, "the fork storm ran (storm.err)");
  CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
  int listed = g_snap.nprocs;
  CHECK(listed == 0 && g_snap.dead_bytes == 0, "no process is listed after the parent's exit (%d, %llu dead bytes)",
        listed, (unsigned long long)g_snap.dead_bytes);
  SAY("fork storm: nothing listed after the parent exited");
  return 0;
}

/* (23.7) An idle process gives its cache back to release_threshold
 * within twice the decay time although it never calls again: the
 * background thread applies the decay. release_threshold = 0 and
 * release_decay = 1s (the probe's 16 s idle period, shortened). Before the
 * fix: the 1 GiB it had freed stayed charged (and on the card) until the
 * program's next call. */
static int case_idle(const char *mode) {
  char global[128];
  snprintf(global, sizeof global, "arena = %s\nrelease_threshold = 0\nrelease_decay = 1s\n", mode);
  tp_config(global, "[tenant i]\n");
  const char *iw[] = {"idle", "16", "64", NULL};
  pid_t p = tp_spawn("idle", "i", NULL, iw);
  CHECK(wait_line("idle.out", "ready", 20000) == 0, "the process is up (idle.err)");
  CHECK(tp_wait_held(p, MiB, TP_EVENTUALLY_MS) == 0, "its live MiB is charged");
  const vs_snap_proc *pr = NULL;
  CHECK(tp_snapshot(&g_snap) == 0 && (pr = tp_proc(&g_snap, p)), "snapshot");
  uint64_t base = pr->held;
  kill(p, SIGUSR1);
  CHECK(wait_line("idle.out", "freed", 20000) == 0, "1 GiB allocated and freed");
  uint64_t t0 = tp_now_ns(), held = 0, peak = 0;
  int back = 0;
  for (uint64_t end = t0 + TP_EVENTUALLY_MS * 1000000ull; !back && tp_now_ns() < end;) {
    if (tp_snapshot(&g_snap) == 0 && (pr = tp_proc(&g_snap, p))) {
      held = pr->held;
      peak = pr->peak;
      back = held <= base;
    }
    if (!back) tp_sleep_ms(20);
  }
  CHECK(back, "%s: the idle process gives its cache back: holds %llu MiB, %llu MiB before (release_threshold 0)",
        mode, (unsigned long long)(held / MiB), (unsigned long long)(base / MiB));
  SAY("%s: idle after freeing 1 GiB (peak %llu MiB): back to %llu MiB %.0f ms later (release_decay 1 s; bound 2 s)",
      mode, (unsigned long long)(peak / MiB), (unsigned long long)(held / MiB), (double)(tp_now_ns() - t0) / 1e6);
  stop(p);
  return 0;
}

/* A worker `try MIB ok` of tenant as tag: it must exit 0 with no refusal
 * line (a refusal the shim retried after a trim round says nothing). */
static void served_unrefused(const char *tag, const char *tenant, const char *mib, const char *mode, const char *what) {
  const char *tr[] = {"try", mib, "ok", NULL};
  int st = tp_wait(tp_spawn(tag, tenant, NULL, tr));
  char err[64];
  snprintf(err, sizeof err, "%s.err", tag);
  char *e = tp_read(err);
  CHECK(st == 0 && !strstr(e, "refused"), "%s: %s (exit %d): %s", mode, what, st, e);
  free(e);
}

/* (23.6) Before a `fail` refusal the tenant's caches in its other
 * processes get their chance: two idle processes of tenant t cache 768 MiB
 * each (nothing live), and a third asks for 1 GiB under t's 2 GiB limit:
 * they are asked to trim, and it is served, with no refusal. Before the
 * fix: refused (the others' caches count as t's usage, 1.5 GiB + 1 GiB). */
static int case_trim(const char *mode) {
  char global[128];
  snprintf(global, sizeof global, "arena = %s\nrelease_threshold = 4GiB\n", mode);
  tp_config(global, "[tenant t]\nlimit = 2GiB\non_limit = fail\n");
  const char *cw[] = {"cache", "768", NULL};
  pid_t a = tp_spawn("a", "t", NULL, cw), b = tp_spawn("b", "t", NULL, cw);
  CHECK(wait_line("a.out", "cached", 20000) == 0 && wait_line("b.out", "cached", 20000) == 0,
        "a and b cache 768 MiB each (a.err, b.err)");
  CHECK(tp_snapshot(&g_snap) == 0 && tp_tenant(&g_snap, "t"), "snapshot");
  uint64_t before = tp_tenant(&g_snap, "t")->used;
  CHECK(before >= 1536 * MiB, "their caches count as t's usage (%llu MiB)", (unsigned long long)(before / MiB));
  uint64_t t0 = tp_now_ns();
  served_unrefused("c", "t", "1024", mode, "1 GiB is served after the others trimmed");
  CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
  const vs_snap_proc *pa = tp_proc(&g_snap, a), *pb = tp_proc(&g_snap, b);
  SAY("%s: t used %llu MiB in caches; a 1 GiB request served in %.0f ms; a and b now hold %llu and %llu MiB", mode,
      (unsigned long long)(before / MiB), (double)(tp_now_ns() - t0) / 1e6, pa ? (unsigned long long)(pa->held / MiB) : 0ull,
      pb ? (unsigned long long)(pb->held / MiB) : 0ull);
  stop(a);
  stop(b);
  return 0;
}

/* The trim cases' config: the arena in mode, caches kept (no threshold
 * trims them), then the tenants' sections. */
static void cache_config(const char *mode, const char *tenants) {
  char global[128];
  snprintf(global, sizeof global, "arena = %s\nrelease_threshold = 4GiB\n", mode);
  tp_config(global, tenants);
}

/* A worker that says `line` once ready (tag.out); the case stops there
 * if it never does. */
static pid_t spawn_said(const char *tag, const char *tenant, const char *extra_env, const char *const *args,
                        const char *line) {
  pid_t p = tp_spawn(tag, tenant, extra_env, args);
  char out[64];
  snprintf(out, sizeof out, "%s.out", tag);
  CHECK(wait_line(out, line, 20000) == 0, "%s never said '%s' (%s.err)", tag, line, tag);
  return p;
}

/* (23.8) Another tenant's cache gives way as the program's own frees would
 * have without the shim. Tenant b's process caches 2 GiB (its program
 * freed everything; release_threshold keeps it). Tenant a sees that
 * memory as free in its view and is served 3 GiB (b is asked to trim).
 * A refusal by c's own limit asks nobody of another tenant. A tenant that
 * spills gets device memory, not host memory, where a cache can give way.
 * Before the fix: a's view 1448 MiB, and 2.34 GiB refused ("other
 * tenants' usage or reservations 2.29 GiB": b's cache) in every arena
 * mode; s's request spilled. */
static int case_trim_card(const char *mode) {
  cache_config(mode, "[tenant a]\non_limit = fail\n[tenant b]\n[tenant c]\nlimit = 1GiB\non_limit = fail\n"
                     "[tenant s]\non_limit = spill:4GiB\n");
  const char *cw[] = {"cache", "2048", NULL};
  pid_t b = spawn_said("b", "b", NULL, cw, "cached");
  CHECK(tp_snapshot(&g_snap) == 0 && tp_proc(&g_snap, b), "snapshot");
  uint64_t cached = tp_proc(&g_snap, b)->held;
  CHECK(cached >= 2048 * MiB, "b holds its cache (%llu MiB)", (unsigned long long)(cached / MiB));
  /* c's own limit refuses: b's cache cannot help, b keeps it. */
  const char *over[] = {"try", "2048", "oom", NULL};
  CHECK(tp_wait(tp_spawn("c", "c", NULL, over)) == 0, "c's 2 GiB is refused by its 1 GiB limit (c.err)");
  CHECK(tp_snapshot(&g_snap) == 0 && tp_proc(&g_snap, b) && tp_proc(&g_snap, b)->held == cached,
        "%s: a refusal by c's own limit left b's cache alone (%llu MiB, was %llu)", mode,
        tp_proc(&g_snap, b) ? (unsigned long long)(tp_proc(&g_snap, b)->held / MiB) : 0ull,
        (unsigned long long)(cached / MiB));
  /* Contexts cost nothing in these tests (VRAMSIM_CONTEXT_OVERHEAD=0). */
  const char *vw[] = {"viewfree", "3072", NULL};
  CHECK(tp_wait(tp_spawn("v", "a", NULL, vw)) == 0, "%s: a's view counts b's cache as free (v.out, v.err)", mode);
  CHECK(tp_snapshot(&g_snap) == 0 && tp_proc(&g_snap, b) && tp_tenant(&g_snap, "b"), "snapshot");
  CHECK(tp_proc(&g_snap, b)->cached >= 2048 * MiB && tp_tenant(&g_snap, "b")->cached == tp_proc(&g_snap, b)->cached,
        "%s: the ledger shows b's cache (%llu MiB; tenant b %llu MiB)", mode,
        (unsigned long long)(tp_proc(&g_snap, b)->cached / MiB),
        (unsigned long long)(tp_tenant(&g_snap, "b")->cached / MiB));
  uint64_t t0 = tp_now_ns();
  served_unrefused("a", "a", "3072", mode, "a's 3 GiB is served after b trimmed");
  CHECK(tp_snapshot(&g_snap) == 0 && tp_proc(&g_snap, b), "snapshot");
  CHECK(tp_proc(&g_snap, b)->cached <= tp_proc(&g_snap, b)->held && tp_proc(&g_snap, b)->cached < 64 * MiB,
        "%s: b's published cache fell with its trim (%llu MiB)", mode,
        (unsigned long long)(tp_proc(&g_snap, b)->cached / MiB));
  SAY("%s: b cached %llu MiB; a's 3 GiB served in %.0f ms; b now holds %llu MiB", mode,
      (unsigned long long)(cached / MiB), (double)(tp_now_ns() - t0) / 1e6,
      (unsigned long long)(tp_proc(&g_snap, b)->held / MiB));
  stop(b);
  /* A tenant that spills asks the caches before it spills: device memory. */
  pid_t b2 = spawn_said("b2", "b", NULL, cw, "cached");
  const char *td[] = {"trydev", "3072", NULL};
  int st = tp_wait(tp_spawn("s", "s", NULL, td));
  CHECK(st == 0, "%s: s's 3 GiB is device memory, b2 trimmed first (exit %d; s.err)", mode, st);
  stop(b2);
  return 0;
}

/* (23.9) The driver itself refuses (a process without the shim holds
 * memory the books cannot see) where another process's cache is in the
 * way: the request asks the caches on the card and the driver once more.
 * An outsider holds 2 GiB, b caches 1 GiB, a asks for 1.5 GiB of pitched
 * memory: the books admit it, the driver (3 GiB taken of 4) refuses, b
 * trims, the driver grants it. Before the fix: refused (exit 1). The same
 * for a driver pool's growth: b2 caches 1 GiB, a2 asks a pool of its own
 * for 1.5 GiB (before: refused; pools asked nobody). */
static int case_trim_driver(const char *mode) {
  cache_config(mode, "[tenant a]\non_limit = fail\n[tenant b]\n");
  const char *ho[] = {"hold", "2048", NULL};
  pid_t out = spawn_said("outsider", NULL, "LD_PRELOAD=", ho, "holding");   /* no shim */
  const char *cw[] = {"cache", "1024", NULL};
  pid_t b = spawn_said("b", "b", NULL, cw, "cached");
  const char *pw[] = {"pitch", "1536", NULL};
  int st = tp_wait(tp_spawn("a", "a", NULL, pw));
  CHECK(st == 0, "%s: a's 1.5 GiB pitched allocation is served once b trimmed (exit %d; a.err)", mode, st);
  CHECK(tp_snapshot(&g_snap) == 0 && tp_proc(&g_snap, b), "snapshot");
  SAY("%s: the driver refused 1.5 GiB beside an outsider's 2 GiB; b gave its cache back (holds %llu MiB), "
      "the retry was served", mode, (unsigned long long)(tp_proc(&g_snap, b)->held / MiB));
  stop(b);
  pid_t b2 = spawn_said("b2", "b", NULL, cw, "cached");
  const char *qw[] = {"poolalloc", "1536", NULL};
  st = tp_wait(tp_spawn("a2", "a", NULL, qw));
  CHECK(st == 0, "%s: a2's 1.5 GiB from a driver pool is served once b2 trimmed (exit %d; a2.err)", mode, st);
  stop(b2);
  stop(out);
  return 0;
}

/* (23.10) Under on_limit = wait an idle process's cache gives way too: b
 * caches 2 GiB and makes no call; a (wait:5s) asks for 3 GiB and is served
 * within a second (b's background thread sees a waiter and trims). Before
 * the fix: refused after waiting 5 s (b gives its cache back only when its
 * program frees, and it frees nothing more). */
static int case_trim_wait(const char *mode) {
  cache_config(mode, "[tenant a]\non_limit = wait:5s\n[tenant b]\n");
  const char *cw[] = {"cache", "2048", NULL};
  pid_t b = spawn_said("b", "b", NULL, cw, "cached");
  uint64_t t0 = tp_now_ns();
  served_unrefused("a", "a", "3072", mode, "a's 3 GiB is served while b is idle");
  double ms = (double)(tp_now_ns() - t0) / 1e6;
  CHECK(ms < 2500, "%s: a waited %.0f ms (b trims at its next tick: 100 ms)", mode, ms);
  SAY("%s: a waited %.0f ms for an idle process's 2 GiB cache", mode, ms);
  stop(b);
  return 0;
}

/* (23.13) A stopped process's cache is not free: b caches 2 GiB and is
 * stopped (SIGSTOP, as a paused container's cgroup freezer does). a's
 * 3 GiB is refused once b leaves the ask unanswered (300 ms); from then
 * on the ledger shows b's cache as 0, so no view counts it free (one
 * `unanswered` event, one line in a's log). Resumed, b answers the ask
 * (it trims) and a's 3 GiB is served. Before the fix b's 2 GiB stayed in
 * every view while nobody could get it. */
static int case_trim_stopped(const char *mode) {
  cache_config(mode, "[tenant a]\non_limit = fail\n[tenant b]\n");
  const char *cw[] = {"cache", "2048", NULL};
  pid_t b = spawn_said("b", "b", NULL, cw, "cached");
  /* The event names the cache as b last published it: all of it, where
   * a tick that fell among b's frees published part. */
  CHECK(tp_wait_cached(b, 2048 * MiB, 5000) == 0, "%s: b published its 2 GiB cache within 5 s", mode);
  const char *vw[] = {"viewfree", "3072", NULL};
  CHECK(tp_wait(tp_spawn("v", "a", NULL, vw)) == 0, "%s: a's view counts b's cache as free (v.out, v.err)", mode);
  kill(b, SIGSTOP);
  /* Stopped before a asks: a signal is taken when the process next runs,
   * and b's thread woken by the ask would answer it first. */
  int bst = 0;
  CHECK(waitpid(b, &bst, WUNTRACED) == b && WIFSTOPPED(bst), "%s: b is stopped", mode);
  const char *tw[] = {"try", "3072", "oom", NULL};
  CHECK(tp_wait(tp_spawn("a", "a", NULL, tw)) == 0, "%s: a's 3 GiB is refused while b is stopped (a.err)", mode);
  CHECK(tp_snapshot(&g_snap) == 0 && tp_proc(&g_snap, b) && tp_tenant(&g_snap, "b"), "snapshot");
  uint64_t held = tp_proc(&g_snap, b)->held, cached = tp_proc(&g_snap, b)->cached;
  CHECK(held >= 2048 * MiB && cached == 0 && tp_tenant(&g_snap, "b")->cached == 0,
        "%s: stopped b holds %llu MiB and shows %llu MiB cached (tenant %llu): nobody can get it", mode,
        (unsigned long long)(held / MiB), (unsigned long long)(cached / MiB),
        (unsigned long long)(tp_tenant(&g_snap, "b")->cached / MiB));
  int said = 0;
  for (int e = 0; e < g_snap.nevents; e++)
    said += !strcmp(g_snap.events[e].kind, "unanswered") && g_snap.events[e].pid == b &&
            !strcmp(g_snap.events[e].tenant, "b") && g_snap.events[e].bytes >= 2048 * MiB;
  CHECK(said == 1, "%s: one 'unanswered' event names b and its 2 GiB cache (%d)", mode, said);
  char *e = tp_read("a.err");
  CHECK(strstr(e, "unanswered") != NULL, "%s: a's log says why b's cache no longer counts (a.err)", mode);
  free(e);
  kill(b, SIGCONT);
  served_unrefused("a2", "a", "3072", mode, "a's 3 GiB is served once b runs again");
  SAY("%s: b stopped with 2 GiB cached: left the views after one unanswered ask; resumed, it gave way", mode);
  stop(b);
  return 0;
}

/* (23.11) A waiter killed while it waits leaves no count behind: w waits
 * (wait:60s) for 2 GiB beside h's 3 GiB held live and is killed with
 * SIGKILL; then c caches 512 MiB, and a second later still holds it (no
 * process waits, so nobody gives a cache back). Before the fix the card's
 * waiter count kept w for ever, and every process with a cache gave it
 * back at every tick (c: 0 MiB). */
static int case_waiter_killed(const char *mode) {
  cache_config(mode, "[tenant w]\non_limit = wait:60s\n[tenant h]\n[tenant c]\n");
  const char *hw[] = {"hold", "3072", NULL};
  pid_t h = spawn_said("h", "h", NULL, hw, "holding");
  const char *tw[] = {"try", "2048", "ok", NULL};
  pid_t w = tp_spawn("w", "w", NULL, tw);
  struct timespec nap = {0, 500000000};
  nanosleep(&nap, NULL);
  int st = 0;
  CHECK(tp_exited(w, &st) == 0, "w waits for memory (w.err)");
  kill(w, SIGKILL);
  tp_wait(w);
  const char *cw[] = {"cache", "512", NULL};
  pid_t c = spawn_said("c", "c", NULL, cw, "cached");
  nanosleep(&nap, NULL);
  nanosleep(&nap, NULL);
  CHECK(tp_snapshot(&g_snap) == 0 && tp_proc(&g_snap, c), "snapshot");
  uint64_t held = tp_proc(&g_snap, c)->held;
  CHECK(held >= 512 * MiB, "%s: c keeps its cache a second after the killed waiter (holds %llu MiB)", mode,
        (unsigned long long)(held / MiB));
  SAY("%s: after a waiter was killed, c still holds its %llu MiB cache", mode, (unsigned long long)(held / MiB));
  stop(c);
  stop(h);
  return 0;
}

/* (23.12) Bytes written over the card's waiter count: b caches 512 MiB
 * and stays idle; 0x7fffffff is written over `waiters`. A second later b
 * still holds its cache (its tick counts the waiters in the slots, not the
 * card's word) and the word is set back to what the slots say (a sweep).
 * Before the fix: b gave its cache back at its next tick, and the word
 * stayed, so every process on the card would have given its cache back at
 * every free and every tick. */
static int case_waiters_garbage(const char *mode) {
  cache_config(mode, "[tenant b]\n");
  const char *cw[] = {"cache", "512", NULL};
  pid_t b = spawn_said("b", "b", NULL, cw, "cached");
  const char *path = ledger_file();
  put_u32(path, offsetof(vs_ledger_shm, waiters), 0x7fffffffu);
  tp_sleep_ms(1000);
  CHECK(tp_snapshot(&g_snap) == 0 && tp_proc(&g_snap, b), "snapshot");
  uint64_t held = tp_proc(&g_snap, b)->held;
  CHECK(held >= 512 * MiB, "%s: b keeps its cache beside a waiter count written over (holds %llu MiB)", mode,
        (unsigned long long)(held / MiB));
  int fd = open(path, O_RDONLY);
  uint32_t w = 1;
  CHECK(fd >= 0 && pread(fd, &w, sizeof w, (off_t)offsetof(vs_ledger_shm, waiters)) == (ssize_t)sizeof w,
        "read the waiter count");
  close(fd);
  CHECK(w == 0, "%s: the waiter count is set back to the slots' (%u)", mode, (unsigned)w);
  SAY("%s: b holds %llu MiB a second after its card's waiter count was written over; the count is %u again", mode,
      (unsigned long long)(held / MiB), (unsigned)w);
  stop(b);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  CHECK(argc >= 2, "usage: faults_prog case NAME WORKDIR TOOL [ARG] | WORKER ARGS");
  const char *m = argv[1];
  if (strcmp(m, "case") != 0) {
    tp_worker_signals();
    if (!strcmp(m, "hold")) return w_hold(argc - 2, argv + 2);
    if (!strcmp(m, "try")) return w_try(argc - 2, argv + 2);
    if (!strcmp(m, "traced")) return w_traced(argc - 2, argv + 2);
    if (!strcmp(m, "churn")) return w_churn(argc - 2, argv + 2);
    if (!strcmp(m, "oversize")) return w_oversize(argc - 2, argv + 2);
    if (!strcmp(m, "rawclone")) return w_rawclone(argc - 2, argv + 2);
    if (!strcmp(m, "sigbus")) return w_sigbus(argc - 2, argv + 2);
    if (!strcmp(m, "forkstorm")) return w_forkstorm(argc - 2, argv + 2);
    if (!strcmp(m, "idle")) return w_idle(argc - 2, argv + 2);
    if (!strcmp(m, "cache")) return w_cache(argc - 2, argv + 2);
    if (!strcmp(m, "viewfree")) return w_viewfree(argc - 2, argv + 2);
    if (!strcmp(m, "trydev")) return w_trydev(argc - 2, argv + 2);
    if (!strcmp(m, "pitch")) return w_pitch(argc - 2, argv + 2);
    if (!strcmp(m, "poolalloc")) return w_poolalloc(argc - 2, argv + 2);
    CHECK(0, "unknown worker %s", m);
  }
  CHECK(argc >= 5, "case NAME WORKDIR TOOL [ARG]");
  const char *c = argv[2], *arg = argc > 5 ? argv[5] : "";
  g_tool = argv[4];
  tp_workdir(argv[3]);
  int r = 1;
  if (!strcmp(c, "hoard")) r = case_hoard(arg);
  else if (!strcmp(c, "reserve")) r = case_reserve();
  else if (!strcmp(c, "ledger")) r = case_ledger(arg);
  else if (!strcmp(c, "takeover")) r = case_takeover();
  else if (!strcmp(c, "fifo")) r = case_fifo();
  else if (!strcmp(c, "pib")) r = case_pib();
  else if (!strcmp(c, "unknown")) r = case_unknown();
  else if (!strcmp(c, "exit")) r = case_exit();
  else if (!strcmp(c, "rawclone")) r = case_rawclone();
  else if (!strcmp(c, "checkall")) r = case_checkall();
  else if (!strcmp(c, "trace")) r = case_trace();
  else if (!strcmp(c, "flood")) r = case_flood();
  else if (!strcmp(c, "sigbus")) r = case_sigbus();
  else if (!strcmp(c, "lockword")) r = case_lockword(arg);
  else if (!strcmp(c, "stopped")) r = case_stopped();
  else if (!strcmp(c, "reclaim")) r = case_reclaim(arg);
  else if (!strcmp(c, "idle")) r = case_idle(arg);
  else if (!strcmp(c, "trim")) r = case_trim(arg);
  else if (!strcmp(c, "trim_card")) r = case_trim_card(arg);
  else if (!strcmp(c, "trim_driver")) r = case_trim_driver(arg);
  else if (!strcmp(c, "trim_wait")) r = case_trim_wait(arg);
  else if (!strcmp(c, "trim_stopped")) r = case_trim_stopped(arg);
  else if (!strcmp(c, "waiter_killed")) r = case_waiter_killed(arg);
  else if (!strcmp(c, "waiters_garbage")) r = case_waiters_garbage(arg);
  else CHECK(0, "unknown case %s", c);
  if (r == 0) SAY("PASS %s", c);
  return r;
}

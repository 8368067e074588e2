/* The ledger across Windows processes (under wine64 in CI): what the
 * platform layer's Windows side must give the tenant concern.
 *
 *   win_ledger.exe TOOL CASE   the parent: runs CASE (two_procs, reclaim,
 *                              lock_owner_killed, wait_wake, status, deleted) and
 *                              exits 0 when every check holds
 *   win_ledger.exe --child DIR ROLE TENANT BYTES
 *                              a child: opens the ledger in DIR and plays
 *                              ROLE until it is ended (TerminateProcess)
 *
 * Children are started with CreateProcess and ended with TerminateProcess
 * (no clean-up runs in them: the death the ledger must detect). The parent
 * observes through the ledger's lock-free snapshot, polling with a
 * deadline (never a fixed sleep). */
#include <windows.h>

#include <sddl.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "clock.h"
#include "ledger.h"
#include "ledger_mailbox.h"
#include "proc.h"
#include "ledger_read.h"
#include "plan.h"
#include "tp_json.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define EVENTUALLY_MS 20000

static const char *CONF =
    "[card 0]\nheadroom = 0\n"
    "[tenant a]\nlimit = 900MiB\non_limit = wait:30s\n"
    "[tenant b]\nreserve = 100MiB\nlimit = 1GiB\n";

static int g_failed;
static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s: ", ok ? "ok" : "FAILED");
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
  if (!ok) g_failed = 1;
}

static void make_plan(vs_plan *plan) {
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX];
  if (!cfg || vs_config_parse_string(CONF, "t.conf", cfg, err, sizeof err) ||
      vs_plan_build(cfg, 0, NULL, 1 * GiB, plan, err, sizeof err)) {
    printf("FAILED: plan: %s\n", cfg ? err : "out of memory");
    exit(1);
  }
  free(cfg);
}

static vs_ledger *open_ledger(const char *dir, const char *tenant) {
  static vs_plan plan;
  char err[VS_ERR_MAX];
  make_plan(&plan);
  vs_ledger *h = vs_ledger_open(dir, "0", &plan, tenant, err, sizeof err);
  if (!h) {
    printf("FAILED: open the ledger in %s as %s: %s\n", dir, tenant, err);
    exit(1);
  }
  return h;
}

/* ---- Children --------------------------------------------------------------- */
static int child(const char *dir, const char *role, const char *tenant, uint64_t bytes) {
  vs_ledger *h = open_ledger(dir, tenant);
  vs_refusal why;
  if (!strcmp(role, "hold")) {
    if (vs_ledger_charge(h, bytes, &why)) return 3;
  } else if (!strcmp(role, "lockhold")) {
    /* Stops inside the ledger's lock during the charge (the test hook). */
    vs_ledger_set_test_hook(h, VS_LEDGER_HOOK_STOP);
    vs_ledger_charge(h, bytes, &why);
    return 4; /* never reached while the hook stops the thread */
  } else if (!strcmp(role, "holdcheck")) {
    if (vs_ledger_charge(h, bytes, &why)) return 3;
    for (;;) {
      vs_ledger_check(h);
      Sleep(50);
    }
  } else if (!strcmp(role, "answer")) {
    /* The shim's side of a dump request, with waits of 60 s: an answer
     * within the parent's 20 s comes only from a wake across processes. */
    vs_mailbox_map m;
    char err[VS_ERR_MAX];
    if (vs_mailbox_map_open(dir, "0", &m, err, sizeof err)) return 5;
    int slot = vs_mailbox_find(&m, vs_plat_pid(), vs_plat_self_start_time(), 0);
    if (slot < 0) return 6;
    for (;;) {
      uint32_t req;
      if (vs_mailbox_pending(&m, slot, &req)) {
        char path[64];
        snprintf(path, sizeof path, "C:\\dumps\\dump-%u.json", req);
        vs_mailbox_answer(&m, slot, req, path);
      } else {
        vs_mailbox_req_wait(&m, slot, req, 60ull * 1000000000ull);
      }
    }
  } else if (!strcmp(role, "holdfree")) {
    if (vs_ledger_charge(h, bytes, &why)) return 3;
    Sleep(1000);
    vs_ledger_uncharge(h, bytes);
  } else {
    return 2;
  }
  for (;;) Sleep(1000); /* until TerminateProcess */
}

/* ---- Parent ------------------------------------------------------------------ */
static char g_self[MAX_PATH], g_dir[MAX_PATH];

static HANDLE start(const char *role, const char *tenant, uint64_t bytes) {
  char cmd[3 * MAX_PATH];
  snprintf(cmd, sizeof cmd, "\"%s\" --child \"%s\" %s %s %llu", g_self, g_dir, role, tenant, (unsigned long long)bytes);
  STARTUPINFOA si;
  PROCESS_INFORMATION pi;
  memset(&si, 0, sizeof si);
  si.cb = sizeof si;
  if (!CreateProcessA(NULL, cmd, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi)) {
    printf("FAILED: CreateProcess %s: error %lu\n", cmd, GetLastError());
    exit(1);
  }
  CloseHandle(pi.hThread);
  return pi.hProcess;
}

static void end(HANDLE p) {
  TerminateProcess(p, 9);
  WaitForSingleObject(p, INFINITE);
  CloseHandle(p);
}

static vs_ledger_snapshot *g_snap;
/* The tenant's usage by live processes (snapshot), or -1 when unreadable. */
static long long used_of(const char *tenant, int *nprocs) {
  char err[VS_ERR_MAX];
  if (vs_ledger_snapshot_read(g_dir, "0", g_snap, err, sizeof err)) return -1;
  for (int i = 0; i < g_snap->ntenants; i++)
    if (!strcmp(g_snap->tenants[i].name, tenant)) {
      if (nprocs) *nprocs = g_snap->tenants[i].nprocs;
      return (long long)g_snap->tenants[i].used;
    }
  if (nprocs) *nprocs = 0;
  return 0;
}

/* Polls until the tenant's live usage is want (and, when procs >= 0, it
 * has that many live processes); returns the last value seen. */
static long long await_used(const char *tenant, uint64_t want, int procs) {
  long long u = -1;
  int n = -1;
  for (DWORD t0 = GetTickCount(); GetTickCount() - t0 < EVENTUALLY_MS; Sleep(20)) {
    u = used_of(tenant, &n);
    if (u == (long long)want && (procs < 0 || n == procs)) break;
  }
  return u;
}

static void case_two_procs(void) {
  HANDLE p1 = start("hold", "a", 100 * MiB), p2 = start("hold", "a", 50 * MiB);
  long long u = await_used("a", 150 * MiB, 2);
  check(u == (long long)(150 * MiB), "two processes charge tenant a: 100 MiB + 50 MiB = %lld MiB", u / (long long)MiB);
  end(p1);
  end(p2);
}

static void case_reclaim(void) {
  HANDLE p1 = start("hold", "a", 300 * MiB), p2 = start("hold", "a", 200 * MiB);
  long long u = await_used("a", 500 * MiB, 2);
  check(u == (long long)(500 * MiB), "before: tenant a holds %lld MiB", u / (long long)MiB);
  end(p1); /* TerminateProcess: its slot lock goes with the process */
  vs_ledger *h = open_ledger(g_dir, "b"); /* the next process to attach reclaims the dead */
  u = await_used("a", 200 * MiB, 1);
  check(u == (long long)(200 * MiB), "after TerminateProcess of the 300 MiB process: tenant a holds %lld MiB", u / (long long)MiB);
  check(g_snap->dead_bytes == 0, "nothing of the dead process is left unreclaimed (%llu bytes)", (unsigned long long)g_snap->dead_bytes);
  /* Admission sees the reclaimed bytes: 1 GiB card, a holds 200 MiB, b reserves 100 MiB. */
  vs_refusal why;
  check(vs_ledger_charge(h, 700 * MiB, &why) == 0, "tenant b may take 700 MiB of what was reclaimed");
  vs_ledger_close(h);
  end(p2);
}

struct charger {
  vs_ledger *h;
  uint64_t n;
  volatile LONG done;
  int rc;
};
static DWORD WINAPI charge_thread(void *arg) {
  struct charger *c = arg;
  vs_refusal why;
  c->rc = vs_ledger_charge(c->h, c->n, &why);
  InterlockedExchange(&c->done, 1);
  return 0;
}

static void case_lock_owner_killed(void) {
  char log[MAX_PATH + 32], logpath[MAX_PATH];
  snprintf(logpath, sizeof logpath, "%s\\parent.log", g_dir);
  snprintf(log, sizeof log, "info,file:%s", logpath);
  SetEnvironmentVariableA("VRAMSHIM_LOG", log);
  _putenv_s("VRAMSHIM_LOG", log);
  vs_ledger *h = open_ledger(g_dir, "b"); /* the ledger exists before the child locks it */
  HANDLE p = start("lockhold", "a", 10 * MiB);
  /* The child is inside the lock once its slot is listed and a charge of
   * ours cannot complete; then it is ended there. */
  int n = 0;
  for (DWORD t0 = GetTickCount(); GetTickCount() - t0 < EVENTUALLY_MS && n < 1; Sleep(20)) used_of("a", &n);
  check(n == 1, "the locking child attached (%d process of tenant a)", n);
  struct charger c = {h, 1 * MiB, 0, -1};
  HANDLE t = CreateThread(NULL, 0, charge_thread, &c, 0, NULL);
  Sleep(200); /* within the lock's 500 ms lease (ledger_lock.h): only the death frees it */
  int blocked = !InterlockedCompareExchange(&c.done, 0, 0);
  check(blocked, "while the child stops inside the lock, our charge waits");
  end(p); /* TerminateProcess inside the lock: its slot's byte lock goes with it */
  DWORD w = WaitForSingleObject(t, EVENTUALLY_MS);
  check(w == WAIT_OBJECT_0 && c.rc == 0, "after the owner was ended inside the lock, our charge completes (%s)",
        w == WAIT_OBJECT_0 ? "done" : "still waiting");
  vs_ledger_close(h);
  FILE *f = fopen(logpath, "rb");
  char text[8192] = "";
  size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[got] = 0;
  if (f) fclose(f);
  check(strstr(text, "died holding the lock; totals rebuilt") != NULL,
        "the next locker found the holder's slot dead and rebuilt the totals (log: %s)", got ? "present" : "empty");
  long long u = await_used("a", 0, 0);
  check(u == 0, "the ended child's usage is gone (%lld bytes)", u);
  SetEnvironmentVariableA("VRAMSHIM_LOG", NULL);
  _putenv_s("VRAMSHIM_LOG", "");
  if (t) CloseHandle(t);
}

static void case_wait_wake(void) {
  /* a may hold 900 MiB; a child holds 800 MiB for a second, then gives it back. */
  HANDLE p = start("holdfree", "a", 800 * MiB);
  long long u = await_used("a", 800 * MiB, 1);
  check(u == (long long)(800 * MiB), "the child holds %lld MiB of tenant a", u / (long long)MiB);
  vs_ledger *h = open_ledger(g_dir, "a");
  vs_refusal why;
  DWORD t0 = GetTickCount();
  int rc = vs_ledger_wait_charge(h, 400 * MiB, EVENTUALLY_MS, &why);
  DWORD ms = GetTickCount() - t0;
  check(rc == 0, "a charge of 400 MiB over the limit waits and is admitted once the other process frees (after %lu ms)",
        (unsigned long)ms);
  vs_ledger_close(h);
  end(p);
}

/* The ledger file deleted while a process uses it: the next process makes
 * a new one, and the user re-attaches to it carrying its usage (it checks
 * the path at its next ledger call, or within a second by itself: here a
 * "holdcheck" child calls vs_ledger_check every 50 ms). */
static void case_deleted(void) {
  HANDLE p = start("holdcheck", "a", 128 * MiB);
  long long u = await_used("a", 128 * MiB, 1);
  check(u == (long long)(128 * MiB), "the child holds %lld MiB of tenant a", u / (long long)MiB);
  char path[MAX_PATH + 32];
  snprintf(path, sizeof path, "%s\\card-0.ledger", g_dir);
  BOOL del = DeleteFileA(path);
  check(del, "the ledger file in use can be deleted (error %lu)", del ? 0ul : (unsigned long)GetLastError());
  vs_ledger *h = open_ledger(g_dir, "b"); /* makes a new file at the path */
  u = await_used("a", 128 * MiB, 1);
  check(u == (long long)(128 * MiB), "the child re-attached to the new ledger with its 128 MiB (%lld MiB seen)",
        u / (long long)MiB);
  vs_ledger_close(h);
  end(p);
}

/* Why the Windows map guard has nothing to catch: a ledger mapped by a
 * live process cannot be truncated (Linux: SIGBUS in every user). */
static void case_truncate(void) {
  HANDLE p = start("hold", "a", 32 * MiB);
  long long u = await_used("a", 32 * MiB, 1);
  check(u == (long long)(32 * MiB), "the child holds %lld MiB of tenant a", u / (long long)MiB);
  char path[MAX_PATH + 32];
  snprintf(path, sizeof path, "%s\\card-0.ledger", g_dir);
  HANDLE f = CreateFileA(path, GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                         NULL, OPEN_EXISTING, 0, NULL);
  check(f != INVALID_HANDLE_VALUE, "the ledger opens for writing");
  LARGE_INTEGER at = {.QuadPart = 64};
  BOOL cut = SetFilePointerEx(f, at, NULL, FILE_BEGIN) && SetEndOfFile(f);
  DWORD e = cut ? 0 : GetLastError();
  check(!cut && e == ERROR_USER_MAPPED_FILE, "truncating it while mapped is refused (error %lu, ERROR_USER_MAPPED_FILE is %d)",
        (unsigned long)e, ERROR_USER_MAPPED_FILE);
  CloseHandle(f);
  u = await_used("a", 32 * MiB, 1);
  check(u == (long long)(32 * MiB), "the ledger is intact (%lld MiB of tenant a)", u / (long long)MiB);
  end(p);
}

/* The ledger folder made here grants nobody but its user, SYSTEM and the
 * Administrators: no entry for Everyone (WD), Users (BU) or Authenticated
 * Users (AU). Wine keeps no ACL a program sets (it answers SYSTEM + the
 * user for every file), so under Wine this proves only that much; the
 * exact ACL (dir.c: protected, user + SYSTEM + Administrators) is not. */
static void case_dir_acl(void) {
  vs_ledger *h = open_ledger(g_dir, "a");
  BYTE buf[4096];
  DWORD need = 0;
  BOOL ok = GetFileSecurityA(g_dir, DACL_SECURITY_INFORMATION, (PSECURITY_DESCRIPTOR)buf, sizeof buf, &need);
  LPSTR text = NULL;
  if (ok) ok = ConvertSecurityDescriptorToStringSecurityDescriptorA((PSECURITY_DESCRIPTOR)buf, SDDL_REVISION_1,
                                                                   DACL_SECURITY_INFORMATION, &text, NULL);
  check(ok, "the folder's ACL reads back (%s)", ok ? text : "error");
  if (ok) {
    check(strstr(text, "(A;") && !strstr(text, ";;;WD)") && !strstr(text, ";;;BU)") && !strstr(text, ";;;AU)"),
          "no entry grants Everyone, Users or Authenticated Users");
    LocalFree(text);
  }
  vs_ledger_close(h);
}

/* Dump requests through the ledger's mailbox (what `vramshim dump --pid`
 * and the shim's thread do), woken across processes by wake.h's events. */
static void case_mailbox(void) {
  HANDLE p = start("answer", "a", 0);
  int pid = (int)GetProcessId(p);
  int n = 0;
  for (DWORD t0 = GetTickCount(); GetTickCount() - t0 < EVENTUALLY_MS && n < 1; Sleep(20)) used_of("a", &n);
  check(n == 1, "the answering child attached");
  vs_mailbox_map m;
  char err[VS_ERR_MAX];
  check(vs_mailbox_map_open(g_dir, "0", &m, err, sizeof err) == 0, "the tool maps the ledger's mailboxes");
  int slot = vs_mailbox_find(&m, pid, 0, 0);
  check(slot >= 0, "the child's slot is found by its pid %d", pid);
  Sleep(200); /* let the child reach its wait: the wake, not the first check, must answer */
  unsigned long worst = 0;
  int answered = 0;
  for (int round = 0; round < 5 && slot >= 0; round++) {
    uint32_t seq = vs_mailbox_post(&m, slot);
    char path[512] = "", want[64];
    DWORD t0 = GetTickCount();
    int r = vs_mailbox_await(&m, slot, pid, seq, vs_mono_ns() + EVENTUALLY_MS * 1000000ull, path, sizeof path);
    unsigned long ms = GetTickCount() - t0;
    if (ms > worst) worst = ms;
    snprintf(want, sizeof want, "C:\\dumps\\dump-%u.json", seq);
    answered += r == 0 && !strcmp(path, want);
    Sleep(100);
  }
  check(answered == 5, "5 of 5 requests answered with their own path (%d; slowest %lu ms, the child waits 60 s per sleep)",
        answered, worst);
  end(p);
  if (slot >= 0) {
    uint32_t seq = vs_mailbox_post(&m, slot);
    char path[512];
    int r = vs_mailbox_await(&m, slot, pid, seq, vs_mono_ns() + EVENTUALLY_MS * 1000000ull, path, sizeof path);
    check(r == -1, "a request to the ended process says so (%d)", r);
  }
  vs_mailbox_map_close(&m);
}

/* Not a test: prints what a charge + uncharge pair costs here (each takes
 * the ledger's named mutex: under Wine a wineserver round trip). */
static void case_bench(void) {
  vs_ledger *h = open_ledger(g_dir, "a");
  vs_refusal why;
  enum { N = 20000 };
  uint64_t t0 = vs_mono_ns();
  for (int i = 0; i < N; i++) {
    vs_ledger_charge(h, 4096, &why);
    vs_ledger_uncharge(h, 4096);
  }
  uint64_t ns = vs_mono_ns() - t0;
  printf("%d charge + uncharge pairs: %.2f us per pair\n", N, (double)ns / N / 1000.0);
  vs_ledger_close(h);
}

/* Runs cmd with its output (stdout, and stderr when with_stderr; else
 * stderr goes to ours) into out: its exit code (STILL_ACTIVE after
 * EVENTUALLY_MS: it was ended then), or ~0 when it did not start. */
static DWORD run_tool_to(char *cmd, char *out, DWORD size, int with_stderr) {
  SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
  HANDLE rd, wr;
  CreatePipe(&rd, &wr, &sa, 0);
  SetHandleInformation(rd, HANDLE_FLAG_INHERIT, 0);
  STARTUPINFOA si;
  PROCESS_INFORMATION pi;
  memset(&si, 0, sizeof si);
  si.cb = sizeof si;
  si.dwFlags = STARTF_USESTDHANDLES;
  si.hStdOutput = wr;
  si.hStdError = with_stderr ? wr : GetStdHandle(STD_ERROR_HANDLE);
  si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  out[0] = 0;
  if (!CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
    printf("cannot start %s: error %lu\n", cmd, GetLastError());
    CloseHandle(rd);
    CloseHandle(wr);
    return ~0ul;
  }
  CloseHandle(wr);
  /* Read while it runs (a full pipe would stop it), until it ends or the deadline. */
  DWORD code = STILL_ACTIVE, n = 0, got, avail;
  for (DWORD t0 = GetTickCount();;) {
    int ended = WaitForSingleObject(pi.hProcess, 10) == WAIT_OBJECT_0;
    while (n < size - 1 && PeekNamedPipe(rd, NULL, 0, NULL, &avail, NULL) && avail &&
           ReadFile(rd, out + n, avail < size - 1 - n ? avail : size - 1 - n, &got, NULL) && got)
      n += got;
    if (ended) {
      GetExitCodeProcess(pi.hProcess, &code);
      break;
    }
    if (GetTickCount() - t0 > EVENTUALLY_MS) {
      TerminateProcess(pi.hProcess, STILL_ACTIVE);
      break;
    }
  }
  out[n] = 0;
  CloseHandle(pi.hProcess);
  CloseHandle(pi.hThread);
  CloseHandle(rd);
  return code;
}

static DWORD run_tool(char *cmd, char *out, DWORD size) { return run_tool_to(cmd, out, size, 1); }

/* Issue 10 on Windows: a named pipe given as the config file is refused at
 * once (never read, never waited on), with a message naming it. */
static void case_pipe_config(const char *tool) {
  char pipe[128];
  snprintf(pipe, sizeof pipe, "\\\\.\\pipe\\vramshim-test-%lu", (unsigned long)GetCurrentProcessId());
  HANDLE srv = CreateNamedPipeA(pipe, PIPE_ACCESS_DUPLEX, PIPE_TYPE_BYTE | PIPE_WAIT, 4, 4096, 4096, 0, NULL);
  check(srv != INVALID_HANDLE_VALUE, "a named pipe %s listens", pipe);
  char cmd[3 * MAX_PATH];
  snprintf(cmd, sizeof cmd, "\"%s\" check %s", tool, pipe);
  static char out[1 << 14];
  DWORD t0 = GetTickCount();
  DWORD code = run_tool(cmd, out, sizeof out);
  check(code == 1, "vramshim check on the pipe exits 1 (%lu) after %lu ms", (unsigned long)code,
        (unsigned long)(GetTickCount() - t0));
  check(strstr(out, "not a regular file") != NULL && strstr(out, "vramshim") == out, "the message says why: %s", out);
  CloseHandle(srv);
}

/* vramshim.exe status --json on a ledger with a live process. */
static void case_status(const char *tool) {
  HANDLE p = start("hold", "b", 64 * MiB);
  long long u = await_used("b", 64 * MiB, 1);
  check(u == (long long)(64 * MiB), "the child holds 64 MiB of tenant b");
  char cmd[3 * MAX_PATH];
  snprintf(cmd, sizeof cmd, "\"%s\" status --json", tool);
  char env[MAX_PATH + 64];
  char conf[MAX_PATH];
  snprintf(conf, sizeof conf, "%s\\status.conf", g_dir);
  FILE *cf = fopen(conf, "wb");
  if (cf) {
    fprintf(cf, "[global]\nledger_dir = %s\n", g_dir);
    fclose(cf);
  }
  snprintf(env, sizeof env, "%s", conf);
  SetEnvironmentVariableA("VRAMSHIM_CONFIG", env);
  static char out[1 << 16];
  DWORD code = run_tool_to(cmd, out, sizeof out, 0);   /* the JSON alone: stderr to ours */
  SetEnvironmentVariableA("VRAMSHIM_CONFIG", NULL);
  check(code == 0, "vramshim status --json exits 0 (%lu)", (unsigned long)code);
  /* Parsed with the project's strict parser, tenant b's usage read. */
  vs_json doc;
  int parsed = tj_parse(out, &doc, "status --json") == 0;
  check(parsed, "status --json parses");
  const vs_json *tb = NULL;
  for (size_t c = 0; parsed && tj_at(&doc, "cards") && c < tj_at(&doc, "cards")->n && !tb; c++)
    tb = tj_find_str(&tj_at(&doc, "cards")->items[c], "tenants", "name", "b");
  check(tb && tj_u64_is(tb, "used", 64 * MiB), "status lists tenant b holding %llu bytes",
        (unsigned long long)(64 * MiB));
  if (parsed) vs_json_free(&doc);
  if (g_failed) printf("status output:\n%s\n", out);
  end(p);
}

/* A Unix path handed over by ctest ("/work/...") as Wine's Z: drive path. */
static void win_path(const char *in, char *out, size_t len) {
  if (in[0] == '/') snprintf(out, len, "Z:%s", in);
  else snprintf(out, len, "%s", in);
  for (char *s = out; *s; s++)
    if (*s == '/') *s = '\\';
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc == 6 && !strcmp(argv[1], "--child")) return child(argv[2], argv[3], argv[4], strtoull(argv[5], NULL, 10));
  if (argc != 3) {
    fprintf(stderr, "usage: win_ledger TOOL CASE | --child DIR ROLE TENANT BYTES\n");
    return 2;
  }
  GetModuleFileNameA(NULL, g_self, sizeof g_self);
  char tmp[MAX_PATH];
  GetTempPathA(sizeof tmp, tmp);
  snprintf(g_dir, sizeof g_dir, "%svramshim-test-%lu-%s", tmp, (unsigned long)GetCurrentProcessId(), argv[2]);
  g_snap = malloc(sizeof *g_snap);
  char tool[MAX_PATH];
  win_path(argv[1], tool, sizeof tool);
  if (!strcmp(argv[2], "two_procs")) case_two_procs();
  else if (!strcmp(argv[2], "reclaim")) case_reclaim();
  else if (!strcmp(argv[2], "lock_owner_killed")) case_lock_owner_killed();
  else if (!strcmp(argv[2], "wait_wake")) case_wait_wake();
  else if (!strcmp(argv[2], "status")) case_status(tool);
  else if (!strcmp(argv[2], "deleted")) case_deleted();
  else if (!strcmp(argv[2], "truncate")) case_truncate();
  else if (!strcmp(argv[2], "dir_acl")) case_dir_acl();
  else if (!strcmp(argv[2], "pipe_config")) case_pipe_config(tool);
  else if (!strcmp(argv[2], "mailbox")) case_mailbox();
  else if (!strcmp(argv[2], "bench")) case_bench();
  else {
    fprintf(stderr, "unknown case %s\n", argv[2]);
    return 2;
  }
  char cmd[MAX_PATH + 32];
  snprintf(cmd, sizeof cmd, "rmdir /s /q \"%s\" >nul 2>nul", g_dir);
  system(cmd);
  printf("%s\n", g_failed ? "FAILED" : "passed");
  return g_failed;
}

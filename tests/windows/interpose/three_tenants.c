/* The three-tenant card under the shim, under Wine (issue 12): three
 * processes at once, each under `vramshim.exe run --tenant X --config F`
 * (tenant_worker.exe, driven line by line through pipes), on one simulated
 * 3 GiB card, with the config this program writes:
 *   a: reserve 1 GiB, limit 1.5 GiB, fail;  b: reserve 512 MiB, limit 3 GiB,
 *   fail;  c: limit 1 GiB, wait:60s;  headroom 0, arena off (usage exact).
 * Checked, in order (docs/config.md's admission rule and view):
 *   1. each sees its own cuMemGetInfo view (a 1.5/1.5 GiB, b 2/2, c 1/1);
 *   2. b takes 2 GiB; 64 MiB more is refused although the card has 1 GiB
 *      free (a's reservation is kept); a then gets that 1 GiB; the views;
 *   3. a is refused above its limit (b freed 1 GiB: the card has room);
 *   4. c's 1 GiB request waits (wait:60s) and is admitted once b frees;
 *   5. a, holding 1.5 GiB, is ended with TerminateProcess: b eventually
 *      gets 1 GiB (possible only once a's usage is reclaimed: a's
 *      reservation of 1 GiB stays), and `vramshim.exe status --json` no
 *      longer lists a's process.
 * Ordering comes from the workers' answers, never from sleeps; every
 * "eventually" is bounded by 30 s.
 * usage: three_tenants VRAMSHIM.EXE TENANT_WORKER.EXE WORKDIR */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "tp_json.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define CUDA_ERROR_OUT_OF_MEMORY 2

static int g_fails;
static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("three_tenants: %s: ", ok ? "ok" : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (!ok) g_fails++;
}

typedef struct {
  const char *tenant;
  HANDLE proc;     /* the launcher */
  HANDLE in, out;  /* our ends of the worker's stdin and stdout */
  unsigned long pid;  /* the worker itself */
  char line[256];
} worker;

static int start(worker *w, const char *tool, const char *exe, const char *conf) {
  SECURITY_ATTRIBUTES sa = {.nLength = sizeof sa, .bInheritHandle = TRUE};
  HANDLE in_r, in_w, out_r, out_w;
  if (!CreatePipe(&in_r, &in_w, &sa, 0) || !CreatePipe(&out_r, &out_w, &sa, 0)) return -1;
  SetHandleInformation(in_w, HANDLE_FLAG_INHERIT, 0);
  SetHandleInformation(out_r, HANDLE_FLAG_INHERIT, 0);
  char cmd[4 * MAX_PATH];
  snprintf(cmd, sizeof cmd, "\"%s\" run --tenant %s --config \"%s\" -- \"%s\"", tool, w->tenant, conf, exe);
  STARTUPINFOA si = {.cb = sizeof si, .dwFlags = STARTF_USESTDHANDLES};
  si.hStdInput = in_r;
  si.hStdOutput = out_w;
  si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
  PROCESS_INFORMATION pi;
  BOOL ok = CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi);
  CloseHandle(in_r);
  CloseHandle(out_w);
  if (!ok) return -1;
  CloseHandle(pi.hThread);
  w->proc = pi.hProcess;
  w->in = in_w;
  w->out = out_r;
  return 0;
}

/* The worker's next "@ " line within ms, or NULL (timeout or end). */
static const char *answer(worker *w, DWORD ms) {
  DWORD t0 = GetTickCount();
  size_t n = 0;
  for (;;) {
    DWORD avail = 0;
    if (!PeekNamedPipe(w->out, NULL, 0, NULL, &avail, NULL)) return NULL;   /* the worker is gone */
    if (!avail) {
      if (GetTickCount() - t0 > ms) return NULL;
      Sleep(5);
      continue;
    }
    char c;
    DWORD got = 0;
    if (!ReadFile(w->out, &c, 1, &got, NULL) || !got) return NULL;
    if (c == '\r') continue;
    if (c != '\n') {
      if (n + 1 < sizeof w->line) w->line[n++] = c;
      continue;
    }
    w->line[n] = 0;
    n = 0;
    if (!strncmp(w->line, "@ ", 2)) return w->line + 2;
    printf("three_tenants: [%s] %s\n", w->tenant, w->line);   /* anything else the program printed */
  }
}

static void tell_worker(worker *w, const char *fmt, ...) {
  char buf[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  DWORD put;
  WriteFile(w->in, buf, (DWORD)n, &put, NULL);
}

/* One command, one answer (30 s at most). */
static const char *ask(worker *w, const char *fmt, unsigned long arg) {
  tell_worker(w, fmt, arg);
  const char *a = answer(w, 30000);
  return a ? a : "(no answer)";
}

static int alloc(worker *w, unsigned long mib, int *err) {
  const char *a = ask(w, "alloc %lu\n", mib);
  int slot = -1;
  *err = -1;
  if (sscanf(a, "ok %d", &slot) == 1) return slot;
  if (sscanf(a, "err %d", err) != 1) printf("three_tenants: [%s] alloc: %s\n", w->tenant, a);
  return -1;
}

static int freed(worker *w, int slot) { return !strcmp(ask(w, "free %lu\n", (unsigned long)slot), "freed"); }

static void view(worker *w, unsigned long long want_free, unsigned long long want_total, const char *when) {
  unsigned long long f = 0, t = 0;
  const char *a = ask(w, "info\n", 0);
  int ok = sscanf(a, "info %llu %llu", &f, &t) == 2;
  check(ok && f == want_free && t == want_total, "%s: tenant %s sees free %llu MiB of %llu MiB (want %llu of %llu)",
        when, w->tenant, f / MiB, t / MiB, want_free / MiB, want_total / MiB);
}

/* The tool's status --json output, into out. */
static DWORD status(const char *tool, const char *ledger, char *out, size_t len) {
  SECURITY_ATTRIBUTES sa = {.nLength = sizeof sa, .bInheritHandle = TRUE};
  HANDLE r, wr;
  out[0] = 0;
  if (!CreatePipe(&r, &wr, &sa, 0)) return 1;
  SetHandleInformation(r, HANDLE_FLAG_INHERIT, 0);
  char cmd[3 * MAX_PATH];
  snprintf(cmd, sizeof cmd, "\"%s\" status --json --ledger-dir \"%s\"", tool, ledger);
  STARTUPINFOA si = {.cb = sizeof si, .dwFlags = STARTF_USESTDHANDLES};
  si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  si.hStdOutput = wr;
  si.hStdError = GetStdHandle(STD_ERROR_HANDLE);   /* the JSON alone in out */
  PROCESS_INFORMATION pi;
  BOOL ok = CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi);
  CloseHandle(wr);
  if (!ok) {
    CloseHandle(r);
    return 1;
  }
  size_t n = 0;
  DWORD got;
  while (n + 1 < len && ReadFile(r, out + n, (DWORD)(len - 1 - n), &got, NULL) && got) n += got;
  out[n] = 0;
  CloseHandle(r);
  WaitForSingleObject(pi.hProcess, 60000);
  DWORD code = 1;
  GetExitCodeProcess(pi.hProcess, &code);
  CloseHandle(pi.hProcess);
  CloseHandle(pi.hThread);
  return code;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc != 4) {
    printf("usage: three_tenants VRAMSHIM.EXE TENANT_WORKER.EXE WORKDIR\n");
    return 2;
  }
  const char *tool = argv[1], *exe = argv[2], *dir = argv[3];
  char ledger[MAX_PATH], conf[MAX_PATH];
  CreateDirectoryA(dir, NULL);
  snprintf(ledger, sizeof ledger, "%s\\ledger-%lu", dir, (unsigned long)GetCurrentProcessId());
  snprintf(conf, sizeof conf, "%s\\three.conf", dir);
  FILE *f = fopen(conf, "wb");
  if (!f) {
    printf("three_tenants: FAIL: cannot write %s\n", conf);
    return 1;
  }
  fprintf(f, "[global]\nledger_dir = %s\ndump_dir = %s\\dumps\narena = off\n\n[card 0]\nheadroom = 0\n\n"
             "[tenant a]\nreserve = 1GiB\nlimit = 1536MiB\non_limit = fail\n\n"
             "[tenant b]\nreserve = 512MiB\nlimit = 3GiB\non_limit = fail\n\n"
             "[tenant c]\nlimit = 1GiB\non_limit = wait:60s\n", ledger, dir);
  fclose(f);

  worker w[3] = {{.tenant = "a"}, {.tenant = "b"}, {.tenant = "c"}};
  worker *a = &w[0], *b = &w[1], *c = &w[2];
  for (int i = 0; i < 3; i++) {
    if (start(&w[i], tool, exe, conf)) {
      printf("three_tenants: FAIL: cannot start tenant %s's process\n", w[i].tenant);
      return 1;
    }
  }
  for (int i = 0; i < 3; i++) {
    const char *r = answer(&w[i], 60000);
    char shim[8] = "";
    int ok = r && sscanf(r, "ready pid=%lu shim=%7s", &w[i].pid, shim) == 2 && !strcmp(shim, "yes");
    check(ok, "tenant %s's process %lu runs under the shim (%s)", w[i].tenant, w[i].pid, r ? r : "no answer");
    if (!ok) return 1;
  }
  int e, s;

  /* 1. Three views: total = min(L, C - H - others' R), free the same at rest. */
  view(a, 1536 * MiB, 1536 * MiB, "at rest");
  view(b, 2 * GiB, 2 * GiB, "at rest");
  view(c, 1 * GiB, 1 * GiB, "at rest");

  /* 2. a's reservation is kept free from b. */
  int b1 = alloc(b, 1024, &e), b2 = alloc(b, 1024, &e);
  check(b1 >= 0 && b2 >= 0, "tenant b takes 2 GiB");
  s = alloc(b, 64, &e);
  check(s < 0 && e == CUDA_ERROR_OUT_OF_MEMORY,
        "tenant b is refused 64 MiB more (error %d): the card's last 1 GiB is a's reservation", e);
  view(a, 1 * GiB, 1536 * MiB, "b holds 2 GiB");
  view(b, 0, 2 * GiB, "b holds 2 GiB");
  view(c, 0, 1 * GiB, "b holds 2 GiB");
  int a1 = alloc(a, 1024, &e);
  check(a1 >= 0, "tenant a gets its reserved 1 GiB (error %d)", e);
  s = alloc(a, 64, &e);
  check(s < 0 && e == CUDA_ERROR_OUT_OF_MEMORY, "the card is full: tenant a is refused 64 MiB more (error %d)", e);

  /* 3. a's limit, with room on the card: 1.5 GiB + 64 MiB + b's 1 GiB + c's
   * nothing fits the card, so the refusal can only be the limit's. */
  check(freed(b, b2), "tenant b frees 1 GiB");
  int a2 = alloc(a, 512, &e);
  check(a2 >= 0, "tenant a takes 512 MiB more, up to its limit of 1.5 GiB (error %d)", e);
  s = alloc(a, 64, &e);
  check(s < 0 && e == CUDA_ERROR_OUT_OF_MEMORY, "tenant a is refused above its limit (error %d), the card has 512 MiB free",
        e);
  view(a, 0, 1536 * MiB, "a at its limit");
  view(b, 512 * MiB, 2 * GiB, "a at its limit, b holds 1 GiB");
  view(c, 512 * MiB, 1 * GiB, "a at its limit, b holds 1 GiB");

  /* 4. c waits for 1 GiB (only 512 MiB are free to it) until b frees. */
  tell_worker(c, "alloc 1024\n");
  const char *r = answer(c, 1000);
  check(r == NULL, "tenant c's 1 GiB request waits (%s)", r ? r : "no answer within 1 s");
  check(freed(b, b1), "tenant b frees its last 1 GiB");
  DWORD t0 = GetTickCount();
  r = answer(c, 30000);
  int c1 = -1;
  check(r && sscanf(r, "ok %d", &c1) == 1, "tenant c's waiting request is admitted %lu ms after b freed (%s)",
        (unsigned long)(GetTickCount() - t0), r ? r : "no answer within 30 s");

  /* 5. a ends by TerminateProcess holding 1.5 GiB; its usage is reclaimed. */
  HANDLE ap = OpenProcess(PROCESS_TERMINATE | SYNCHRONIZE, FALSE, a->pid);
  check(ap && TerminateProcess(ap, 9) && WaitForSingleObject(ap, 30000) == WAIT_OBJECT_0,
        "tenant a's process %lu ended by TerminateProcess while holding 1.5 GiB", a->pid);
  if (ap) CloseHandle(ap);
  WaitForSingleObject(a->proc, 30000);
  DWORD code = 0;
  GetExitCodeProcess(a->proc, &code);
  check(code == 9, "the launcher of tenant a returns its exit code 9 (%lu)", (unsigned long)code);
  /* Before the reclaim b may take only 3 - 1.5 (a's usage) - 1 (c) = 0.5 GiB;
   * after it 3 - 1 (a's reservation) - 1 (c) = 1 GiB. */
  int b3 = -1, tries = 0;
  t0 = GetTickCount();
  while (b3 < 0 && GetTickCount() - t0 < 30000) {
    tries++;
    b3 = alloc(b, 1024, &e);
    if (b3 < 0) Sleep(50);
  }
  check(b3 >= 0, "tenant b gets 1 GiB once a's usage is reclaimed (%d tries, %lu ms)", tries,
        (unsigned long)(GetTickCount() - t0));
  view(b, 0, 2 * GiB, "a dead and reclaimed, b and c hold 1 GiB each");
  /* status --json, parsed with the project's strict parser: the dead
   * process is gone from every card's processes, b's and c's are there. */
  static char out[1 << 16];
  int gone = 0, listed = 0;
  t0 = GetTickCount();
  do {
    code = status(tool, ledger, out, sizeof out);
    vs_json doc;
    if (code == 0 && vs_json_parse(out, strlen(out), &doc, NULL, 0) == 0) {
      const vs_json *cards = tj_at(&doc, "cards");
      int cards_ok = cards && cards->type == VS_JSON_ARRAY && cards->n > 0, a_in = 0, b_in = 0, c_in = 0;
      for (size_t k = 0; cards_ok && k < cards->n; k++) {
        cards_ok &= tj_at(&cards->items[k], "tenants") != NULL;
        a_in |= tj_find_int(&cards->items[k], "processes", "pid", a->pid) != NULL;
        b_in |= tj_find_int(&cards->items[k], "processes", "pid", b->pid) != NULL;
        c_in |= tj_find_int(&cards->items[k], "processes", "pid", c->pid) != NULL;
      }
      gone = cards_ok && !a_in;
      listed = b_in && c_in;
      vs_json_free(&doc);
    }
    if (!gone) Sleep(100);
  } while (!gone && GetTickCount() - t0 < 30000);
  check(gone && listed, "vramshim.exe status --json lists b's and c's processes, not the dead %lu (exit %lu)", a->pid,
        (unsigned long)code);
  if (!gone || g_fails) printf("three_tenants: status output:\n%s\n", out);

  /* The end: the living quit and give back. */
  for (int i = 1; i < 3; i++) {
    tell_worker(&w[i], "quit\n");
    WaitForSingleObject(w[i].proc, 30000);
    code = 1;
    GetExitCodeProcess(w[i].proc, &code);
    check(code == 0, "tenant %s's process exits 0 through the launcher (%lu)", w[i].tenant, (unsigned long)code);
  }
  printf("three_tenants: %d failed\n", g_fails);
  return g_fails ? 1 : 0;
}

/* The trace recorder on Windows (src/explain/trace.c over the platform
 * layer): events from two threads, through the writer thread and full
 * buffers, all in the file as RMM CSV; a process ended by TerminateProcess
 * has what it recorded more than a second before in its file.
 *   win_trace.exe            the parent
 *   win_trace.exe --child P  records 1000 events into pattern P, then waits to be ended */
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

static int g_failed;
static void check(int ok, const char *fmt, long long a, long long b) {
  printf("%s: ", ok ? "ok" : "FAILED");
  printf(fmt, a, b);
  printf("\n");
  if (!ok) g_failed = 1;
}

#define PER_THREAD 20000
static vs_trace *g_t;
static DWORD WINAPI worker(void *arg) {
  uint64_t base = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0; i < PER_THREAD; i++) {
    vs_trace_alloc(g_t, base + i * 4096, 4096, 0);
    vs_trace_free(g_t, base + i * 4096, 4096, 0);
  }
  return 0;
}

/* Lines of the file, and whether the first is the RMM header. */
static long long count_lines(const char *path, int *header) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char line[256];
  long long n = 0;
  *header = 0;
  while (fgets(line, sizeof line, f)) {
    if (n == 0) *header = !strcmp(line, "Thread,Time,Action,Pointer,Size,Stream\n");
    n++;
  }
  fclose(f);
  return n;
}

int main(int argc, char **argv) {
  char tmp[MAX_PATH], pattern[MAX_PATH + 64], err[256];
  if (argc == 3 && !strcmp(argv[1], "--child")) {
    vs_trace *t = vs_trace_create(argv[2], 0, err, sizeof err);
    if (!t) return 3;
    for (uint64_t i = 0; i < 500; i++) {
      vs_trace_alloc(t, 0x7f0000000000ull + i * 65536, 65536, 0);
      vs_trace_free(t, 0x7f0000000000ull + i * 65536, 65536, 0);
    }
    for (;;) Sleep(1000); /* ended by the parent, no flush at exit */
  }
  GetTempPathA(sizeof tmp, tmp);
  snprintf(pattern, sizeof pattern, "%strace-%lu-%%p-%%d.csv", tmp, (unsigned long)GetCurrentProcessId());
  g_t = vs_trace_create(pattern, 0, err, sizeof err);
  check(g_t != NULL, "a recorder is made", 0, 0);
  if (!g_t) return 1;
  HANDLE th[2];
  th[0] = CreateThread(NULL, 0, worker, (void *)(uintptr_t)0x100000000ull, 0, NULL);
  th[1] = CreateThread(NULL, 0, worker, (void *)(uintptr_t)0x900000000ull, 0, NULL);
  WaitForMultipleObjects(2, th, TRUE, INFINITE);
  uint64_t rec = 0, drop = 0;
  vs_trace_counts(g_t, &rec, &drop);
  char path[MAX_PATH + 64];
  snprintf(path, sizeof path, "%s", vs_trace_path(g_t));
  vs_trace_destroy(g_t);
  int header = 0;
  long long lines = count_lines(path, &header);
  check(rec == 4 * PER_THREAD && drop == 0, "%lld events recorded, %lld dropped", (long long)rec, (long long)drop);
  check(header && lines == 1 + 4 * PER_THREAD, "the file has the header and %lld lines of %lld events", lines - 1,
        4 * PER_THREAD);
  DeleteFileA(path);

  /* A child ended by TerminateProcess 1.5 s after its last event. */
  char self[MAX_PATH], cmd[3 * MAX_PATH], child_pattern[MAX_PATH + 64];
  GetModuleFileNameA(NULL, self, sizeof self);
  snprintf(child_pattern, sizeof child_pattern, "%strace-child-%lu-%%p.csv", tmp, (unsigned long)GetCurrentProcessId());
  snprintf(cmd, sizeof cmd, "\"%s\" --child \"%s\"", self, child_pattern);
  STARTUPINFOA si;
  PROCESS_INFORMATION pi;
  memset(&si, 0, sizeof si);
  si.cb = sizeof si;
  if (!CreateProcessA(NULL, cmd, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi)) return 1;
  char child_path[MAX_PATH + 64];
  vs_trace_expand(child_pattern, (long)pi.dwProcessId, 0, child_path, sizeof child_path);
  lines = -1;
  for (DWORD t0 = GetTickCount(); GetTickCount() - t0 < 20000 && lines != 1001; Sleep(50))
    lines = count_lines(child_path, &header);
  Sleep(1500);
  TerminateProcess(pi.hProcess, 9);
  WaitForSingleObject(pi.hProcess, INFINITE);
  lines = count_lines(child_path, &header);
  check(header && lines == 1001, "after TerminateProcess the child's file has its %lld events (of %lld)", lines - 1, 1000);
  CloseHandle(pi.hProcess);
  CloseHandle(pi.hThread);
  DeleteFileA(child_path);
  printf("%s\n", g_failed ? "FAILED" : "passed");
  return g_failed;
}

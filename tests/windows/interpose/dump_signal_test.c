/* The Windows side of dump_signal (src/platform/dump_signal.h): a process
 * listens; another process (this program started as "send PID") asks it
 * for a dump; the listener's callback must run, and a process that does
 * not listen is reported as such (ESRCH). */
#include "dump_signal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

static HANDLE g_seen;
static volatile LONG g_calls;

static void on_dump(void) {
  InterlockedIncrement(&g_calls);
  SetEvent(g_seen);
}

static int run_sender(int pid) {
  wchar_t self[MAX_PATH], cmd[MAX_PATH + 32];
  GetModuleFileNameW(NULL, self, MAX_PATH);
  swprintf(cmd, MAX_PATH + 32, L"\"%ls\" send %d", self, pid);
  STARTUPINFOW si = {.cb = sizeof si};
  PROCESS_INFORMATION pi;
  if (!CreateProcessW(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) return -1;
  WaitForSingleObject(pi.hProcess, 60000);
  DWORD code = 1;
  GetExitCodeProcess(pi.hProcess, &code);
  CloseHandle(pi.hProcess);
  CloseHandle(pi.hThread);
  return (int)code;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc == 3 && !strcmp(argv[1], "send")) return vs_plat_dump_signal_send(atoi(argv[2]), 1) == 0 ? 0 : 1;
  int fails = 0;
  /* Nobody listens yet: the sender must say so. */
  if (vs_plat_dump_signal_send((int)GetCurrentProcessId(), 1) == 0 || errno != ESRCH) {
    printf("dump_signal: FAIL: a request to a process that does not listen was not refused with ESRCH\n");
    fails++;
  }
  g_seen = CreateEventA(NULL, FALSE, FALSE, NULL);
  int e = vs_plat_dump_signal_install(1, on_dump);
  if (e) {
    printf("dump_signal: FAIL: install: %s\n", strerror(e));
    return 1;
  }
  for (int round = 1; round <= 2; round++) {
    int rc = run_sender((int)GetCurrentProcessId());
    if (rc != 0) {
      printf("dump_signal: FAIL: the sender process could not signal (exit %d)\n", rc);
      fails++;
      continue;
    }
    if (WaitForSingleObject(g_seen, 20000) != WAIT_OBJECT_0) {
      printf("dump_signal: FAIL: request %d from another process did not reach the callback within 20 s\n", round);
      fails++;
    }
  }
  printf("dump_signal: %ld callbacks for 2 requests from another process\n", (long)g_calls);
  if (g_calls != 2) fails++;
  printf("dump_signal: %s\n", fails ? "FAILED" : "ok");
  return fails ? 1 : 0;
}

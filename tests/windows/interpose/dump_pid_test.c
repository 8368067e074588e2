/* vramshim.exe dump --pid from outside, under Wine: a client runs under
 * `vramshim.exe run` holding 64 MiB (client hold), this program asks the
 * tool for a dump of it, and the tool's output (checked by the test's
 * regular expression) must be that process's dump with its 64 MiB live.
 * usage: dump_pid_test VRAMSHIM.EXE CLIENT.EXE PIDFILE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

static HANDLE start(const char *cmd) {
  STARTUPINFOA si = {.cb = sizeof si};
  PROCESS_INFORMATION pi;
  char *c = _strdup(cmd);
  BOOL ok = CreateProcessA(NULL, c, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi);
  free(c);
  if (!ok) return NULL;
  CloseHandle(pi.hThread);
  return pi.hProcess;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc != 4) return 2;
  DeleteFileA(argv[3]);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "\"%s\" run -- \"%s\" hold \"%s\"", argv[1], argv[2], argv[3]);
  HANDLE run = start(cmd);
  if (!run) {
    printf("dump_pid_test: FAIL: cannot start %s\n", cmd);
    return 1;
  }
  unsigned long pid = 0;
  for (int i = 0; i < 600 && !pid; i++) {   /* 60 s */
    FILE *f = fopen(argv[3], "r");
    if (f) {
      if (fscanf(f, "%lu", &pid) != 1) pid = 0;
      fclose(f);
    }
    if (!pid) Sleep(100);
  }
  int rc = 1;
  if (!pid) {
    printf("dump_pid_test: FAIL: the client under the shim never said its pid\n");
  } else {
    snprintf(cmd, sizeof cmd, "\"%s\" dump --pid %lu --timeout 20", argv[1], pid);
    printf("dump_pid_test: %s\n", cmd);
    HANDLE dump = start(cmd);
    DWORD code = 1;
    if (dump) {
      WaitForSingleObject(dump, 60000);
      GetExitCodeProcess(dump, &code);
      CloseHandle(dump);
    }
    printf("dump_pid_test: vramshim.exe dump exited with %lu\n", (unsigned long)code);
    rc = code == 0 ? 0 : 1;
  }
  char name[64];
  snprintf(name, sizeof name, "Local\\vramshim-test-hold-%lu", pid);
  HANDLE stop = OpenEventA(EVENT_MODIFY_STATE, FALSE, name);
  if (stop) SetEvent(stop);
  if (WaitForSingleObject(run, 60000) != WAIT_OBJECT_0) TerminateProcess(run, 1);
  DWORD rcode = 1;
  GetExitCodeProcess(run, &rcode);
  printf("dump_pid_test: the client exited with %lu\n", (unsigned long)rcode);
  return rc || rcode ? 1 : 0;
}

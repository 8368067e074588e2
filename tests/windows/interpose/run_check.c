/* run_check EXPECTED PROGRAM [ARGS]: runs the command line (not itself
 * under the shim) and passes when its exit code is EXPECTED: how a test
 * checks that `vramshim run` returns the program's own exit code, or that
 * a client run without the shim says so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: run_check EXPECTED PROGRAM [ARGS]\n");
    return 2;
  }
  char cmd[8192] = "";
  for (int i = 2; i < argc; i++) {
    strcat(cmd, i > 2 ? " \"" : "\"");
    strcat(cmd, argv[i]);
    strcat(cmd, "\"");
  }
  STARTUPINFOA si = {.cb = sizeof si};
  PROCESS_INFORMATION pi;
  fflush(NULL);
  if (!CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
    printf("run_check: FAIL: cannot run %s (error %lu)\n", cmd, GetLastError());
    return 1;
  }
  WaitForSingleObject(pi.hProcess, 120000);
  DWORD code = 1;
  GetExitCodeProcess(pi.hProcess, &code);
  long want = strtol(argv[1], NULL, 10);
  printf("run_check: %s exited with %lu (expected %ld)\n", cmd, (unsigned long)code, want);
  return (long)code == want ? 0 : 1;
}

/* Runs the Windows tool and compares what it prints with the Linux tool's
 * output recorded in a golden file (tests/windows/platform/golden/):
 *
 *   win_golden.exe [--drop-last-column] GOLDEN TOOL ARGS...
 *
 * Line ends are compared without CR (the Windows console's text mode adds
 * them). --drop-last-column: the last blank-separated field of each line is
 * left out (replay's ns/request, a wall-clock figure). Arguments that are
 * Unix paths ("/work/...", as ctest hands them) become Wine's Z: paths. */
#include <windows.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void win_path(const char *in, char *out, size_t len) {
  if (in[0] != '/') {
    snprintf(out, len, "%s", in);
    return;
  }
  snprintf(out, len, "Z:%s", in);
  for (char *s = out; *s; s++)
    if (*s == '/') *s = '\\';
}

/* CRs removed; with drop, each line without its last field. In place. */
static size_t normalise(char *t, int drop) {
  size_t w = 0, line = 0;
  for (size_t r = 0; t[r]; r++) {
    if (t[r] == '\r') continue;
    if (t[r] == '\n' && drop) {
      size_t e = w;
      while (e > line && t[e - 1] == ' ') e--;
      while (e > line && t[e - 1] != ' ') e--;
      while (e > line && t[e - 1] == ' ') e--;
      w = e;
    }
    t[w++] = t[r];
    if (t[r] == '\n') line = w;
  }
  t[w] = 0;
  return w;
}

int main(int argc, char **argv) {
  int a = 1, drop = 0;
  if (a < argc && !strcmp(argv[a], "--drop-last-column")) drop = 1, a++;
  if (argc - a < 2) {
    fprintf(stderr, "usage: win_golden [--drop-last-column] GOLDEN TOOL ARGS...\n");
    return 2;
  }
  char golden_path[MAX_PATH], arg[MAX_PATH];
  win_path(argv[a++], golden_path, sizeof golden_path);
  static char cmd[8192];
  size_t n = 0;
  for (; a < argc; a++) {
    win_path(argv[a], arg, sizeof arg);
    n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s\"%s\"", n ? " " : "", arg);
  }
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
  si.hStdError = wr;
  si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  if (!CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
    printf("FAILED: start %s: error %lu\n", cmd, GetLastError());
    return 1;
  }
  CloseHandle(wr);
  static char out[1 << 18], want[1 << 18];
  DWORD got, len = 0;
  while (len < sizeof out - 1 && ReadFile(rd, out + len, sizeof out - 1 - len, &got, NULL) && got) len += got;
  out[len] = 0;
  WaitForSingleObject(pi.hProcess, 60000);
  DWORD code = 1;
  GetExitCodeProcess(pi.hProcess, &code);
  FILE *f = fopen(golden_path, "rb");
  size_t wl = f ? fread(want, 1, sizeof want - 1, f) : 0;
  if (f) fclose(f);
  want[wl] = 0;
  normalise(out, drop);
  normalise(want, drop);
  int same = f && !strcmp(out, want);
  printf("%s: %s (exit %lu) prints %s\n", same ? "ok" : "FAILED", cmd, (unsigned long)code,
         same ? "the same as on Linux" : "something else");
  if (!same) printf("--- got:\n%s--- expected (%s):\n%s", out, golden_path, want);
  return same && code == 0 ? 0 : 1;
}

/* launch.h on Windows: the injecting launcher. The program is created
 * suspended (its first instruction not yet run), the shim is loaded into
 * it (inject.c; its DllMain patches the import tables), then it is resumed
 * and waited for; its exit code is the tool's. Ctrl-C reaches the program
 * (same console); the launcher ignores it and keeps waiting. */
#include "launch.h"

#include "windows/inject.h"
#include "windows/wutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include <windows.h>

const char vs_plat_shim_file[] = "vramshim.dll";
const char vs_plat_launch_how[] = "it is started suspended, vramshim.dll is injected, then it runs; children too";

void vs_plat_self_dir(char *out, size_t len) {
  wchar_t w[VS_WPATH];
  char path[VS_WPATH * 3];
  DWORD n = GetModuleFileNameW(NULL, w, VS_WPATH);
  out[0] = 0;
  if (n == 0 || n >= VS_WPATH || vs_win_utf8(w, path, (int)sizeof path)) return;
  char *sep = NULL;
  for (char *p = path; *p; p++)
    if (*p == '\\' || *p == '/') sep = p;
  if (!sep) return;
  sep[1] = 0;
  snprintf(out, len, "%s", path);
}

/* GetFileAttributesW of a UTF-8 path. */
static DWORD attributes(const char *path) {
  wchar_t w[VS_WPATH];
  return vs_win_wide(path, w, VS_WPATH) ? INVALID_FILE_ATTRIBUTES : GetFileAttributesW(w);
}

int vs_plat_readable(const char *path) {
  if (!path || !*path) return 0;
  DWORD a = attributes(path);
  return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}

int vs_plat_canonical(const char *path, char *out, size_t len) {
  wchar_t w[VS_WPATH], full[VS_WPATH];
  if (vs_win_wide(path, w, VS_WPATH)) return -1;
  DWORD n = GetFullPathNameW(w, VS_WPATH, full, NULL);
  if (n == 0 || n >= VS_WPATH || vs_win_utf8(full, out, (int)len)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return 0;
}

int vs_plat_realpath(const char *path, char *out, size_t len) {
  if (vs_plat_canonical(path, out, len)) return -1;
  if (attributes(out) == INVALID_FILE_ATTRIBUTES) {
    errno = ENOENT;
    return -1;
  }
  return 0;
}

int vs_plat_setenv(const char *name, const char *value) {
  /* The process environment block is what CreateProcess hands on. */
  wchar_t wn[256], *wv = malloc(32768 * sizeof *wv); /* an environment value's limit */
  int ok = wv && !vs_win_wide(name, wn, 256) && !vs_win_wide(value, wv, 32768) && SetEnvironmentVariableW(wn, wv);
  free(wv);
  return ok ? 0 : -1;
}

/* The launcher injects the shim into any program it can create; one it
 * cannot (another architecture) fails there with its reason. */
int vs_plat_launch_unreached(const char *prog, char *why, size_t len) {
  (void)prog, (void)why, (void)len;
  return 0;
}

int vs_plat_launch(const char *shim, char *const argv[], int *exit_code, char *why, size_t len) {
  wchar_t wshim_in[MAX_PATH], wshim[MAX_PATH];
  if (!MultiByteToWideChar(CP_UTF8, 0, shim, -1, wshim_in, MAX_PATH) ||
      !GetFullPathNameW(wshim_in, MAX_PATH, wshim, NULL)) {
    snprintf(why, len, "the shim's path %s is too long", shim);
    return -1;
  }
  size_t cap = 32768, at = 0;   /* CreateProcess's limit */
  wchar_t *cmd = calloc(cap, sizeof *cmd);
  if (!cmd) {
    snprintf(why, len, "out of memory");
    return -1;
  }
  for (int i = 0; argv[i]; i++) {
    wchar_t warg[4096];
    if (!MultiByteToWideChar(CP_UTF8, 0, argv[i], -1, warg, 4096) || vs_win_cmdline_append(cmd, cap, &at, warg)) {
      snprintf(why, len, "the command line of '%s' is too long", argv[0]);
      free(cmd);
      return -1;
    }
  }
  STARTUPINFOW si;
  memset(&si, 0, sizeof si);
  si.cb = sizeof si;
  si.dwFlags = STARTF_USESTDHANDLES;
  si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  si.hStdOutput = GetStdHandle(STD_OUTPUT_HANDLE);
  si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
  PROCESS_INFORMATION pi;
  fflush(NULL);
  if (!CreateProcessW(NULL, cmd, NULL, NULL, TRUE, CREATE_SUSPENDED, NULL, NULL, &si, &pi)) {
    DWORD e = GetLastError();
    snprintf(why, len, "cannot run '%s': %s (error %lu)", argv[0],
             e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND ? "no such program" : "CreateProcess failed",
             (unsigned long)e);
    free(cmd);
    return -1;
  }
  free(cmd);
  char err[512];
  if (vs_win_inject_or_end(&pi, wshim, err, sizeof err)) {
    snprintf(why, len, "cannot load the shim %s into '%s': %s", shim, argv[0], err);
    return -1;
  }
  SetConsoleCtrlHandler(NULL, TRUE);
  ResumeThread(pi.hThread);
  CloseHandle(pi.hThread);
  WaitForSingleObject(pi.hProcess, INFINITE);
  DWORD code = 0;
  GetExitCodeProcess(pi.hProcess, &code);
  CloseHandle(pi.hProcess);
  *exit_code = (int)code;
  return 0;
}

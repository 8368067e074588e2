/* child.h on Windows: the program and the driver copied into the scratch
 * folder (so the program's import of nvcuda.dll and the shim's real driver
 * are the sim given, never System32's nvcuda.dll: on a machine with a real
 * card that would be the card), created suspended with a pipe as its
 * stdout, the shim injected (inject.c), resumed, read, waited for. */
#include "child.h"

#include "windows/inject.h"
#include "windows/wutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include <windows.h>
#include <psapi.h>

const char vs_plat_driver_file[] = "nvcuda.dll";

int vs_plat_scratch_dir(const char *prefix, char *out, size_t len, char *err, size_t errlen) {
  wchar_t tmp[MAX_PATH];
  DWORD n = GetTempPathW(MAX_PATH, tmp);
  if (n == 0 || n >= MAX_PATH) {
    snprintf(err, errlen, "cannot find the temporary folder (error %lu)", (unsigned long)GetLastError());
    return -1;
  }
  char base[3 * MAX_PATH];
  if (vs_win_utf8(tmp, base, sizeof base)) {
    snprintf(err, errlen, "the temporary folder's name is too long");
    return -1;
  }
  /* A folder made here inherits the user's %TEMP% ACL. */
  for (int tries = 0; tries < 100; tries++) {
    LARGE_INTEGER t;
    QueryPerformanceCounter(&t);
    unsigned long tag = (unsigned long)((t.QuadPart ^ ((uint64_t)GetCurrentProcessId() << 20)) + (unsigned)tries * 7919u);
    if (snprintf(out, len, "%s%s%06lx", base, prefix, tag & 0xffffff) >= (int)len) {
      snprintf(err, errlen, "the folder name under %s is too long", base);
      return -1;
    }
    wchar_t w[VS_WPATH];
    if (vs_win_wide(out, w, VS_WPATH)) break;
    if (CreateDirectoryW(w, NULL)) return 0;
    if (GetLastError() != ERROR_ALREADY_EXISTS) break;
  }
  snprintf(err, errlen, "cannot make a folder under %s (error %lu)", base, (unsigned long)GetLastError());
  return -1;
}

int vs_plat_mkdir_private(const char *path) {
  wchar_t w[VS_WPATH];
  if (vs_win_wide(path, w, VS_WPATH)) return -1;
  if (CreateDirectoryW(w, NULL)) return 0;
  errno = vs_win_errno(GetLastError());
  return -1;
}

static void remove_tree_w(const wchar_t *dir) {
  wchar_t pat[VS_WPATH];
  if (swprintf(pat, VS_WPATH, L"%ls\\*", dir) < 0) return;
  WIN32_FIND_DATAW fd;
  HANDLE h = FindFirstFileW(pat, &fd);
  if (h != INVALID_HANDLE_VALUE) {
    do {
      if (!wcscmp(fd.cFileName, L".") || !wcscmp(fd.cFileName, L"..")) continue;
      wchar_t p[VS_WPATH];
      if (swprintf(p, VS_WPATH, L"%ls\\%ls", dir, fd.cFileName) < 0) continue;
      if ((fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) && !(fd.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT))
        remove_tree_w(p);
      else if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
        RemoveDirectoryW(p);   /* a junction: the link, never what it points at */
      else
        DeleteFileW(p);
    } while (FindNextFileW(h, &fd));
    FindClose(h);
  }
  RemoveDirectoryW(dir);
}

void vs_plat_remove_tree(const char *dir) {
  wchar_t w[VS_WPATH];
  if (!vs_win_wide(dir, w, VS_WPATH)) remove_tree_w(w);
}

/* The environment block for the child: ours, filtered, plus add. */
static wchar_t *child_env(int (*keep)(const char *entry), char *const add[]) {
  wchar_t *ours = GetEnvironmentStringsW();
  if (!ours) return NULL;
  size_t cap = 1;
  for (const wchar_t *e = ours; *e; e += wcslen(e) + 1) cap += wcslen(e) + 1;
  for (size_t i = 0; add && add[i]; i++) cap += strlen(add[i]) + 1;
  wchar_t *env = calloc(cap, sizeof *env);
  size_t at = 0;
  for (const wchar_t *e = ours; env && *e; e += wcslen(e) + 1) {
    char u[4 * VS_WPATH];
    if (vs_win_utf8(e, u, sizeof u)) continue;
    if (!_strnicmp(u, "VRAMSHIM_DRIVER=", 16) || (keep && !keep(u))) continue;
    wcscpy(env + at, e);
    at += wcslen(e) + 1;
  }
  FreeEnvironmentStringsW(ours);
  for (size_t i = 0; env && add && add[i]; i++) {
    int n = MultiByteToWideChar(CP_UTF8, 0, add[i], -1, env + at, (int)(cap - at - 1));
    if (n <= 0) {
      free(env);
      return NULL;
    }
    at += (size_t)n;
  }
  if (env) env[at] = 0;
  return env;
}

static const wchar_t *base_name(const wchar_t *p) {
  const wchar_t *b = p;
  for (; *p; p++)
    if (*p == L'\\' || *p == L'/') b = p + 1;
  return b;
}

int vs_plat_run_child(const char *shim, const char *driver_dir, const char *scratch, char *const argv[],
                      int (*keep)(const char *entry), char *const add[], char *out, size_t len,
                      vs_plat_child_result *res, char *why, size_t whylen) {
  memset(res, 0, sizeof *res);
  out[0] = 0;
  wchar_t wshim_in[VS_WPATH], wshim[VS_WPATH], wprog[VS_WPATH], wdir[VS_WPATH], wscratch[VS_WPATH];
  if (vs_win_wide(shim, wshim_in, VS_WPATH) || !GetFullPathNameW(wshim_in, VS_WPATH, wshim, NULL) ||
      vs_win_wide(argv[0], wprog, VS_WPATH) || vs_win_wide(driver_dir, wdir, VS_WPATH) ||
      vs_win_wide(scratch, wscratch, VS_WPATH)) {
    snprintf(why, whylen, "a path is too long");
    return -1;
  }
  /* The program and the driver side by side in the scratch folder. */
  wchar_t prog_copy[VS_WPATH], drv[VS_WPATH], drv_copy[VS_WPATH];
  swprintf(prog_copy, VS_WPATH, L"%ls\\%ls", wscratch, base_name(wprog));
  swprintf(drv, VS_WPATH, L"%ls\\nvcuda.dll", wdir);
  swprintf(drv_copy, VS_WPATH, L"%ls\\nvcuda.dll", wscratch);
  if (!CopyFileW(wprog, prog_copy, TRUE) || !CopyFileW(drv, drv_copy, TRUE)) {
    snprintf(why, whylen, "cannot copy %s and %s\\nvcuda.dll into %s (error %lu)", argv[0], driver_dir, scratch,
             (unsigned long)GetLastError());
    return -1;
  }
  char drv_u[4 * VS_WPATH], e_driver[4 * VS_WPATH + 32];
  vs_win_utf8(drv_copy, drv_u, sizeof drv_u);
  snprintf(e_driver, sizeof e_driver, "VRAMSHIM_DRIVER=%s", drv_u);
  size_t nadd = 0;
  while (add && add[nadd]) nadd++;
  char **all = calloc(nadd + 2, sizeof *all);
  if (!all) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < nadd; i++) all[i] = add[i];
  all[nadd] = e_driver;
  wchar_t *env = child_env(keep, all);
  free(all);
  size_t cap = 32768;
  wchar_t *cmd = calloc(cap, sizeof *cmd);
  size_t at = 0;
  int bad = !env || !cmd || vs_win_cmdline_append(cmd, cap, &at, prog_copy);
  for (int i = 1; !bad && argv[i]; i++) {
    wchar_t w[VS_WPATH];
    bad = vs_win_wide(argv[i], w, VS_WPATH) || vs_win_cmdline_append(cmd, cap, &at, w);
  }
  if (bad) {
    snprintf(why, whylen, "cannot start %s: its environment or command line does not fit", argv[0]);
    free(env);
    free(cmd);
    return -1;
  }
  SECURITY_ATTRIBUTES sa = {.nLength = sizeof sa, .bInheritHandle = TRUE};
  HANDLE rd = NULL, wr = NULL;
  if (!CreatePipe(&rd, &wr, &sa, 0)) {
    snprintf(why, whylen, "cannot start %s: no pipe (error %lu)", argv[0], (unsigned long)GetLastError());
    free(env);
    free(cmd);
    return -1;
  }
  SetHandleInformation(rd, HANDLE_FLAG_INHERIT, 0);
  STARTUPINFOW si;
  memset(&si, 0, sizeof si);
  si.cb = sizeof si;
  si.dwFlags = STARTF_USESTDHANDLES;
  si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  si.hStdOutput = wr;
  si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
  PROCESS_INFORMATION pi;
  fflush(NULL);
  BOOL ok = CreateProcessW(prog_copy, cmd, NULL, NULL, TRUE, CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT, env,
                           NULL, &si, &pi);
  DWORD e = GetLastError();
  CloseHandle(wr);
  free(env);
  free(cmd);
  if (!ok) {
    CloseHandle(rd);
    snprintf(why, whylen, "cannot run %s (error %lu)", argv[0], (unsigned long)e);
    return -1;
  }
  char err[512];
  if (vs_win_inject_or_end(&pi, wshim, err, sizeof err)) {
    CloseHandle(rd);
    snprintf(why, whylen, "cannot load the shim %s into %s: %s", shim, argv[0], err);
    return -1;
  }
  ResumeThread(pi.hThread);
  CloseHandle(pi.hThread);
  /* Keep the last part of whatever it says. */
  size_t got = 0, half = len / 2;
  for (;;) {
    if (got + 1 >= len) {
      memmove(out, out + half, got - half);
      got -= half;
    }
    DWORD n = 0;
    if (!ReadFile(rd, out + got, (DWORD)(len - 1 - got), &n, NULL) || n == 0) break;
    got += n;
  }
  out[got] = 0;
  CloseHandle(rd);
  WaitForSingleObject(pi.hProcess, INFINITE);
  DWORD code = 1;
  GetExitCodeProcess(pi.hProcess, &code);
  PROCESS_MEMORY_COUNTERS pmc;
  if (GetProcessMemoryInfo(pi.hProcess, &pmc, sizeof pmc)) res->max_rss = pmc.PeakWorkingSetSize;
  CloseHandle(pi.hProcess);
  res->exit_code = (int)code;
  return 0;
}

void *vs_plat_shim_sym(const char *name) {
  HMODULE shim = GetModuleHandleW(L"vramshim.dll");
  return shim ? (void *)GetProcAddress(shim, name) : NULL;
}

int vs_plat_open_files_short(uint64_t n) {
  (void)n;   /* the sim's allocations are sections, no CRT descriptors */
  return 0;
}

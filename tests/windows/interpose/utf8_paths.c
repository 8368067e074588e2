/* utf8_paths TOOL CLIENT: a config whose folder and file names are outside
 * the ANSI code page (Latin, Cyrillic, CJK) reaches the shim, both ways a
 * program is given one: `vramshim.exe run --config PATH` (the launcher's
 * command line) and VRAMSHIM_CONFIG set by the caller (read inside the
 * program by vramshim.dll). Each run prints the client's line; the test
 * passes when both show the config's 1 GiB limit and exit 0. Before the
 * launcher and the shim read UTF-16 (procenv.h), the ANSI argv turned
 * such names into '?' and both runs stopped with 78 (no such config). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include <windows.h>

static const char conf_text[] =
    "; written by utf8_paths.c\r\n[global]\r\narena = chunks\r\n\r\n[tenant limited]\r\nlimit = 1GiB\r\non_limit = fail\r\n";

static int run(const wchar_t *cmd) {
  wchar_t *c = _wcsdup(cmd);
  STARTUPINFOW si = {.cb = sizeof si};
  PROCESS_INFORMATION pi;
  fflush(NULL);
  if (!c || !CreateProcessW(NULL, c, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
    printf("utf8_paths: FAIL: cannot start (error %lu)\n", GetLastError());
    free(c);
    return -1;
  }
  free(c);
  WaitForSingleObject(pi.hProcess, 120000);
  DWORD code = 1;
  GetExitCodeProcess(pi.hProcess, &code);
  CloseHandle(pi.hThread);
  CloseHandle(pi.hProcess);
  return (int)code;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: utf8_paths TOOL CLIENT\n");
    return 2;
  }
  wchar_t tool[MAX_PATH], client[MAX_PATH], tmp[MAX_PATH], dir[MAX_PATH], conf[MAX_PATH], cmd[4 * MAX_PATH];
  if (!MultiByteToWideChar(CP_ACP, 0, argv[1], -1, tool, MAX_PATH) ||
      !MultiByteToWideChar(CP_ACP, 0, argv[2], -1, client, MAX_PATH) || !GetTempPathW(MAX_PATH, tmp))
    return 2;
  /* "vramshim-é-ж-配置-<pid>\\лимит.conf" */
  swprintf(dir, MAX_PATH, L"%lsvramshim-\u00e9-\u0436-\u914d\u7f6e-%lu", tmp, (unsigned long)GetCurrentProcessId());
  swprintf(conf, MAX_PATH, L"%ls\\\u043b\u0438\u043c\u0438\u0442.conf", dir);
  if (!CreateDirectoryW(dir, NULL)) {
    printf("utf8_paths: FAIL: cannot make the folder (error %lu)\n", GetLastError());
    return 1;
  }
  HANDLE f = CreateFileW(conf, GENERIC_WRITE, 0, NULL, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, NULL);
  DWORD wrote = 0;
  int ok = f != INVALID_HANDLE_VALUE && WriteFile(f, conf_text, (DWORD)strlen(conf_text), &wrote, NULL);
  if (f != INVALID_HANDLE_VALUE) CloseHandle(f);
  if (!ok) {
    printf("utf8_paths: FAIL: cannot write the config (error %lu)\n", GetLastError());
    return 1;
  }
  int fails = 0;
  swprintf(cmd, 4 * MAX_PATH, L"\"%ls\" check \"%ls\"", tool, conf);
  int c = run(cmd);
  printf("utf8_paths: check exited with %d\n", c);
  fails += c != 0;
  swprintf(cmd, 4 * MAX_PATH, L"\"%ls\" run --tenant limited --config \"%ls\" -- \"%ls\" --limit 1GiB", tool, conf,
           client);
  c = run(cmd);
  printf("utf8_paths: run --config exited with %d\n", c);
  fails += c != 0;
  SetEnvironmentVariableW(L"VRAMSHIM_CONFIG", conf);
  swprintf(cmd, 4 * MAX_PATH, L"\"%ls\" run --tenant limited -- \"%ls\" --limit 1GiB", tool, client);
  c = run(cmd);
  printf("utf8_paths: run with VRAMSHIM_CONFIG exited with %d\n", c);
  fails += c != 0;
  DeleteFileW(conf);
  RemoveDirectoryW(dir);
  printf("utf8_paths: %s\n", fails ? "FAIL" : "ok");
  return fails ? 1 : 0;
}

/* dynlib.h on Windows. The shim's own import table is never patched
 * (interpose.c), so LoadLibraryExW and GetProcAddress here are the real
 * ones, and a module already loaded by the program (the same file) is the
 * same HMODULE. */
#include "dynlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <windows.h>

#include "procenv.h"
#include "wutil.h"

const char *vs_plat_driver_default(void) {
  static char path[MAX_PATH * 3 + 16];
  if (!path[0]) {
    wchar_t wsys[MAX_PATH];
    char sys[MAX_PATH * 3];
    UINT n = GetSystemDirectoryW(wsys, MAX_PATH);
    if (n == 0 || n >= MAX_PATH || vs_win_utf8(wsys, sys, (int)sizeof sys)) snprintf(path, sizeof path, "nvcuda.dll");
    else snprintf(path, sizeof path, "%s\\nvcuda.dll", sys);
  }
  return path;
}

const char *vs_plat_nvml_default(void) { return "nvml.dll"; }

const char *vs_plat_getenv_secure(const char *name) { return vs_plat_getenv(name); }

void *vs_plat_dl_open(const char *path, char *err, size_t errlen) {
  wchar_t wpath[MAX_PATH * 2];
  if (!MultiByteToWideChar(CP_UTF8, 0, path, -1, wpath, (int)(sizeof wpath / sizeof wpath[0]))) {
    snprintf(err, errlen, "the path is too long or not UTF-8");
    return NULL;
  }
  /* An absolute path loads that file; a plain name is searched as
   * LoadLibrary does. The folder of the DLL serves its own dependencies. */
  DWORD flags = (wpath[0] && wpath[1] == L':') || wpath[0] == L'\\' ? LOAD_WITH_ALTERED_SEARCH_PATH : 0;
  HMODULE h = LoadLibraryExW(wpath, NULL, flags);
  if (!h) snprintf(err, errlen, "LoadLibraryExW: error %lu", GetLastError());
  return (void *)h;
}

void *vs_plat_dl_sym(void *handle, const char *name) {
  return handle ? (void *)GetProcAddress((HMODULE)handle, name) : NULL;
}

const void *vs_plat_dl_module_of(const void *fn, char *path, size_t len) {
  HMODULE m = NULL;
  if (!fn || !GetModuleHandleExA(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                                 (LPCSTR)fn, &m))
    return NULL;
  if (path && len) {
    wchar_t w[VS_WPATH];
    DWORD n = GetModuleFileNameW(m, w, VS_WPATH);
    if (n == 0 || n >= VS_WPATH || vs_win_utf8(w, path, (int)len)) path[0] = 0;
  }
  return (const void *)m;
}

/* Injection by remote thread: VirtualAllocEx + WriteProcessMemory of the
 * DLL's path, CreateRemoteThread on LoadLibraryW. kernelbase (and kernel32)
 * are mapped at the same address in every process of a session, so the
 * launcher's own LoadLibraryW is the target's too. */
#include "inject.h"

#include <stdio.h>
#include <wchar.h>

FARPROC vs_win_real_proc(const char *name) {
  HMODULE kb = GetModuleHandleW(L"kernelbase.dll");
  FARPROC p = kb ? GetProcAddress(kb, name) : NULL;
  if (!p) {
    HMODULE k32 = GetModuleHandleW(L"kernel32.dll");
    p = k32 ? GetProcAddress(k32, name) : NULL;
  }
  return p;
}

int vs_win_inject(HANDLE process, const wchar_t *dll, DWORD timeout_ms, char *why, size_t len) {
  /* A 32-bit process has another kernelbase at another address, and could
   * not load a 64-bit DLL anyway: a remote thread there would crash it. */
  BOOL wow = FALSE;
  if (IsWow64Process(process, &wow) && wow) {
    snprintf(why, len, "it is a 32-bit program and the shim is 64-bit");
    return -1;
  }
  FARPROC load = vs_win_real_proc("LoadLibraryW");
  if (!load) {
    snprintf(why, len, "LoadLibraryW not found in kernelbase.dll or kernel32.dll");
    return -1;
  }
  SIZE_T bytes = (wcslen(dll) + 1) * sizeof(wchar_t);
  void *remote = VirtualAllocEx(process, NULL, bytes, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
  if (!remote) {
    snprintf(why, len, "cannot allocate memory in the process (VirtualAllocEx: error %lu)", GetLastError());
    return -1;
  }
  int rc = -1, finished = 1;
  SIZE_T written = 0;
  if (!WriteProcessMemory(process, remote, dll, bytes, &written) || written != bytes) {
    snprintf(why, len, "cannot write into the process (WriteProcessMemory: error %lu)", GetLastError());
    goto out;
  }
  HANDLE th = CreateRemoteThread(process, NULL, 0, (LPTHREAD_START_ROUTINE)(void *)load, remote, 0, NULL);
  if (!th) {
    snprintf(why, len, "cannot start a thread in the process (CreateRemoteThread: error %lu; security "
             "software may block it)", GetLastError());
    goto out;
  }
  DWORD w = WaitForSingleObject(th, timeout_ms);
  DWORD code = 0;
  if (w != WAIT_OBJECT_0) {
    finished = 0;
    snprintf(why, len, "LoadLibraryW did not return within %lu ms", (unsigned long)timeout_ms);
  } else if (!GetExitCodeThread(th, &code) || code == 0) {
    /* The thread's exit code is the low half of the HMODULE: 0 = not loaded. */
    snprintf(why, len, "LoadLibraryW failed in the process (the DLL or one of its imports is missing, or "
             "it is not a 64-bit DLL)");
  } else {
    rc = 0;
  }
  CloseHandle(th);
out:
  /* After a timeout the thread may still read the path: leave it then. */
  if (finished) VirtualFreeEx(process, remote, 0, MEM_RELEASE);
  return rc;
}

int vs_win_inject_or_end(PROCESS_INFORMATION *pi, const wchar_t *dll, char *why, size_t len) {
  if (!vs_win_inject(pi->hProcess, dll, 60000, why, len)) return 0;
  TerminateProcess(pi->hProcess, 127);
  WaitForSingleObject(pi->hProcess, 10000);
  CloseHandle(pi->hThread);
  CloseHandle(pi->hProcess);
  return -1;
}

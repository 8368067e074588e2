/* The shim inside a Windows process: import-table patching and the loader
 * hooks (see interpose.h).
 *
 * Invariants:
 *   - kernel32, kernelbase, ntdll, the driver and the shim itself are never
 *     patched: kernel32's exports may be stubs that jump through kernel32's
 *     own imports (a hook there would call itself), and the shim reaches the
 *     real functions through kernelbase's exports (vs_win_real_proc), never
 *     through its own import table;
 *   - DllMain only patches (no thread, no file, no driver load: it runs
 *     under the loader lock); the shim itself starts on its first hook;
 *   - patching is idempotent (an entry is found by its import name, never by
 *     its current value), so a module seen twice is harmless. */
#include "interpose.h"

#include "inject.h"

#include <psapi.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>
#include <windows.h>

typedef HMODULE(WINAPI *load_a_fn)(LPCSTR);
typedef HMODULE(WINAPI *load_w_fn)(LPCWSTR);
typedef HMODULE(WINAPI *load_ex_a_fn)(LPCSTR, HANDLE, DWORD);
typedef HMODULE(WINAPI *load_ex_w_fn)(LPCWSTR, HANDLE, DWORD);
typedef FARPROC(WINAPI *get_proc_fn)(HMODULE, LPCSTR);
typedef BOOL(WINAPI *create_a_fn)(LPCSTR, LPSTR, LPSECURITY_ATTRIBUTES, LPSECURITY_ATTRIBUTES, BOOL, DWORD, LPVOID,
                                  LPCSTR, LPSTARTUPINFOA, LPPROCESS_INFORMATION);
typedef BOOL(WINAPI *create_w_fn)(LPCWSTR, LPWSTR, LPSECURITY_ATTRIBUTES, LPSECURITY_ATTRIBUTES, BOOL, DWORD, LPVOID,
                                  LPCWSTR, LPSTARTUPINFOW, LPPROCESS_INFORMATION);

static HMODULE g_self;
static wchar_t g_self_path[MAX_PATH];
static HMODULE g_never[3];   /* kernel32, kernelbase, ntdll */
static volatile LONG g_active;
static SRWLOCK g_write_lock = SRWLOCK_INIT;

static load_a_fn real_LoadLibraryA;
static load_w_fn real_LoadLibraryW;
static load_ex_a_fn real_LoadLibraryExA;
static load_ex_w_fn real_LoadLibraryExW;
static get_proc_fn real_GetProcAddress;
static create_a_fn real_CreateProcessA;
static create_w_fn real_CreateProcessW;
typedef VOID(WINAPI *exit_fn)(UINT);
static exit_fn real_ExitProcess;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  /* One WriteFile per line; stderr of the program, as the shim's log. */
  char line[1024];
  int n = snprintf(line, sizeof line, "vramshim: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 2, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = strlen(line);
  line[len++] = '\n';
  DWORD w;
  HANDLE err = GetStdHandle(STD_ERROR_HANDLE);
  if (err && err != INVALID_HANDLE_VALUE) WriteFile(err, line, (DWORD)len, &w, NULL);
}

/* ---- which module is which ---- */

static const wchar_t *base_name(const wchar_t *path) {
  const wchar_t *b = path;
  for (const wchar_t *p = path; *p; p++)
    if (*p == L'\\' || *p == L'/') b = p + 1;
  return b;
}

/* The driver and NVML (nvml.dll: the shim answers its memory info with
 * the tenant's view, docs/nvml.md) are the modules whose imports the shim
 * patches and whose GetProcAddress it answers. */
static int is_driver_name_a(const char *dll) {
  return !_stricmp(dll, "nvcuda.dll") || !_stricmp(dll, "nvcuda") || !_stricmp(dll, "nvml.dll") ||
         !_stricmp(dll, "nvml");
}

/* A module whose file is named nvcuda.dll (the driver) or nvml.dll, wherever it lies. */
static int is_driver_module(HMODULE m) {
  wchar_t path[MAX_PATH];
  DWORD n = GetModuleFileNameW(m, path, MAX_PATH);
  return n > 0 && n < MAX_PATH && (!_wcsicmp(base_name(path), L"nvcuda.dll") || !_wcsicmp(base_name(path), L"nvml.dll"));
}

static int never_patched(HMODULE m) {
  if (!m || m == g_self) return 1;
  for (int i = 0; i < 3; i++)
    if (g_never[i] == m) return 1;
  return is_driver_module(m);
}

/* ---- the loader hooks ---- */

static void patch_all(void);

static void after_load(HMODULE m) {
  /* The DLL notification patches each new module as it arrives, before its
   * DllMain runs; one pass over all modules once the load returned makes
   * sure of it whatever the loader's order of notifying and binding
   * imports (and is the only way without the notification). Idempotent. */
  if (m) patch_all();
}

static HMODULE WINAPI hook_LoadLibraryA(LPCSTR name) {
  HMODULE m = real_LoadLibraryA(name);
  after_load(m);
  return m;
}
static HMODULE WINAPI hook_LoadLibraryW(LPCWSTR name) {
  HMODULE m = real_LoadLibraryW(name);
  after_load(m);
  return m;
}
static HMODULE WINAPI hook_LoadLibraryExA(LPCSTR name, HANDLE file, DWORD flags) {
  HMODULE m = real_LoadLibraryExA(name, file, flags);
  after_load(m);
  return m;
}
static HMODULE WINAPI hook_LoadLibraryExW(LPCWSTR name, HANDLE file, DWORD flags) {
  HMODULE m = real_LoadLibraryExW(name, file, flags);
  after_load(m);
  return m;
}

/* GetProcAddress on the driver is the Windows dlsym: the hook answers a cu*
 * name the shim hooks (if the driver has it); everything else, and every
 * other module, gets the real answer. An ordinal has no name to match. */
static FARPROC WINAPI hook_GetProcAddress(HMODULE m, LPCSTR name) {
  if (m && (ULONG_PTR)name > 0xffff &&
      ((name[0] == 'c' && name[1] == 'u') || !strncmp(name, "nvml", 4)) && is_driver_module(m)) {
    void *hook = vs_shim_lookup(name);
    if (hook) return (FARPROC)hook;
  }
  return real_GetProcAddress(m, name);
}

/* A child created through the hooks gets the shim too: created suspended,
 * injected, then resumed unless the caller itself asked for it suspended.
 * A child the shim cannot enter (a 32-bit program, a refused thread) runs
 * without it, said once per child. */
static void enter_child(const PROCESS_INFORMATION *pi, DWORD caller_flags) {
  char why[256];
  if (vs_win_inject(pi->hProcess, g_self_path, 30000, why, sizeof why))
    say("cannot load the shim into child process %lu (%s): it runs without the shim", (unsigned long)pi->dwProcessId,
        why);
  if (!(caller_flags & CREATE_SUSPENDED)) ResumeThread(pi->hThread);
}

static BOOL WINAPI hook_CreateProcessA(LPCSTR app, LPSTR cmd, LPSECURITY_ATTRIBUTES pa, LPSECURITY_ATTRIBUTES ta,
                                       BOOL inherit, DWORD flags, LPVOID env, LPCSTR dir, LPSTARTUPINFOA si,
                                       LPPROCESS_INFORMATION pi) {
  BOOL ok = real_CreateProcessA(app, cmd, pa, ta, inherit, flags | CREATE_SUSPENDED, env, dir, si, pi);
  if (ok) enter_child(pi, flags);
  return ok;
}

static BOOL WINAPI hook_CreateProcessW(LPCWSTR app, LPWSTR cmd, LPSECURITY_ATTRIBUTES pa, LPSECURITY_ATTRIBUTES ta,
                                       BOOL inherit, DWORD flags, LPVOID env, LPCWSTR dir, LPSTARTUPINFOW si,
                                       LPPROCESS_INFORMATION pi) {
  BOOL ok = real_CreateProcessW(app, cmd, pa, ta, inherit, flags | CREATE_SUSPENDED, env, dir, si, pi);
  if (ok) enter_child(pi, flags);
  return ok;
}

/* The program ends: its other threads still run here (they are ended
 * inside the real ExitProcess), so the shim's exit work may take its locks. */
static VOID WINAPI hook_ExitProcess(UINT code) {
  vs_shim_exit();
  real_ExitProcess(code);
}

static void *loader_hook(const char *fn) {
  static const struct {
    const char *name;
    void *hook;
  } hooks[] = {
      {"LoadLibraryA", (void *)hook_LoadLibraryA},     {"LoadLibraryW", (void *)hook_LoadLibraryW},
      {"LoadLibraryExA", (void *)hook_LoadLibraryExA}, {"LoadLibraryExW", (void *)hook_LoadLibraryExW},
      {"GetProcAddress", (void *)hook_GetProcAddress}, {"CreateProcessA", (void *)hook_CreateProcessA},
      {"CreateProcessW", (void *)hook_CreateProcessW}, {"ExitProcess", (void *)hook_ExitProcess},
  };
  for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
    if (!strcmp(fn, hooks[i].name)) return hooks[i].hook;
  return NULL;
}

/* ---- the import-table patcher ---- */

static void write_slot(ULONG_PTR *slot, void *value) {
  if (*slot == (ULONG_PTR)value) return;
  /* The lock only orders writers among themselves; nothing under it calls
   * the loader (the DLL notification runs under the loader lock). */
  AcquireSRWLockExclusive(&g_write_lock);
  DWORD old;
  if (VirtualProtect(slot, sizeof *slot, PAGE_READWRITE, &old)) {
    *slot = (ULONG_PTR)value;
    VirtualProtect(slot, sizeof *slot, old, &old);
  }
  ReleaseSRWLockExclusive(&g_write_lock);
}

static void patch_module(HMODULE m) {
  if (never_patched(m)) return;
  BYTE *base = (BYTE *)m;
  const IMAGE_DOS_HEADER *dos = (const IMAGE_DOS_HEADER *)base;
  if (dos->e_magic != IMAGE_DOS_SIGNATURE) return;
  const IMAGE_NT_HEADERS *nt = (const IMAGE_NT_HEADERS *)(base + dos->e_lfanew);
  if (nt->Signature != IMAGE_NT_SIGNATURE || nt->OptionalHeader.Magic != IMAGE_NT_OPTIONAL_HDR64_MAGIC) return;
  const IMAGE_DATA_DIRECTORY *dir = &nt->OptionalHeader.DataDirectory[IMAGE_DIRECTORY_ENTRY_IMPORT];
  if (!dir->VirtualAddress || !dir->Size) return;
  for (const IMAGE_IMPORT_DESCRIPTOR *d = (const IMAGE_IMPORT_DESCRIPTOR *)(base + dir->VirtualAddress); d->Name;
       d++) {
    /* Without the name table (OriginalFirstThunk) there is nothing to match by. */
    if (!d->OriginalFirstThunk || !d->FirstThunk) continue;
    int driver = is_driver_name_a((const char *)(base + d->Name));
    const IMAGE_THUNK_DATA *names = (const IMAGE_THUNK_DATA *)(base + d->OriginalFirstThunk);
    IMAGE_THUNK_DATA *slots = (IMAGE_THUNK_DATA *)(base + d->FirstThunk);
    for (; names->u1.AddressOfData; names++, slots++) {
      if (IMAGE_SNAP_BY_ORDINAL(names->u1.Ordinal)) continue;
      const char *fn = (const char *)((const IMAGE_IMPORT_BY_NAME *)(base + names->u1.AddressOfData))->Name;
      void *hook = driver ? vs_shim_hook_for(fn) : loader_hook(fn);
      if (hook) write_slot((ULONG_PTR *)&slots->u1.Function, hook);
    }
  }
}

static void patch_all(void) {
  HMODULE mods[1024];
  DWORD bytes = 0;
  if (!EnumProcessModules(GetCurrentProcess(), mods, sizeof mods, &bytes)) return;
  DWORD n = bytes / sizeof mods[0];
  if (n > 1024) n = 1024;
  for (DWORD i = 0; i < n; i++) patch_module(mods[i]);
}

/* ---- modules loaded later: ntdll's DLL notification ---- */

typedef struct {
  USHORT Length, MaximumLength;
  PWSTR Buffer;
} vs_ustr;
typedef struct {
  ULONG Flags;
  const vs_ustr *FullDllName, *BaseDllName;
  PVOID DllBase;
  ULONG SizeOfImage;
} vs_dll_notification_data;
typedef VOID(CALLBACK *vs_dll_notification_fn)(ULONG reason, const vs_dll_notification_data *data, PVOID ctx);
typedef LONG(NTAPI *vs_register_fn)(ULONG flags, vs_dll_notification_fn fn, PVOID ctx, PVOID *cookie);
#define VS_DLL_LOADED 1

static VOID CALLBACK on_dll(ULONG reason, const vs_dll_notification_data *data, PVOID ctx) {
  (void)ctx;
  if (reason == VS_DLL_LOADED && data && data->DllBase) patch_module((HMODULE)data->DllBase);
}

static void attach(HMODULE self) {
  g_self = self;
  DWORD n = GetModuleFileNameW(self, g_self_path, MAX_PATH);
  if (n == 0 || n >= MAX_PATH) g_self_path[0] = 0;
  g_never[0] = GetModuleHandleW(L"kernel32.dll");
  g_never[1] = GetModuleHandleW(L"kernelbase.dll");
  g_never[2] = GetModuleHandleW(L"ntdll.dll");
  real_LoadLibraryA = (load_a_fn)(void *)vs_win_real_proc("LoadLibraryA");
  real_LoadLibraryW = (load_w_fn)(void *)vs_win_real_proc("LoadLibraryW");
  real_LoadLibraryExA = (load_ex_a_fn)(void *)vs_win_real_proc("LoadLibraryExA");
  real_LoadLibraryExW = (load_ex_w_fn)(void *)vs_win_real_proc("LoadLibraryExW");
  real_GetProcAddress = (get_proc_fn)(void *)vs_win_real_proc("GetProcAddress");
  real_CreateProcessA = (create_a_fn)(void *)vs_win_real_proc("CreateProcessA");
  real_CreateProcessW = (create_w_fn)(void *)vs_win_real_proc("CreateProcessW");
  real_ExitProcess = (exit_fn)(void *)vs_win_real_proc("ExitProcess");
  if (!real_LoadLibraryA || !real_LoadLibraryW || !real_LoadLibraryExA || !real_LoadLibraryExW ||
      !real_GetProcAddress || !real_CreateProcessA || !real_CreateProcessW || !real_ExitProcess || !g_self_path[0]) {
    say("cannot find the loader functions in kernelbase.dll/kernel32.dll: the shim stays out of this process");
    return;
  }
  vs_register_fn reg = g_never[2] ? (vs_register_fn)(void *)GetProcAddress(g_never[2], "LdrRegisterDllNotification")
                                  : NULL;
  PVOID cookie = NULL;
  if (reg) (void)reg(0, on_dll, NULL, &cookie);   /* without it, after_load alone */
  patch_all();
  InterlockedExchange(&g_active, 1);
}

int vs_plat_interpose_active(void) { return InterlockedCompareExchange(&g_active, 0, 0) != 0; }

/* Set by DllMain at DLL_PROCESS_DETACH of an ending process; MinGW's CRT
 * calls DllMain before it runs the DLL's destructors. */
static volatile LONG g_process_ending;

int vs_plat_exit_work_ok(void) { return InterlockedCompareExchange(&g_process_ending, 0, 0) == 0; }

/* Under the loader lock: patch, nothing more (see the invariants above). */
BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved) {
  if (reason == DLL_PROCESS_ATTACH) {
    DisableThreadLibraryCalls(inst);
    attach(inst);
  } else if (reason == DLL_PROCESS_DETACH && reserved) {
    /* The process is ending (not FreeLibrary): see vs_plat_exit_work_ok. */
    InterlockedExchange(&g_process_ending, 1);
  }
  return TRUE;
}

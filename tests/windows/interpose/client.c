/* One test program per way of reaching the driver, chosen by argv[1]:
 *   system32     LoadLibraryW(<System32>\nvcuda.dll), GetProcAddress (as the CUDA runtime)
 *   plain        LoadLibraryA("nvcuda.dll"), GetProcAddress
 *   search32     LoadLibraryExW("nvcuda.dll", LOAD_LIBRARY_SEARCH_SYSTEM32)
 *   procaddress  GetProcAddress for cuGetProcAddress_v2 only; every other function through it
 *   gpa_only     a CUDA 10.2-era program: GetProcAddress for each function, never cuGetProcAddress
 *   runtime      a runtime-like DLL (fake_runtime.dll) loaded at run time that loads the driver lazily
 *   child        starts `client plain` with CreateProcessW and returns its exit code
 *   child_suspended  the same, created CREATE_SUSPENDED: it must stay suspended until resumed here
 *   child_crt    starts `client plain` with the C runtime's _spawnl (msvcrt's own CreateProcess import)
 *   exit N       exits with N after a driver call (the launcher must return it)
 *   hold FILE    holds 64 MiB, writes its pid into FILE, and waits (at most 120 s) until the
 *                named event Local\vramshim-test-hold-<pid> is set (a dump requested meanwhile)
 *   env T        VRAMSHIM_TENANT is T and VRAMSHIM_CONFIG an absolute path to a file (from run's
 *                --tenant/--config), here and in a child
 * Each allocates and frees 1 MiB on card 0 and checks the shim saw it
 * (interposed.h). */
#include <cuda.h>
#include <process.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include <windows.h>

#include "interposed.h"

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*dev_get_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_ctx_fn)(CUcontext);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef int (*rt_alloc_fn)(void);

static int g_fails;
#define CHECK(cond, ...)                \
  do {                                  \
    if (!(cond)) {                      \
      printf("client: FAIL: ");         \
      printf(__VA_ARGS__);              \
      printf("\n");                     \
      g_fails++;                        \
    }                                   \
  } while (0)

typedef void *(*resolver)(HMODULE drv, const char *name);
static gpa_fn g_gpa;

static void *by_getprocaddress(HMODULE drv, const char *name) { return (void *)GetProcAddress(drv, name); }
static void *by_cugetprocaddress(HMODULE drv, const char *name) {
  (void)drv;
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  /* The family name, as the runtime asks: the driver picks the variant. */
  char family[64];
  snprintf(family, sizeof family, "%s", name);
  char *v2 = strstr(family, "_v2");
  if (v2) *v2 = 0;
  return g_gpa(family, &fn, 12000, 0, &st) == CUDA_SUCCESS ? fn : NULL;
}

static void exercise(HMODULE drv, resolver get) {
  CHECK(drv != NULL, "the driver did not load (error %lu)", GetLastError());
  if (!drv) return;
  init_fn cu_init = (init_fn)get(drv, "cuInit");
  dev_get_fn dev_get = (dev_get_fn)get(drv, "cuDeviceGet");
  retain_fn retain = (retain_fn)get(drv, "cuDevicePrimaryCtxRetain");
  set_ctx_fn set_ctx = (set_ctx_fn)get(drv, "cuCtxSetCurrent");
  alloc_fn alloc = (alloc_fn)get(drv, "cuMemAlloc_v2");
  free_fn release = (free_fn)get(drv, "cuMemFree_v2");
  CHECK(cu_init && dev_get && retain && set_ctx && alloc && release, "a driver function is missing");
  if (!cu_init || !dev_get || !retain || !set_ctx || !alloc || !release) return;
  HMODULE shim = GetModuleHandleW(L"vramshim.dll");
  if (shim) CHECK((void *)alloc == (void *)GetProcAddress(shim, "cuMemAlloc_v2"),
                  "cuMemAlloc_v2 was answered with the driver's own function, not the shim's");
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr p = 0;
  CHECK(cu_init(0) == CUDA_SUCCESS, "cuInit");
  CHECK(dev_get(&dev, 0) == CUDA_SUCCESS, "cuDeviceGet");
  CHECK(retain(&ctx, dev) == CUDA_SUCCESS && set_ctx(ctx) == CUDA_SUCCESS, "the primary context");
  CUresult r = alloc(&p, 1 << 20);
  CHECK(r == CUDA_SUCCESS && p, "cuMemAlloc_v2(1 MiB) = %d", (int)r);
  if (p) CHECK(release(p) == CUDA_SUCCESS, "cuMemFree_v2");
}

static HMODULE load_system32(void) {
  wchar_t path[MAX_PATH];
  UINT n = GetSystemDirectoryW(path, MAX_PATH - 16);
  wcscpy(path + n, L"\\nvcuda.dll");
  return LoadLibraryW(path);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "system32")) {
    exercise(load_system32(), by_getprocaddress);
    return interposed("client system32", g_fails, "cuMemAlloc_v2", PATH_LOOKUP);
  }
  if (!strcmp(mode, "plain") || !strcmp(mode, "gpa_only")) {
    /* gpa_only: the driver's functions by GetProcAddress alone, as a
     * program built for CUDA 10.2 (no cuGetProcAddress) finds them. */
    exercise(LoadLibraryA("nvcuda.dll"), by_getprocaddress);
    CHECK(shim_count("cuGetProcAddress_v2", PATH_CALLS) + shim_count("cuGetProcAddress", PATH_CALLS) == 0,
          "cuGetProcAddress was called");
    return interposed(!strcmp(mode, "plain") ? "client plain" : "client gpa_only", g_fails, "cuMemAlloc_v2",
                      PATH_LOOKUP);
  }
  if (!strcmp(mode, "search32")) {
    exercise(LoadLibraryExW(L"nvcuda.dll", NULL, LOAD_LIBRARY_SEARCH_SYSTEM32), by_getprocaddress);
    return interposed("client search32", g_fails, "cuMemAlloc_v2", PATH_LOOKUP);
  }
  if (!strcmp(mode, "procaddress")) {
    HMODULE drv = load_system32();
    g_gpa = drv ? (gpa_fn)(void *)GetProcAddress(drv, "cuGetProcAddress_v2") : NULL;
    CHECK(g_gpa != NULL, "no cuGetProcAddress_v2");
    if (g_gpa) exercise(drv, by_cugetprocaddress);
    return interposed("client procaddress", g_fails, "cuMemAlloc_v2", PATH_PROCADDRESS);
  }
  if (!strcmp(mode, "runtime")) {
    HMODULE rt = LoadLibraryA("fake_runtime.dll");
    rt_alloc_fn rt_alloc = rt ? (rt_alloc_fn)(void *)GetProcAddress(rt, "fake_runtime_alloc_free") : NULL;
    CHECK(rt_alloc != NULL, "fake_runtime.dll did not load (error %lu)", GetLastError());
    if (rt_alloc) CHECK(rt_alloc() == 0, "the runtime's allocation failed");
    return interposed("client runtime", g_fails, "cuMemAlloc_v2", PATH_PROCADDRESS);
  }
  if (!strcmp(mode, "child") || !strcmp(mode, "child_suspended")) {
    int suspended = !strcmp(mode, "child_suspended");
    wchar_t self[MAX_PATH], cmd[MAX_PATH + 32];
    GetModuleFileNameW(NULL, self, MAX_PATH);
    swprintf(cmd, MAX_PATH + 32, L"\"%ls\" plain", self);
    STARTUPINFOW si = {.cb = sizeof si};
    PROCESS_INFORMATION pi;
    if (!CreateProcessW(NULL, cmd, NULL, NULL, TRUE, suspended ? CREATE_SUSPENDED : 0, NULL, NULL, &si, &pi)) {
      printf("client child: FAIL: CreateProcessW: error %lu\n", GetLastError());
      return 1;
    }
    if (suspended) {
      /* The hook must leave it as asked: suspended (not ended, not running). */
      if (WaitForSingleObject(pi.hProcess, 1000) != WAIT_TIMEOUT) {
        printf("client child: FAIL: the child asked for suspended ran before it was resumed\n");
        return 1;
      }
      DWORD count = ResumeThread(pi.hThread);
      if (count != 1) {
        printf("client child: FAIL: the child's suspend count was %lu, not 1\n", (unsigned long)count);
        return 1;
      }
    }
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(pi.hProcess, &code);
    printf("client child: the child exited with %lu\n", (unsigned long)code);
    return (int)code;
  }
  if (!strcmp(mode, "hold") && argc > 2) {
    HMODULE drv = LoadLibraryA("nvcuda.dll");
    exercise(drv, by_getprocaddress);
    alloc_fn alloc = drv ? (alloc_fn)(void *)GetProcAddress(drv, "cuMemAlloc_v2") : NULL;
    CUdeviceptr p = 0;
    CHECK(alloc && alloc(&p, 64u << 20) == CUDA_SUCCESS, "cuMemAlloc_v2(64 MiB)");
    char name[64];
    snprintf(name, sizeof name, "Local\\vramshim-test-hold-%lu", (unsigned long)GetCurrentProcessId());
    HANDLE stop = CreateEventA(NULL, TRUE, FALSE, name);
    FILE *f = fopen(argv[2], "w");
    if (f) {
      fprintf(f, "%lu\n", (unsigned long)GetCurrentProcessId());
      fclose(f);
    }
    printf("client hold: pid %lu holds 64 MiB\n", (unsigned long)GetCurrentProcessId());
    WaitForSingleObject(stop, 120000);
    return g_fails ? 1 : 0;
  }
  if (!strcmp(mode, "child_crt")) {
    char self[MAX_PATH];
    GetModuleFileNameA(NULL, self, MAX_PATH);
    intptr_t code = _spawnl(_P_WAIT, self, "client", "plain", NULL);
    printf("client child_crt: the child exited with %ld\n", (long)code);
    return (int)code;
  }
  if (!strcmp(mode, "env") && argc > 2) {
    const char *t = getenv("VRAMSHIM_TENANT"), *c = getenv("VRAMSHIM_CONFIG");
    printf("client env: VRAMSHIM_TENANT=%s VRAMSHIM_CONFIG=%s\n", t ? t : "(unset)", c ? c : "(unset)");
    CHECK(t && !strcmp(t, argv[2]), "VRAMSHIM_TENANT is not %s", argv[2]);
    CHECK(c && c[0] && c[1] == ':' && c[2] == '\\' && GetFileAttributesA(c) != INVALID_FILE_ATTRIBUTES,
          "VRAMSHIM_CONFIG is not an absolute path to an existing file");
    if (argc > 3) return g_fails ? 1 : 0;   /* the child's round */
    wchar_t self[MAX_PATH], cmd[MAX_PATH + 64];
    GetModuleFileNameW(NULL, self, MAX_PATH);
    swprintf(cmd, MAX_PATH + 64, L"\"%ls\" env %hs child", self, argv[2]);
    STARTUPINFOW si = {.cb = sizeof si};
    PROCESS_INFORMATION pi;
    DWORD code = 1;
    if (CreateProcessW(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
      WaitForSingleObject(pi.hProcess, INFINITE);
      GetExitCodeProcess(pi.hProcess, &code);
    }
    CHECK(code == 0, "the child did not see the same variables (exit %lu)", (unsigned long)code);
    exercise(LoadLibraryA("nvcuda.dll"), by_getprocaddress);
    return interposed("client env", g_fails, NULL, 0);
  }
  if (!strcmp(mode, "exit") && argc > 2) {
    exercise(LoadLibraryA("nvcuda.dll"), by_getprocaddress);
    int r = interposed("client exit", g_fails, NULL, 0);
    return r ? r : atoi(argv[2]);
  }
  printf("usage: client system32|plain|search32|procaddress|gpa_only|runtime|child|exit N\n");
  return 2;
}

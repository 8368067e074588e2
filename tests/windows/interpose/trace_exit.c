/* The trace recorder's flush at the end of a Windows process under the
 * shim (VRAMSHIM_TRACE): ExitProcess ends every other thread before the
 * shim's DLL destructors run, so an exit flush there could wait forever on
 * a lock a dead thread held, or on the dead writer thread. The child runs
 * under `vramshim.exe run` with a thread that allocates and frees 1 MiB in
 * a loop (never stopping), does K pairs of 3 MiB itself and returns from
 * main while that thread still runs. The parent requires that it ends
 * (within 60 s, exit code 0) and that all 2K records of main's 3 MiB
 * allocations and frees are in the trace file, after the RMM header.
 *   trace_exit VRAMSHIM.EXE TRACEFILE    the parent (starts itself as the child)
 *   trace_exit --child                   the child */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#define K 500

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*dev_get_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_ctx_fn)(CUcontext);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
static set_ctx_fn set_ctx;
static alloc_fn alloc;
static free_fn release;
static CUcontext ctx;
static volatile LONG g_pairs;

static DWORD WINAPI looper(void *arg) {
  (void)arg;
  set_ctx(ctx);
  for (;;) {
    CUdeviceptr p = 0;
    if (alloc(&p, 1u << 20) == CUDA_SUCCESS) release(p);
    InterlockedIncrement(&g_pairs);
  }
  return 0;
}

static int child(void) {
  HMODULE drv = LoadLibraryA("nvcuda.dll");
  init_fn cu_init = drv ? (init_fn)(void *)GetProcAddress(drv, "cuInit") : NULL;
  dev_get_fn dev_get = drv ? (dev_get_fn)(void *)GetProcAddress(drv, "cuDeviceGet") : NULL;
  retain_fn retain = drv ? (retain_fn)(void *)GetProcAddress(drv, "cuDevicePrimaryCtxRetain") : NULL;
  set_ctx = drv ? (set_ctx_fn)(void *)GetProcAddress(drv, "cuCtxSetCurrent") : NULL;
  alloc = drv ? (alloc_fn)(void *)GetProcAddress(drv, "cuMemAlloc_v2") : NULL;
  release = drv ? (free_fn)(void *)GetProcAddress(drv, "cuMemFree_v2") : NULL;
  CUdevice dev;
  if (!cu_init || !dev_get || !retain || !set_ctx || !alloc || !release || cu_init(0) || dev_get(&dev, 0) ||
      retain(&ctx, dev) || set_ctx(ctx)) {
    printf("trace_exit child: FAIL: the driver did not start\n");
    return 1;
  }
  if (!GetModuleHandleW(L"vramshim.dll")) {
    printf("trace_exit child: FAIL: not under the shim\n");
    return 3;
  }
  HANDLE th = CreateThread(NULL, 0, looper, NULL, 0, NULL);
  while (th && InterlockedCompareExchange(&g_pairs, 0, 0) < 100) Sleep(1);
  for (int i = 0; i < K; i++) {
    CUdeviceptr p = 0;
    if (alloc(&p, 3u << 20) != CUDA_SUCCESS || release(p) != CUDA_SUCCESS) {
      printf("trace_exit child: FAIL: allocation %d\n", i);
      return 1;
    }
  }
  printf("trace_exit child: %d pairs of 3 MiB done, the looper at %ld pairs; returning from main\n", K,
         (long)InterlockedCompareExchange(&g_pairs, 0, 0));
  return 0;   /* the C runtime's exit, then ExitProcess, while the looper runs */
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc == 2 && !strcmp(argv[1], "--child")) return child();
  if (argc != 3) return 2;
  char self[MAX_PATH], cmd[3 * MAX_PATH];
  GetModuleFileNameA(NULL, self, MAX_PATH);
  DeleteFileA(argv[2]);
  SetEnvironmentVariableA("VRAMSHIM_TRACE", argv[2]);
  snprintf(cmd, sizeof cmd, "\"%s\" run -- \"%s\" --child", argv[1], self);
  STARTUPINFOA si = {.cb = sizeof si};
  PROCESS_INFORMATION pi;
  /* In a job, so a hung child (the launcher's, not the launcher) is ended too. */
  HANDLE job = CreateJobObjectA(NULL, NULL);
  if (!CreateProcessA(NULL, cmd, NULL, NULL, TRUE, CREATE_SUSPENDED, NULL, NULL, &si, &pi)) {
    printf("trace_exit: FAIL: cannot start %s\n", cmd);
    return 1;
  }
  if (job) AssignProcessToJobObject(job, pi.hProcess);
  ResumeThread(pi.hThread);
  CloseHandle(pi.hThread);
  DWORD t0 = GetTickCount();
  int fails = 0;
  if (WaitForSingleObject(pi.hProcess, 60000) != WAIT_OBJECT_0) {
    printf("trace_exit: FAIL: the child did not end within 60 s of its start (hung at exit)\n");
    if (job) TerminateJobObject(job, 1);
    TerminateProcess(pi.hProcess, 1);
    WaitForSingleObject(pi.hProcess, 10000);
    fails++;
  }
  DWORD code = 1;
  GetExitCodeProcess(pi.hProcess, &code);
  CloseHandle(pi.hProcess);
  printf("trace_exit: the child ended with %lu after %lu ms\n", (unsigned long)code, (unsigned long)(GetTickCount() - t0));
  if (code != 0) fails++;
  FILE *f = fopen(argv[2], "rb");
  long lines = 0, big = 0, big_alloc = 0, header = 0;
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    if (!lines && !strncmp(line, "Thread,Time,Action,Pointer,Size,Stream", 38)) header = 1;
    lines++;
    if (strstr(line, ",3145728,")) {
      big++;
      if (strstr(line, ",allocate,")) big_alloc++;
    }
  }
  if (f) fclose(f);
  printf("trace_exit: %s: %ld lines, %ld of them main's 3 MiB records (%ld allocations); want %d\n", argv[2], lines,
         big, big_alloc, 2 * K);
  if (!header) printf("trace_exit: FAIL: no RMM header\n"), fails++;
  if (big != 2 * K || big_alloc != K) printf("trace_exit: FAIL: main's records are not all in the file\n"), fails++;
  printf("trace_exit: %d failed\n", fails);
  return fails ? 1 : 0;
}

/* NVML on Windows (issue 24): reads card 0's memory through nvml.dll, in
 * its import table ("import": linked with the sim's nvml.dll import
 * library) or through LoadLibrary + GetProcAddress ("gpa"), v1 and v2, and
 * prints
 *   way=MODE total=T free=F used=U v2_total=T2 v2_free=F2 v2_used=U2 reserved=R
 * Under `vramshim.exe run` with a 1 GiB tenant the figures are the
 * tenant's; over the sim alone, the 3 GiB card's. Exit 1 on an NVML error. */
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>
#include <stdio.h>
#include <string.h>
#include <windows.h>

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*handle_fn)(unsigned, nvmlDevice_t *);
typedef nvmlReturn_t (*mem_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*mem2_fn)(nvmlDevice_t, nvmlMemory_v2_t *);

int main(int argc, char **argv) {
  const char *way = argc > 1 ? argv[1] : "import";
  init_fn init;
  handle_fn handle;
  mem_fn mem;
  mem2_fn mem2;
  if (!strcmp(way, "gpa")) {
    HMODULE h = LoadLibraryA("nvml.dll");
    if (!h) {
      printf("way=gpa LoadLibrary(nvml.dll) failed: %lu\n", GetLastError());
      return 1;
    }
    init = (init_fn)(void *)GetProcAddress(h, "nvmlInit_v2");
    handle = (handle_fn)(void *)GetProcAddress(h, "nvmlDeviceGetHandleByIndex_v2");
    mem = (mem_fn)(void *)GetProcAddress(h, "nvmlDeviceGetMemoryInfo");
    mem2 = (mem2_fn)(void *)GetProcAddress(h, "nvmlDeviceGetMemoryInfo_v2");
    if (!init || !handle || !mem || !mem2) return 1;
  } else {
    init = nvmlInit_v2;
    handle = nvmlDeviceGetHandleByIndex_v2;
    mem = nvmlDeviceGetMemoryInfo;
    mem2 = nvmlDeviceGetMemoryInfo_v2;
  }
  nvmlDevice_t d;
  nvmlMemory_t m;
  nvmlMemory_v2_t m2;
  memset(&m2, 0, sizeof m2);
  m2.version = nvmlMemory_v2;
  if (init() != NVML_SUCCESS || handle(0, &d) != NVML_SUCCESS || mem(d, &m) != NVML_SUCCESS ||
      mem2(d, &m2) != NVML_SUCCESS) {
    printf("way=%s NVML failed\n", way);
    return 1;
  }
  printf("way=%s total=%llu free=%llu used=%llu v2_total=%llu v2_free=%llu v2_used=%llu reserved=%llu\n", way,
         m.total, m.free, m.used, m2.total, m2.free, m2.used, m2.reserved);
  return 0;
}

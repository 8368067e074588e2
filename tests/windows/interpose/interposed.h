/* What every interposition test client checks at the end: the shim is in
 * this process, the driver's functions the client called entered the
 * shim's hooks, and a lookup path was answered by the shim. Returns the
 * client's exit code: 0 interposed, 3 when the shim is not in the process
 * (so a run without `vramshim run` is a visible failure, not a pass). */
#ifndef VS_TEST_WIN_INTERPOSED_H
#define VS_TEST_WIN_INTERPOSED_H

#include <stdint.h>
#include <stdio.h>
#include <windows.h>

typedef uint64_t (*hook_count_fn)(const char *fn, int path);
enum { PATH_LOOKUP = 0, PATH_PROCADDRESS = 1, PATH_CALLS = 2 };

static uint64_t shim_count(const char *fn, int path) {
  HMODULE shim = GetModuleHandleW(L"vramshim.dll");
  hook_count_fn count = shim ? (hook_count_fn)(void *)GetProcAddress(shim, "vramshim_hook_count") : NULL;
  return count ? count(fn, path) : 0;
}

/* fails = number of failed checks so far */
static int interposed(const char *who, int fails, const char *lookup_fn, int lookup_path) {
  if (!GetModuleHandleW(L"vramshim.dll")) {
    printf("%s: vramshim.dll is not loaded in this process\n", who);
    return 3;
  }
  uint64_t calls = shim_count("cuMemAlloc_v2", PATH_CALLS), frees = shim_count("cuMemFree_v2", PATH_CALLS);
  printf("%s: hook calls cuMemAlloc_v2=%llu cuMemFree_v2=%llu\n", who, (unsigned long long)calls,
         (unsigned long long)frees);
  if (calls < 1 || frees < 1) {
    printf("%s: FAIL: the allocation did not pass through the shim\n", who);
    fails++;
  }
  if (lookup_fn) {
    uint64_t n = shim_count(lookup_fn, lookup_path);
    printf("%s: lookups of %s answered by the shim (path %d): %llu\n", who, lookup_fn, lookup_path,
           (unsigned long long)n);
    if (n < 1) {
      printf("%s: FAIL: the lookup was not answered by the shim\n", who);
      fails++;
    }
  }
  printf("%s: %s\n", who, fails ? "FAILED" : "interposed");
  return fails ? 1 : 0;
}

#endif

/* fakert.dll: a runtime-like DLL. The program links it (import table);
 * only its first call loads the driver, lazily, the way the CUDA runtime
 * does: LoadLibraryExW("nvcuda.dll", LOAD_LIBRARY_SEARCH_SYSTEM32), then
 * cuGetProcAddress_v2 for everything. So the driver arrives after the
 * program started, from inside another DLL. */
#include "client.h"
#include <windows.h>
#include <stdio.h>

__declspec(dllexport) int fakert_driver(struct client_drv *d)
{
    HMODULE m = LoadLibraryExW(L"nvcuda.dll", NULL, LOAD_LIBRARY_SEARCH_SYSTEM32);
    if (!m) {
        printf("vramshim-client: fakert: LoadLibraryExW(nvcuda.dll, SEARCH_SYSTEM32) failed: %lu\n", GetLastError());
        return -1;
    }
    FARPROC gpa = GetProcAddress(m, "cuGetProcAddress_v2");
    return gpa ? client_fill_procaddr(d, (void *)gpa, 1) : -1;
}

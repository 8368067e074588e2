/* The way the CUDA runtime loads the driver: LoadLibrary with the absolute
 * System32 path (a proxy nvcuda.dll beside the program is never loaded),
 * then every function through cuGetProcAddress (v1, CUDA 11.3 to 11.8). */
#include "client.h"
#include <windows.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    wchar_t path[MAX_PATH + 16];
    client_system32_path(path, sizeof path / sizeof path[0]);
    HMODULE m = LoadLibraryW(path);
    if (!m) {
        printf("vramshim-client: way=system32 LoadLibraryW(%ls) failed: %lu\n", path, GetLastError());
        return 1;
    }
    FARPROC gpa = GetProcAddress(m, "cuGetProcAddress");
    struct client_drv d;
    if (!gpa || client_fill_procaddr(&d, (void *)gpa, 0) != 0) return 1;
    return client_run("system32", &d, client_limit(argc, argv));
}

/* As the CUDA 12 and 13 runtimes do: the driver by its System32 path,
 * GetProcAddress for cuGetProcAddress_v2 alone, every other function
 * through it. */
#include "client.h"
#include <windows.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    wchar_t path[MAX_PATH + 16];
    client_system32_path(path, sizeof path / sizeof path[0]);
    HMODULE m = LoadLibraryExW(path, NULL, 0);
    if (!m) {
        printf("vramshim-client: way=procaddr_v2 LoadLibraryExW(%ls) failed: %lu\n", path, GetLastError());
        return 1;
    }
    FARPROC gpa = GetProcAddress(m, "cuGetProcAddress_v2");
    struct client_drv d;
    if (!gpa || client_fill_procaddr(&d, (void *)gpa, 1) != 0) return 1;
    return client_run("procaddr_v2", &d, client_limit(argc, argv));
}

/* As a runtime from before CUDA 11.3 (the hospital's CUDA 10.2): the
 * driver by its System32 path and every function by GetProcAddress, with
 * the _v2 ABI names; cuGetProcAddress is never asked for. */
#include "client.h"
#include <windows.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    wchar_t path[MAX_PATH + 16];
    client_system32_path(path, sizeof path / sizeof path[0]);
    HMODULE m = LoadLibraryW(path);
    if (!m) {
        printf("vramshim-client: way=getprocaddress LoadLibraryW(%ls) failed: %lu\n", path, GetLastError());
        return 1;
    }
    struct client_drv d;
    if (client_fill_getprocaddress(&d, m) != 0) return 1;
    return client_run("getprocaddress", &d, client_limit(argc, argv));
}

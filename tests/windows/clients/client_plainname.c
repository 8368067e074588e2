/* LoadLibrary with the plain name "nvcuda.dll" (the search order: the
 * program's folder, then System32), then GetProcAddress for each function. */
#include "client.h"
#include <windows.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    HMODULE m = LoadLibraryA("nvcuda.dll");
    if (!m) {
        printf("vramshim-client: way=plainname LoadLibraryA(nvcuda.dll) failed: %lu\n", GetLastError());
        return 1;
    }
    struct client_drv d;
    if (client_fill_getprocaddress(&d, m) != 0) return 1;
    return client_run("plainname", &d, client_limit(argc, argv));
}

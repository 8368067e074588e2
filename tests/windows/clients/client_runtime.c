/* A program over a runtime-like DLL (fakert.dll) that loads the driver
 * lazily; prints whether nvcuda.dll was loaded before the first call. */
#include "client.h"
#include <windows.h>
#include <stdio.h>

__declspec(dllimport) int fakert_driver(struct client_drv *d);

int main(int argc, char **argv)
{
    printf("vramshim-client: way=runtime loaded_before_first_call=%s\n",
           GetModuleHandleW(L"nvcuda.dll") ? "yes" : "no");
    struct client_drv d;
    if (fakert_driver(&d) != 0) return 1;
    return client_run("runtime", &d, client_limit(argc, argv));
}

/* A process that reaches the driver (System32 path, GetProcAddress) and
 * starts a child, itself with --child, that does the same; the child's
 * line comes first (way=child), then the parent's (way=parent) with the
 * child's exit code. Under the shim both must be interposed: the child
 * through the CreateProcess hooks. */
#include "client.h"
#include <windows.h>
#include <stdio.h>
#include <string.h>

static int reach(const char *way, size_t limit)
{
    wchar_t path[MAX_PATH + 16];
    client_system32_path(path, sizeof path / sizeof path[0]);
    HMODULE m = LoadLibraryW(path);
    struct client_drv d;
    if (!m || client_fill_getprocaddress(&d, m) != 0) return 1;
    return client_run(way, &d, limit);
}

int main(int argc, char **argv)
{
    size_t limit = client_limit(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--child") == 0) return reach("child", limit);
    wchar_t exe[MAX_PATH], cmd[2 * MAX_PATH];
    GetModuleFileNameW(NULL, exe, MAX_PATH);
    swprintf(cmd, sizeof cmd / sizeof cmd[0], L"\"%ls\" --child --limit %zu", exe, limit);
    STARTUPINFOW si;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    PROCESS_INFORMATION pi;
    fflush(stdout);
    if (!CreateProcessW(exe, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
        printf("vramshim-client: way=parent CreateProcessW failed: %lu\n", GetLastError());
        return 1;
    }
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(pi.hProcess, &code);
    CloseHandle(pi.hProcess);
    CloseHandle(pi.hThread);
    printf("vramshim-client: way=parent child_exit=%lu\n", (unsigned long)code);
    int rc = reach("parent", limit);
    return rc != 0 ? rc : (int)code;
}

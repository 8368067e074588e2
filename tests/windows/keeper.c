/* Started by tests/windows/prefix.sh before the tests, its output sent
 * nowhere: it keeps the prefix's Wine system processes (services.exe,
 * winedevice, explorer) alive for the whole run. Without it the first test
 * starts them and they inherit its stdout, so ctest waits on that pipe
 * until the test's timeout. Ended by `wineserver -k` at the end of the run.
 * With --ready it returns at once: run in the foreground after the keeper,
 * it returns once Wine's start-up (which every new process waits for) is
 * done, so no test can be the one that starts the system processes. */
#include <windows.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--ready") == 0) return 0;
    Sleep(INFINITE);
    return 0;
}

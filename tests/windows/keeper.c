/* Started by tests/windows/run before the tests, its output sent nowhere:
 * it keeps the prefix's Wine system processes (services.exe, winedevice,
 * explorer) alive for the whole run. Without it the first test starts them
 * and they inherit its stdout, so ctest waits on that pipe until the test's
 * timeout. Ended by `wineserver -k` at the end of the run. */
#include <windows.h>

int main(void)
{
    Sleep(INFINITE);
    return 0;
}

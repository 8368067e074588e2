#include "dump_signal.h"

#include <errno.h>
#include <stdio.h>
#include <windows.h>

static void (*volatile g_fn)(void);
static HANDLE g_event;

static void event_name(char *out, size_t len, int pid) { snprintf(out, len, "Local\\vramshim-dump-%d", pid); }

static DWORD WINAPI waiter(LPVOID arg) {
  HANDLE ev = (HANDLE)arg;
  for (;;) {
    if (WaitForSingleObject(ev, INFINITE) != WAIT_OBJECT_0) return 0;
    void (*fn)(void) = g_fn;
    if (fn) fn();
  }
}

int vs_plat_dump_signal_install(int signo, void (*fn)(void)) {
  if (!signo) return 0;
  g_fn = fn;
  if (g_event) return 0;   /* one listener per process; the callback is the latest */
  char name[64];
  event_name(name, sizeof name, (int)GetCurrentProcessId());
  HANDLE ev = CreateEventA(NULL, FALSE, FALSE, name);
  if (!ev) return EACCES;
  HANDLE th = CreateThread(NULL, 64 * 1024, waiter, ev, STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
  if (!th) {
    CloseHandle(ev);
    return EAGAIN;
  }
  CloseHandle(th);
  g_event = ev;
  return 0;
}

int vs_plat_dump_signal_send(int pid, int signo) {
  (void)signo;
  char name[64];
  event_name(name, sizeof name, pid);
  HANDLE ev = OpenEventA(EVENT_MODIFY_STATE, FALSE, name);
  if (!ev) {
    errno = ESRCH;
    return -1;
  }
  BOOL ok = SetEvent(ev);
  CloseHandle(ev);
  if (!ok) {
    errno = EACCES;
    return -1;
  }
  return 0;
}

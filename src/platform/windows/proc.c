#include "proc.h"

#include <stdio.h>

#include "wutil.h"

int vs_plat_pid(void) { return (int)GetCurrentProcessId(); }

long vs_plat_tid(void) { return (long)GetCurrentThreadId(); }

uint64_t vs_plat_self_start_time(void) {
  FILETIME c, e, k, u;
  if (!GetProcessTimes(GetCurrentProcess(), &c, &e, &k, &u)) return 0;
  return (uint64_t)c.dwHighDateTime << 32 | c.dwLowDateTime;
}

void vs_plat_user_desc(char *out, size_t len) {
  wchar_t w[256];
  DWORD n = 256;
  char u[512];
  if (GetUserNameW(w, &n) && vs_win_utf8(w, u, sizeof u) == 0) snprintf(out, len, "user %s", u);
  else snprintf(out, len, "this user");
}

void vs_plat_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  (void)prepare, (void)parent, (void)child;
}

void vs_plat_stop_self(void) { SuspendThread(GetCurrentThread()); }

#include "wake.h"

#include <stdio.h>
#include <wchar.h>

#include "wutil.h"

/* See wake.h: one manual-reset event per (key, tag, value waited on). */
static void event_name(const char *key, const char *tag, uint32_t value, wchar_t *out, int n) {
  swprintf(out, n, L"vramshim-%hs-%hs-%08x", key, tag, value);
}

#define SLICE_NO_KEY_NS 50000000ull /* without a key: a plain sleep of at most this */

void vs_plat_wait(uint32_t *addr, uint32_t expected, uint64_t timeout_ns, const char *key, const char *tag) {
  if (__atomic_load_n(addr, __ATOMIC_SEQ_CST) != expected) return;
  if (!key || !*key || !tag) {
    uint64_t ns = timeout_ns < SLICE_NO_KEY_NS ? timeout_ns : SLICE_NO_KEY_NS;
    Sleep((DWORD)((ns + 999999) / 1000000));
    return;
  }
  wchar_t name[128];
  event_name(key, tag, expected, name, 128);
  HANDLE e = vs_win_event(name);
  if (!e) {
    Sleep(1);
    return;
  }
  /* Checked again once the event exists: a waker that changed the word
   * before it could open the event is seen here. */
  if (__atomic_load_n(addr, __ATOMIC_SEQ_CST) == expected) {
    uint64_t ms = (timeout_ns + 999999) / 1000000;
    WaitForSingleObject(e, ms > 0x7ffffff0u ? 0x7ffffff0u : (DWORD)ms);
  }
  CloseHandle(e);
}

#define WAKE_BACK 4 /* values behind the current one whose waiters are woken */

void vs_plat_wake(uint32_t *addr, const char *key, const char *tag) {
  if (!key || !*key || !tag) return;
  uint32_t v = __atomic_load_n(addr, __ATOMIC_SEQ_CST);
  for (uint32_t d = 1; d <= WAKE_BACK; d++) {
    wchar_t name[128];
    event_name(key, tag, v - d, name, 128);
    HANDLE e = vs_win_event_open(name);
    if (!e) continue;
    SetEvent(e);
    CloseHandle(e);
  }
}

#define _CRT_RAND_S
#include "xlock.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <wchar.h>

#include "wutil.h"

/* The id is random (rand_s: RtlGenRandom), so a ledger made again at the
 * same path gets a lock of its own, never its predecessor's. */
void vs_plat_xlock_init(vs_plat_xlock *l) {
  uint64_t id = 0;
  while (!id) {
    unsigned a = 0, b = 0;
    rand_s(&a);
    rand_s(&b);
    id = (uint64_t)a << 32 | b;
  }
  __atomic_store_n(&l->id, id, __ATOMIC_RELEASE);
}

/* Named mutexes opened by this process, kept for its life (a process
 * opens a handful of ledgers). Past the table, each acquire opens and
 * release closes its own handle. */
#define XLOCK_CACHE 32
static struct {
  uint64_t id;
  HANDLE h;
} g_cache[XLOCK_CACHE];
static int g_ncache;
static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;

static HANDLE open_mutex(uint64_t id) {
  wchar_t name[96];
  swprintf(name, 96, L"vramshim-lock-%016llx", (unsigned long long)id);
  return vs_win_mutex(name);
}

static HANDLE mutex_of(const vs_plat_xlock *l, int *owned) {
  uint64_t id = __atomic_load_n(&l->id, __ATOMIC_ACQUIRE);
  *owned = 0;
  HANDLE h = NULL;
  pthread_mutex_lock(&g_cache_mu);
  for (int i = 0; i < g_ncache; i++)
    if (g_cache[i].id == id) h = g_cache[i].h;
  if (!h && (h = open_mutex(id)) != NULL) {
    if (g_ncache < XLOCK_CACHE) {
      g_cache[g_ncache].id = id;
      g_cache[g_ncache++].h = h;
    } else {
      *owned = 1;
    }
  }
  pthread_mutex_unlock(&g_cache_mu);
  return h;
}

/* Handles opened past the cache, per thread (a thread holds one ledger lock at a time). */
static __thread HANDLE t_extra;

int vs_plat_xlock_acquire(vs_plat_xlock *l) {
  if (!__atomic_load_n(&l->id, __ATOMIC_ACQUIRE)) return -EINVAL;
  int owned;
  HANDLE h = mutex_of(l, &owned);
  if (!h) return -vs_win_errno(GetLastError());
  DWORD r = WaitForSingleObject(h, INFINITE);
  if (r != WAIT_OBJECT_0 && r != WAIT_ABANDONED) {
    if (owned) CloseHandle(h);
    return -EIO;
  }
  if (owned) t_extra = h;
  /* WAIT_ABANDONED: its owner's thread ended holding it (its process was
   * ended, even by TerminateProcess); we hold it now. */
  return r == WAIT_ABANDONED ? VS_PLAT_OWNER_DIED : 0;
}

void vs_plat_xlock_consistent(vs_plat_xlock *l) { (void)l; }

void vs_plat_xlock_release(vs_plat_xlock *l) {
  if (t_extra) {
    ReleaseMutex(t_extra);
    CloseHandle(t_extra);
    t_extra = NULL;
    return;
  }
  int owned;
  HANDLE h = mutex_of(l, &owned);
  if (h) ReleaseMutex(h);
  if (owned) CloseHandle(h);
}

void vs_plat_xlock_key(const vs_plat_xlock *l, char *out, size_t len) {
  snprintf(out, len, "%016llx", (unsigned long long)__atomic_load_n(&l->id, __ATOMIC_ACQUIRE));
}

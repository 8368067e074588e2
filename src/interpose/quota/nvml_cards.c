/* NVML's cards as the shim's cards, and the true footprint (nvml_cards.h). */
#include "cuda_api.h"

#include "nvml_cards.h"

#include "driver_table.h"
#include "guard.h"
#include "log.h"
#include "nvml_table.h"
#include "proc.h"
#include "quota.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CARDS 64
#define MAX_PROCS 1024

/* The UUID of each CUDA ordinal, filled once (the driver's answer does not
 * change for the life of a process). */
static char g_uuid[MAX_CARDS][96];
static _Atomic int g_ncards = -1;   /* -1: not yet asked; 0: no driver or no card */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void format_uuid(const CUuuid *u, char out[96]) {
  const unsigned char *b = (const unsigned char *)u->bytes;
  snprintf(out, 96, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
           b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int fill(void) {
  pthread_mutex_lock(&g_lock);
  if (g_ncards < 0) {
    int n = 0;
    const vs_real_table *real = vs_driver();
    vs_guard_enter();
    /* cuInit again is harmless; a process that only reads NVML needs it */
    if (real && real->cuInit && real->cuInit(0) == CUDA_SUCCESS && real->cuDeviceGetCount &&
        real->cuDeviceGetCount(&n) == CUDA_SUCCESS) {
      if (n > MAX_CARDS) n = MAX_CARDS;
      for (int i = 0; i < n; i++) {
        CUdevice dev = i;
        CUuuid u;
        CUresult r = real->cuDeviceGet ? real->cuDeviceGet(&dev, i) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS) r = real->cuDeviceGetUuid_v2 ? real->cuDeviceGetUuid_v2(&u, dev) : CUDA_ERROR_NOT_FOUND;
        if (r != CUDA_SUCCESS && real->cuDeviceGetUuid) r = real->cuDeviceGetUuid(&u, dev);
        if (r == CUDA_SUCCESS) format_uuid(&u, g_uuid[i]);
        else g_uuid[i][0] = 0;
      }
    } else {
      n = 0;
    }
    vs_guard_leave();
    g_ncards = n;
  }
  int n = g_ncards;
  pthread_mutex_unlock(&g_lock);
  return n;
}

int vs_nvml_card_of_uuid(const char *uuid) {
  if (!uuid || !uuid[0]) return -1;
  int n = fill();
  for (int i = 0; i < n; i++)
    if (g_uuid[i][0] && strcmp(g_uuid[i], uuid) == 0) return i;
  return -1;
}

int vs_nvml_card_uuid(int card, char out[96]) {
  if (card < 0 || card >= fill() || !g_uuid[card][0]) return -1;
  memcpy(out, g_uuid[card], 96);
  return 0;
}

/* The bytes NVML says this process holds on card: 0 with *used, 1 when NVML
 * does not list it there (no context; or a PID namespace NVML does not
 * see into), -1 when NVML is missing. */
static int nvml_used_by_me(int card, uint64_t *used) {
  const vs_nvml_table *t = vs_nvml_for_shim();
  char uuid[96];
  nvmlDevice_t d;
  if (!t || !t->nvmlDeviceGetHandleByUUID || vs_nvml_card_uuid(card, uuid) != 0) return -1;
  if (t->nvmlDeviceGetHandleByUUID(uuid, &d) != NVML_SUCCESS) return -1;
  /* every version has pid and usedGpuMemory first; v2 and v3 share a layout.
   * Static buffers, used under g_refresh_lock (every caller holds it): no
   * allocation on the background thread once a second, so a fork of the
   * program never finds that thread inside malloc (an allocator that is not
   * fork-safe, as ASan's before LLVM 17, would then block the child). */
  static union {
    nvmlProcessInfo_t v3[MAX_PROCS];
    nvmlProcessInfo_v1_t v1[MAX_PROCS];
  } buf;
  unsigned n = MAX_PROCS, pid = (unsigned)vs_plat_pid();
  nvmlReturn_t r = NVML_ERROR_FUNCTION_NOT_FOUND;
  int found = 1;
  if (t->nvmlDeviceGetComputeRunningProcesses_v3 || t->nvmlDeviceGetComputeRunningProcesses_v2) {
    nvmlProcessInfo_t *procs = buf.v3;
    r = t->nvmlDeviceGetComputeRunningProcesses_v3 ? t->nvmlDeviceGetComputeRunningProcesses_v3(d, &n, procs)
                                                   : t->nvmlDeviceGetComputeRunningProcesses_v2(
                                                         d, &n, (nvmlProcessInfo_v2_t *)procs);
    for (unsigned i = 0; r == NVML_SUCCESS && i < n; i++)
      if (procs[i].pid == pid) {
        /* Windows under WDDM reports no per-process figure */
        found = procs[i].usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE ? 1 : 0;
        *used = procs[i].usedGpuMemory;
        break;
      }
  } else if (t->nvmlDeviceGetComputeRunningProcesses) {
    nvmlProcessInfo_v1_t *v1 = buf.v1;
    r = t->nvmlDeviceGetComputeRunningProcesses(d, &n, v1);
    for (unsigned i = 0; r == NVML_SUCCESS && i < n; i++)
      if (v1[i].pid == pid) {
        found = v1[i].usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE ? 1 : 0;
        *used = v1[i].usedGpuMemory;
        break;
      }
  }
  return r != NVML_SUCCESS ? -1 : found;
}

/* The last measurement per card, and the lock that orders measurements
 * (the background thread and the context hooks both measure). */
static uint64_t g_last_want[MAX_CARDS];
static pthread_mutex_t g_refresh_lock = PTHREAD_MUTEX_INITIALIZER;

/* at_ctx: a context just began or ended on the card. Its footprint is then
 * charged at once, so a program that sizes itself from free memory right
 * after creating its context sees the context's own memory gone; the
 * agreement rule below is for the background thread's periodic readings. */
static void refresh(int card, int at_ctx) {
  uint64_t held = 0, overhead = 0, used = 0;
  if (card < 0 || card >= MAX_CARDS) return;
  pthread_mutex_lock(&g_refresh_lock);
  /* NVML missing, or not listing this process: the overhead stands */
  if (vs_quota_held(card, &held, &overhead) != 0 || nvml_used_by_me(card, &used) != 0) {
    pthread_mutex_unlock(&g_refresh_lock);
    return;
  }
  uint64_t counted = held - overhead;
  uint64_t want = used > counted ? used - counted : 0;
  /* A measurement taken while the driver holds memory the shim no longer
   * (or not yet) counts (a free credited before the driver's free returns,
   * an allocation in flight) is high for an instant: a rise is charged only
   * as far as two measurements in a row agree; a fall at once. */
  if (at_ctx) g_last_want[card] = want;
  uint64_t apply = want > overhead && g_last_want[card] < want ? (g_last_want[card] > overhead ? g_last_want[card] : overhead)
                                                               : want;
  g_last_want[card] = want;
  if (apply != overhead) {
    VS_DEBUG("card %d: NVML says this process holds %llu bytes, the shim counted %llu: %llu charged to the "
             "tenant as overhead", card, (unsigned long long)used, (unsigned long long)counted,
             (unsigned long long)apply);
    vs_quota_set_overhead(card, apply);
  }
  pthread_mutex_unlock(&g_refresh_lock);
}

void vs_footprint_refresh(int card) { refresh(card, 0); }

void vs_footprint_refresh_all(void) {
  int n = g_ncards;
  for (int c = 0; c < n && c < MAX_CARDS; c++) vs_footprint_refresh(c);
}

void vs_footprint_ctx_changed(int card) {
  if (card >= 0) fill();
  if (card >= 0 && card < MAX_CARDS) refresh(card, 1);
  else
    for (int c = 0; c < g_ncards && c < MAX_CARDS; c++) refresh(c, 1);
}

void vs_nvml_cards_atfork_child(void) {
  pthread_mutex_init(&g_lock, NULL);
  pthread_mutex_init(&g_refresh_lock, NULL);
  memset(g_last_want, 0, sizeof g_last_want);
}

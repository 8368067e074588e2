/* Records a trace of a random workload from two threads, as the shim
 * would, and prints the peak live bytes the workload reached:
 *   explain_record_sample PATTERN  ->  "peak_live N events M path P" */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "trace.h"

#define THREADS 2
#define OPS 20000

static vs_trace *g_t;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;   /* the "allocator" */
static uint64_t g_live, g_peak, g_next = 0x7f0000000000ull;

static void *work(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg * 7919 + 1, addr[64] = {0}, size[64] = {0};
  for (int i = 0; i < OPS; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    int k = (int)((seed >> 33) % 64);
    pthread_mutex_lock(&g_lock);
    /* Recording happens inside the allocator's critical section, as in
     * the shim, so the trace's order is the order of the live changes. */
    if (addr[k]) {
      g_live -= size[k];
      vs_trace_free(g_t, addr[k], size[k], 0);
      addr[k] = 0;
    } else {
      size[k] = 512 * (1 + (seed >> 40) % 4096);
      addr[k] = g_next;
      g_next += size[k];
      g_live += size[k];
      if (g_live > g_peak) g_peak = g_live;
      vs_trace_alloc(g_t, addr[k], size[k], 0);
    }
    pthread_mutex_unlock(&g_lock);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char err[256];
  g_t = vs_trace_create(argv[1], 0, err, sizeof err);
  if (!g_t) {
    fprintf(stderr, "vramshim: %s\n", err);
    return 1;
  }
  vs_trace_alloc_failed(g_t, 1ull << 50, 0);
  pthread_t th[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, work, (void *)i);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  uint64_t rec;
  vs_trace_counts(g_t, &rec, NULL);
  printf("peak_live %llu events %llu path %s\n", (unsigned long long)g_peak, (unsigned long long)rec,
         vs_trace_path(g_t));
  /* No flush: the atexit handler writes what is buffered. */
  return 0;
}

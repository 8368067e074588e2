/* on_limit = spill:MAX through the shim (issue 13): real processes, each
 * preloaded with libvramshim.so over the simulated driver (a 4 GiB card),
 * against one card's ledger. The helpers are shim_tenant's (tenant_proc.h).
 *
 *   shim_spill case spill ARENA WORKDIR TOOL   tenant s: limit 1 GiB, spill:1280MiB
 *   shim_spill case driver off WORKDIR TOOL    the driver refuses (a process without the shim holds the card)
 *   shim_spill spiller                          worker (below)
 *   shim_spill spilltry MIB                     worker: one cuMemAlloc that must be served from host memory
 *   shim_spill hold MIB                         worker: cuMemAlloc, then wait for SIGTERM
 *   shim_spill try MIB                          worker: one cuMemAlloc that must succeed, then exit
 *   shim_spill case threads ARENA WORKDIR TOOL  4 threads spilling and freeing at once (label concurrent)
 *   shim_spill threads                          worker (below)
 *   shim_spill case ctxend ARENA WORKDIR TOOL   a context that ends holding a spilled block gives it back
 *   shim_spill ctxspill ARENA                   worker (below)
 *   shim_spill case reuse ARENA WORKDIR TOOL    a freed spilled block serves the next spill once the device is done
 *   shim_spill reuse ARENA                      worker (below) */
#include "tenant_proc.h"
#include "tp_json.h"
#include "vramsim.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define C_CAP (4 * GiB)         /* VRAMSIM_CARDS=4GiB (CMakeLists.txt) */
#define BLK (256 * MiB)
#define LIMIT (1 * GiB)
#define SPILL_MAX (1280 * MiB)  /* five blocks */



static unsigned mem_type(CUdeviceptr p) {
  unsigned mt = 0;
  CUresult r = cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  CHECK(r == CUDA_SUCCESS, "cuPointerGetAttribute(MEMORY_TYPE) = %d", (int)r);
  return mt;
}

/* The byte at offset off of block i after the writes below. */
static unsigned char expect(int i, size_t off, int n) {
  if (off < MiB) return (unsigned char)(i + 1);                          /* memset D8 */
  if (off < 2 * MiB) return (unsigned char)(((i + n - 1) % n) + 1);      /* copied from block i-1 */
  if (off >= BLK - MiB) return (unsigned char)(0x80 + i);                /* memset D8 at the end */
  return 0;
}

static void write_and_check(CUdeviceptr *p, int n) {
  for (int i = 0; i < n; i++) {
    CHECK(cuMemsetD8(p[i], (unsigned char)(i + 1), MiB) == CUDA_SUCCESS, "memset start of %d", i);
    CHECK(cuMemsetD8(p[i] + MiB, 0, MiB) == CUDA_SUCCESS, "memset second MiB of %d", i);
    CHECK(cuMemsetD8(p[i] + BLK - MiB, (unsigned char)(0x80 + i), MiB) == CUDA_SUCCESS, "memset end of %d", i);
    CHECK(cuMemsetD32(p[i] + BLK / 2, 0xa5a50000u + (unsigned)i, 1024) == CUDA_SUCCESS, "memset D32 of %d", i);
  }
  /* device to device, across device and spilled blocks: block i's first MiB into block i+1's second */
  for (int i = 0; i < n; i++)
    CHECK(cuMemcpyDtoD(p[(i + 1) % n] + MiB, p[i], MiB) == CUDA_SUCCESS, "copy %d -> %d", i, (i + 1) % n);
  unsigned char *buf = malloc(2 * MiB);
  for (int i = 0; i < n; i++) {
    CHECK(cuMemcpyDtoH(buf, p[i], 2 * MiB) == CUDA_SUCCESS, "read back %d", i);
    for (size_t off = 0; off < 2 * MiB; off += 4093)
      CHECK(buf[off] == expect(i, off, n), "block %d byte %zu: %u, want %u", i, off, buf[off], expect(i, off, n));
    CHECK(cuMemcpyDtoH(buf, p[i] + BLK - MiB, MiB) == CUDA_SUCCESS, "read back end of %d", i);
    for (size_t off = 0; off < MiB; off += 4093)
      CHECK(buf[off] == expect(i, BLK - MiB + off, n), "block %d end byte %zu", i, off);
    uint32_t w = 0;
    CHECK(cuMemcpyDtoH(&w, p[i] + BLK / 2 + 4 * 1023, 4) == CUDA_SUCCESS, "read D32 of %d", i);
    CHECK(w == 0xa5a50000u + (unsigned)i, "block %d D32 %08x", i, w);
  }
  free(buf);
}

/* What the program sees of a spilled block is what the driver says of host
 * memory: compared with a block of pinned host memory of its own. */
static void same_as_host_memory(CUdeviceptr spilled) {
  void *h;
  CHECK(cuMemHostAlloc(&h, BLK, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS, "own cuMemHostAlloc");
  CUdeviceptr own;
  CHECK(cuMemHostGetDevicePointer(&own, h, 0) == CUDA_SUCCESS, "own device pointer");
  CHECK(mem_type(spilled) == CU_MEMORYTYPE_HOST && mem_type(own) == CU_MEMORYTYPE_HOST, "memory type host");
  bool ipc_a = true, ipc_b = true;
  CHECK(cuPointerGetAttribute(&ipc_a, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, spilled) == CUDA_SUCCESS &&
            cuPointerGetAttribute(&ipc_b, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, own) == CUDA_SUCCESS,
        "IPC-capable attribute");
  CHECK(ipc_a == ipc_b, "IPC-capable: %d vs %d", ipc_a, ipc_b);
  CUdeviceptr start = 0;
  size_t size = 0;
  CHECK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, spilled + 4096) == CUDA_SUCCESS &&
            cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, spilled + 4096) == CUDA_SUCCESS,
        "range attributes");
  CHECK(start == spilled && size == BLK, "range of the spilled block: 0x%llx + %zu", (unsigned long long)start, size);
  CUdeviceptr b1 = 0, b2 = 0;
  size_t s1 = 0, s2 = 0;
  CUresult r1 = cuMemGetAddressRange(&b1, &s1, spilled + 4096), r2 = cuMemGetAddressRange(&b2, &s2, own + 4096);
  CHECK(r1 == r2, "cuMemGetAddressRange: %d for a spilled block, %d for host memory", (int)r1, (int)r2);
  CUipcMemHandle ha, hb;
  CUresult i1 = cuIpcGetMemHandle(&ha, spilled), i2 = cuIpcGetMemHandle(&hb, own);
  CHECK(i1 == i2 && i1 != CUDA_SUCCESS, "cuIpcGetMemHandle: %d for a spilled block, %d for host memory", (int)i1,
        (int)i2);
  SAY("a spilled block answers as host memory: memory type host, cuMemGetAddressRange %d, cuIpcGetMemHandle %d",
      (int)r1, (int)i1);
  CHECK(cuMemFreeHost(h) == CUDA_SUCCESS, "own cuMemFreeHost");
}

/* 8 blocks of 256 MiB under a 1 GiB limit, all granted; the data checks;
 * the view; IPC and attributes; MAX; then on SIGUSR1 free everything and
 * allocate again (on the device), on SIGTERM exit. */
static int w_spiller(void) {
  tp_cuda_up();
  CUdeviceptr p[16];
  int n = 0, spilled = 0;
  for (; n < 8; n++) {
    CUresult r = cuMemAlloc(&p[n], BLK);
    CHECK(r == CUDA_SUCCESS, "block %d of 8: cuMemAlloc = %d", n, (int)r);
    spilled += mem_type(p[n]) == CU_MEMORYTYPE_HOST;
  }
  int device = n - spilled;
  CHECK(device >= 3 && device <= 4 && spilled >= 4, "%d blocks on the device, %d spilled", device, spilled);
  write_and_check(p, n);
  size_t fr = 0, tot = 0;
  CHECK(cuMemGetInfo(&fr, &tot) == CUDA_SUCCESS, "cuMemGetInfo");
  SAY("view with %d MiB spilled: free %llu MiB, total %llu MiB", spilled * 256, (unsigned long long)(fr / MiB),
      (unsigned long long)(tot / MiB));
  CHECK(tot == LIMIT, "total is the tenant's device limit");
  CHECK(fr < BLK, "free counts no spilled byte (free %zu)", fr);
  for (int i = 0; i < n; i++)
    if (mem_type(p[i]) == CU_MEMORYTYPE_HOST) {
      same_as_host_memory(p[i]);
      break;
    }
  /* MAX: five blocks in all, across the tenant's processes (only this one now). */
  int extra = 0;
  CUresult r = CUDA_SUCCESS;
  while (n < 16) {
    r = cuMemAlloc(&p[n], BLK);
    if (r != CUDA_SUCCESS) break;
    CHECK(mem_type(p[n]) == CU_MEMORYTYPE_HOST, "an extra block is spilled");
    n++, extra++;
  }
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "past MAX: cuMemAlloc = %d", (int)r);
  CHECK(spilled + extra == (int)(SPILL_MAX / BLK), "MAX honoured: %d spilled then %d more", spilled, extra);
  for (; extra > 0; extra--) CHECK(cuMemFree(p[--n]) == CUDA_SUCCESS, "free an extra block");
  printf("ready spilled=%d device=%d\n", spilled, device);
  fflush(stdout);
  for (;;) {
    int sig = tp_wait_signal();
    if (sig == SIGTERM) return 0;
    for (int i = 0; i < n; i++) CHECK(cuMemFree(p[i]) == CUDA_SUCCESS, "free block %d", i);
    n = 0;
    CHECK(cuMemFree(p[0]) == CUDA_ERROR_INVALID_VALUE, "a double free of a spilled or device block is refused");
    /* Device memory is free again: new requests go to the device. */
    CHECK(cuMemAlloc(&p[0], BLK) == CUDA_SUCCESS, "allocate again");
    CHECK(mem_type(p[0]) == CU_MEMORYTYPE_DEVICE, "back on the device");
    n = 1;
    printf("freed\n");
    fflush(stdout);
  }
}

/* In a context of its own: one block on the device and one spilled
 * (limit 256 MiB), and one spilled and freed, then the context is
 * destroyed without freeing the first two. */
static int w_ctxspill(const char *arena) {
  CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS, "cuDeviceGet");
  CUcontext c;
  CHECK(cuCtxCreate(&c, NULL, 0, dev) == CUDA_SUCCESS, "cuCtxCreate");
  CUdeviceptr a, b;
  CHECK(cuMemAlloc(&a, 192 * MiB) == CUDA_SUCCESS, "the device block");
  CHECK(cuMemAlloc(&b, 320 * MiB) == CUDA_SUCCESS, "the block over the limit");
  CHECK(mem_type(b) == CU_MEMORYTYPE_HOST, "spilled");
  /* A third, freed: with an arena it is kept (spill.h: at most the live
   * spilled bytes), and goes with the context too. */
  CUdeviceptr k;
  CHECK(cuMemAlloc(&k, 70 * MiB) == CUDA_SUCCESS && mem_type(k) == CU_MEMORYTYPE_HOST, "a 70 MiB block to host");
  uint64_t host_frees = vramsim_calls("cuMemFreeHost");
  CHECK(cuMemFree(k) == CUDA_SUCCESS, "and freed");
  host_frees = vramsim_calls("cuMemFreeHost") - host_frees;
  CHECK(host_frees == (strcmp(arena, "off") ? 0u : 1u), "arena %s: %llu host frees", arena,
        (unsigned long long)host_frees);
  printf("spilled\n");
  fflush(stdout);
  while (tp_wait_signal() != SIGUSR1) {
  }
  CHECK(cuCtxDestroy(c) == CUDA_SUCCESS, "cuCtxDestroy");
  /* A new context spills and frees as before: nothing of the old one is
   * handed out (its host memory is gone). */
  CHECK(cuCtxCreate(&c, NULL, 0, dev) == CUDA_SUCCESS, "a second context");
  CHECK(cuMemAlloc(&k, 300 * MiB) == CUDA_SUCCESS && mem_type(k) == CU_MEMORYTYPE_HOST, "300 MiB to host again");
  CHECK(cuMemsetD8(k, 0x5a, 300 * MiB) == CUDA_SUCCESS, "written");
  CHECK(cuMemFree(k) == CUDA_SUCCESS && cuCtxDestroy(c) == CUDA_SUCCESS, "freed, the context destroyed");
  printf("destroyed\n");
  fflush(stdout);
  while (tp_wait_signal() != SIGTERM) {
  }
  return 0;
}

static int w_spilltry(int argc, char **argv) {
  CHECK(argc >= 1, "spilltry MIB");
  tp_cuda_up();
  CUdeviceptr p;
  CUresult r = cuMemAlloc(&p, strtoull(argv[0], NULL, 10) * MiB);
  CHECK(r == CUDA_SUCCESS, "spilltry: cuMemAlloc = %d", (int)r);
  CHECK(mem_type(p) == CU_MEMORYTYPE_HOST, "served from host memory");
  CHECK(cuMemsetD8(p, 7, MiB) == CUDA_SUCCESS, "memset");
  unsigned char b = 0;
  CHECK(cuMemcpyDtoH(&b, p + MiB - 1, 1) == CUDA_SUCCESS && b == 7, "read back");
  CHECK(cuMemFree(p) == CUDA_SUCCESS, "free");
  printf("spilltry ok\n");
  return 0;
}

static int w_hold(int argc, char **argv) {
  CHECK(argc >= 1, "hold MIB");
  tp_cuda_up();
  CUdeviceptr p;
  CUresult r = cuMemAlloc(&p, strtoull(argv[0], NULL, 10) * MiB);
  CHECK(r == CUDA_SUCCESS, "hold: cuMemAlloc = %d", (int)r);
  printf("holding\n");
  fflush(stdout);
  while (tp_wait_signal() != SIGTERM) {
  }
  return 0;
}

static int w_try(int argc, char **argv) {
  CHECK(argc >= 1, "try MIB");
  tp_cuda_up();
  CUdeviceptr p;
  uint64_t want = strtoull(argv[0], NULL, 10) * MiB;
  CUresult r = cuMemAlloc(&p, want);
  CHECK(r == CUDA_SUCCESS, "try: cuMemAlloc(%llu MiB) = %d", (unsigned long long)(want / MiB), (int)r);
  CHECK(mem_type(p) == CU_MEMORYTYPE_DEVICE, "on the device");
  printf("try ok\n");
  return 0;
}

/* 4 threads, each allocating and freeing 64 MiB blocks (at most 4 held), 40
 * rounds: under a 256 MiB limit with spill:1GiB every request fits somewhere
 * (4 x 4 x 64 MiB = 1 GiB), so all succeed; each block carries its owner's
 * pattern, checked before its free (a block handed out twice shows). */
#define T_THREADS 4
#define T_HOLD 4
#define T_ROUNDS 40
static CUcontext g_ctx;
static pthread_barrier_t g_barrier;   /* all threads hold T_HOLD blocks at once: 1 GiB asked of a 256 MiB limit */

static void *spill_thread(void *arg) {
  int id = (int)(intptr_t)arg;
  CHECK(cuCtxSetCurrent(g_ctx) == CUDA_SUCCESS, "thread context");
  CUdeviceptr p[T_HOLD] = {0};
  unsigned char tag[T_HOLD];
  int spilled = 0;
  for (int round = 0; round < T_ROUNDS; round++) {
    int k = round % T_HOLD;
    if (p[k]) {
      unsigned char b[2] = {0, 0};
      CHECK(cuMemcpyDtoH(&b[0], p[k], 1) == CUDA_SUCCESS && cuMemcpyDtoH(&b[1], p[k] + 64 * MiB - 1, 1) == CUDA_SUCCESS,
            "read back");
      CHECK(b[0] == tag[k] && b[1] == tag[k], "thread %d block %d: %u/%u, want %u", id, k, b[0], b[1], tag[k]);
      CHECK(cuMemFree(p[k]) == CUDA_SUCCESS, "free");
    }
    CUresult r = cuMemAlloc(&p[k], 64 * MiB);
    CHECK(r == CUDA_SUCCESS, "thread %d round %d: cuMemAlloc = %d", id, round, (int)r);
    spilled += mem_type(p[k]) == CU_MEMORYTYPE_HOST;
    tag[k] = (unsigned char)(id * 16 + round % 16 + 1);
    CHECK(cuMemsetD8(p[k], tag[k], 4096) == CUDA_SUCCESS && cuMemsetD8(p[k] + 64 * MiB - 4096, tag[k], 4096) == CUDA_SUCCESS,
          "memset");
    if (round == T_HOLD - 1) pthread_barrier_wait(&g_barrier);
  }
  for (int k = 0; k < T_HOLD; k++) CHECK(cuMemFree(p[k]) == CUDA_SUCCESS, "final free");
  return (void *)(intptr_t)spilled;
}

static int w_threads(void) {
  tp_cuda_up();
  CHECK(cuCtxGetCurrent(&g_ctx) == CUDA_SUCCESS, "context");
  pthread_t th[T_THREADS];
  pthread_barrier_init(&g_barrier, NULL, T_THREADS);
  for (int i = 0; i < T_THREADS; i++) CHECK(pthread_create(&th[i], NULL, spill_thread, (void *)(intptr_t)i) == 0, "thread");
  int spilled = 0;
  for (int i = 0; i < T_THREADS; i++) {
    void *r;
    pthread_join(th[i], &r);
    spilled += (int)(intptr_t)r;
  }
  printf("done spilled=%d\n", spilled);
  fflush(stdout);
  while (tp_wait_signal() != SIGTERM) {
  }
  return 0;
}

/* ---- orchestrator ------------------------------------------------------------- */
static vs_ledger_snapshot g_snap;

/* Polls file until it holds needle, for timeout_ms of wall time; fails at
 * once (with the worker's stderr) if pid exits first. */
static int wait_line(const char *file, const char *needle, int timeout_ms, pid_t pid) {
  uint64_t deadline = tp_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  while (tp_now_ns() < deadline) {
    char *o = tp_read(file);
    int hit = strstr(o, needle) != NULL;
    free(o);
    if (hit) return 0;
    int st;
    if (pid > 0 && tp_exited(pid, &st)) {
      char tag[128];
      snprintf(tag, sizeof tag, "%.*s.err", (int)(strlen(file) - 4), file);   /* "<tag>.out" -> "<tag>.err" */
      char *e = tp_read(tag);
      fprintf(stderr, "%s", e);
      free(e);
      CHECK(0, "%s: the worker exited (%d) before '%s'", file, st, needle);
    }
    tp_sleep_ms(10);
  }
  return -1;
}

static int ready_spilled(const char *file) {
  char *o = tp_read(file);
  const char *k = strstr(o, "ready spilled=");
  int s = k ? atoi(k + 14) : -1;
  free(o);
  return s;
}

static void tool_out(const char *tool, const char *args, const char *out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s status %s --ledger-dir %s > %s", tool, args, tp_path("ledger"), tp_path(out));
  CHECK(system(cmd) == 0, "%s", cmd);
}

/* The config of a case: the arena mode and the tenants' sections. */
static void config_in(const char *arena, const char *tenants) {
  char global[64];
  snprintf(global, sizeof global, "arena = %s\n", arena);
  tp_config(global, tenants);
}

static int case_spill(const char *arena, const char *tool) {
  char global[64];
  snprintf(global, sizeof global, "arena = %s\ntimeline_interval = 100ms\n", arena);
  tp_config(global, "[tenant s]\nlimit = 1GiB\non_limit = spill:1280MiB\n[tenant n]\n");
  const char *sp[] = {"spiller", NULL};
  pid_t a = tp_spawn("spiller", "s", NULL, sp);
  CHECK(wait_line("spiller.out", "ready", TP_EVENTUALLY_MS, a) == 0, "the spiller got its 8 blocks");
  int S = ready_spilled("spiller.out");
  CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
  const vs_snap_tenant *t = tp_tenant(&g_snap, "s");
  const vs_snap_proc *pr = tp_proc(&g_snap, a);
  CHECK(t && pr, "tenant s and its process in the ledger");
  SAY("arena %s: %d of 8 blocks spilled; ledger: tenant s used %llu MiB, spilled %llu MiB (max %llu MiB)", arena, S,
      (unsigned long long)(t->used / MiB), (unsigned long long)(t->spilled / MiB),
      (unsigned long long)(t->spill_max / MiB));
  CHECK(t->spilled == (uint64_t)S * BLK && pr->spilled == t->spilled, "spilled bytes per tenant and process");
  CHECK(t->spill_max == SPILL_MAX, "MAX in the ledger");
  CHECK(t->used <= LIMIT, "spilled bytes never count against the card (used %llu)", (unsigned long long)t->used);
  int spills = 0;
  for (int e = 0; e < g_snap.nevents; e++)
    spills += !strcmp(g_snap.events[e].kind, "spill") && g_snap.events[e].pid == a;
  CHECK(spills == 1, "one spill event for the episode (%d)", spills);
  char *err = tp_read("spiller.err");
  CHECK(tp_count_lines(err, "spilling") == 1, "one episode line:\n%s", err);
  CHECK(tp_count_lines(err, "cannot spill") == 1, "one line at MAX:\n%s", err);
  CHECK(tp_count_lines(err, "legacy IPC cannot export") == 1, "the IPC hint:\n%s", err);
  free(err);

  /* status: table, JSON, Prometheus */
  char want[160];
  tool_out(tool, "--events", "status.txt");
  char *txt = tp_read("status.txt");
  CHECK(strstr(txt, "spilled") && strstr(txt, "spill max") && strstr(txt, " spill "), "status table:\n%s", txt);
  free(txt);
  tool_out(tool, "--json", "status.json");
  char *js = tp_read("status.json");
  vs_json doc;
  CHECK(tj_parse(js, &doc, "status --json") == 0, "status --json parses");
  const vs_json *ts = NULL;   /* tenant s, on whichever card holds it */
  for (size_t c = 0; !ts && tj_at(&doc, "cards") && c < tj_at(&doc, "cards")->n; c++)
    ts = tj_find_str(&tj_at(&doc, "cards")->items[c], "tenants", "name", "s");
  CHECK(ts && tj_u64_is(ts, "spilled", (uint64_t)S * BLK), "status --json shows the tenant's spilled bytes:\n%s", js);
  CHECK(tj_u64_is(ts, "spill_max", SPILL_MAX), "status --json shows MAX");
  vs_json_free(&doc);
  free(js);
  tool_out(tool, "--prometheus", "status.prom");
  char *pm = tp_read("status.prom");
  snprintf(want, sizeof want, "tenant=\"s\"} %llu\n", (unsigned long long)S * BLK);
  char *m = strstr(pm, "vramshim_tenant_spilled_bytes{");
  CHECK(m && strstr(m, want), "Prometheus: vramshim_tenant_spilled_bytes");
  snprintf(want, sizeof want, "pid=\"%d\"} %llu\n", (int)a, (unsigned long long)S * BLK);
  m = strstr(pm, "vramshim_process_spilled_bytes{");
  CHECK(m && strstr(m, want), "Prometheus: vramshim_process_spilled_bytes");
  free(pm);

  /* The dump (schema 1.1) and its timeline show the spilled bytes. */
  tp_sleep_ms(400);   /* timeline_interval = 100ms: a sample with the blocks spilled */
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s dump --pid %d --json --timeout 30 --ledger-dir %s > %s", tool, (int)a,
           tp_path("ledger"), tp_path("dump.json"));
  CHECK(system(cmd) == 0, "%s", cmd);
  char *dj = tp_read("dump.json");
  CHECK(tj_parse(dj, &doc, "dump --pid --json") == 0, "the dump parses");
  const vs_json *dc = NULL;   /* the card the spiller's blocks are on */
  for (size_t c = 0; !dc && tj_at(&doc, "cards") && c < tj_at(&doc, "cards")->n; c++)
    if (tj_u64_is(&tj_at(&doc, "cards")->items[c], "spilled_bytes", (uint64_t)S * BLK)) dc = &tj_at(&doc, "cards")->items[c];
  CHECK(dc, "the dump shows the card's spilled bytes:\n%.2000s", dj);
  CHECK(tj_u64_is(dc, "spilled_count", (uint64_t)S), "the dump shows the spilled blocks");
  CHECK(tj_u64_is(dc, "tenant/spilled", (uint64_t)S * BLK) && tj_u64_is(dc, "tenant/spill_max", SPILL_MAX),
        "the dump shows the tenant's spilled bytes and MAX");
  const vs_json *tl = tj_at(dc, "timeline");
  int shown = 0;
  for (size_t i = 0; tl && tl->type == VS_JSON_ARRAY && i < tl->n; i++)
    shown |= tj_u64_is(&tl->items[i], "spilled", (uint64_t)S * BLK);
  CHECK(shown, "a timeline sample shows them");
  vs_json_free(&doc);
  free(dj);

  /* A neighbour takes all the rest of the card. */
  uint64_t rest = C_CAP - t->used;
  char mib[32];
  snprintf(mib, sizeof mib, "%llu", (unsigned long long)(rest / MiB));
  const char *tr[] = {"try", mib, NULL};
  pid_t nb = tp_spawn("neighbour", "n", NULL, tr);
  CHECK(tp_wait(nb) == 0, "the neighbour took the rest of the card, %s MiB", mib);
  SAY("the neighbour took the rest of the card: %s MiB", mib);

  /* Free: the bytes go back; new requests go to the device. */
  kill(a, SIGUSR1);
  CHECK(wait_line("spiller.out", "freed", TP_EVENTUALLY_MS, a) == 0, "the spiller freed everything");
  CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
  t = tp_tenant(&g_snap, "s");
  CHECK(t->spilled == 0 && tp_proc(&g_snap, a)->spilled == 0, "free gives the spilled bytes back (%llu)",
        (unsigned long long)t->spilled);
  kill(a, SIGTERM);
  CHECK(tp_wait(a) == 0, "the spiller exits");

  /* kill -9 of a spilling process: its spilled bytes come back (the next
   * spiller could not reach MAX otherwise). */
  pid_t k = tp_spawn("victim", "s", NULL, sp);
  CHECK(wait_line("victim.out", "ready", TP_EVENTUALLY_MS, k) == 0, "the victim spilled");
  kill(k, SIGKILL);
  tp_wait(k);
  pid_t b = tp_spawn("spiller2", "s", NULL, sp);
  CHECK(wait_line("spiller2.out", "ready", TP_EVENTUALLY_MS, b) == 0, "a new spiller reaches MAX again");
  CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
  t = tp_tenant(&g_snap, "s");
  CHECK(g_snap.dead_spilled == 0, "the dead spiller's bytes were reclaimed");
  CHECK(t->spilled == (uint64_t)ready_spilled("spiller2.out") * BLK, "the tenant's spilled bytes are the live one's");
  int reclaims = 0;
  for (int e = 0; e < g_snap.nevents; e++) reclaims += !strcmp(g_snap.events[e].kind, "reclaim") && g_snap.events[e].pid == k;
  CHECK(reclaims == 1, "a reclaim event for the victim");
  SAY("kill -9 of a spilling process: its %d spilled blocks reclaimed", ready_spilled("victim.out"));
  kill(b, SIGTERM);
  CHECK(tp_wait(b) == 0, "spiller2 exits");
  return 0;
}

static int case_threads(const char *arena) {
  config_in(arena, "[tenant s]\nlimit = 256MiB\non_limit = spill:1GiB\n");
  const char *w[] = {"threads", NULL};
  pid_t a = tp_spawn("threads", "s", NULL, w);
  CHECK(wait_line("threads.out", "done", TP_EVENTUALLY_MS, a) == 0, "the threads finished");
  char *o = tp_read("threads.out");
  const char *k = strstr(o, "done spilled=");
  int n = k ? atoi(k + 13) : -1;
  free(o);
  CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
  const vs_snap_tenant *t = tp_tenant(&g_snap, "s");
  CHECK(t && t->spilled == 0 && tp_proc(&g_snap, a)->spilled == 0, "every spilled byte given back");
  CHECK(t->spill_peak <= 1 * GiB, "MAX held (peak %llu)", (unsigned long long)t->spill_peak);
  SAY("arena %s: %d threads, %d of %d requests spilled, spill peak %llu MiB, all given back", arena, T_THREADS, n,
      T_THREADS * T_ROUNDS, (unsigned long long)(t->spill_peak / MiB));
  CHECK(n >= (int)(768 * MiB / (64 * MiB)), "at least the 768 MiB over the limit spilled (%d blocks)", n);
  kill(a, SIGTERM);
  CHECK(tp_wait(a) == 0, "the worker exits");
  return 0;
}

/* A context that ends holding a spilled block: the driver frees the host
 * memory with the context, and the tenant's spilled bytes go with it. */
static int case_ctxend(const char *arena) {
  config_in(arena, "[tenant s]\nlimit = 256MiB\non_limit = spill:1GiB\n");
  const char *w[] = {"ctxspill", arena, NULL};
  pid_t a = tp_spawn("ctxspill", "s", NULL, w);
  CHECK(wait_line("ctxspill.out", "spilled", TP_EVENTUALLY_MS, a) == 0, "a block spilled in its own context");
  CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
  const vs_snap_tenant *t = tp_tenant(&g_snap, "s");
  CHECK(t && t->spilled == 320 * MiB, "320 MiB spilled (%llu)", t ? (unsigned long long)t->spilled : 0ull);
  kill(a, SIGUSR1);
  CHECK(wait_line("ctxspill.out", "destroyed", TP_EVENTUALLY_MS, a) == 0, "the context was destroyed");
  CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
  t = tp_tenant(&g_snap, "s");
  const vs_snap_proc *p = tp_proc(&g_snap, a);
  CHECK(t && t->spilled == 0 && p && p->spilled == 0, "the ended context's spilled bytes are given back (%llu)",
        t ? (unsigned long long)t->spilled : 0ull);
  CHECK(t->used == 0, "and its device bytes (%llu)", (unsigned long long)t->used);
  SAY("arena %s: a context destroyed holding a spilled block gives back its spilled and device bytes", arena);
  kill(a, SIGTERM);
  CHECK(tp_wait(a) == 0, "the worker exits");
  return 0;
}

/* Kept spilled blocks (spill.h), under a 64 MiB limit with 56 MiB on the
 * device and the sim's stream operations each 20 ms late
 * (VRAMSIM_ASYNC_DELAY_US). Requests above the limit are refused at once,
 * with no OOM ladder, whose sync would hide the case: a spilled 80 MiB
 * block is freed while a memset of 0xAA on another stream is still queued
 * on it, and a 70 MiB request spills next. With an arena the kept block
 * serves it, with no new host memory, and only once that memset is done:
 * the program's own 0x55 is what it reads back (handed out at once, the
 * late memset would overwrite it). Without an arena (off) the block went
 * back to the host. Then every spilled block freed: the last one takes the
 * kept ones back to the host. */
static int w_reuse(const char *arena) {
  tp_cuda_up();
  int arena_on = strcmp(arena, "off") != 0;
  CUdeviceptr dev, big, a, b;
  CHECK(cuMemAlloc(&dev, 56 * MiB) == CUDA_SUCCESS && mem_type(dev) == CU_MEMORYTYPE_DEVICE, "56 MiB on the device");
  CHECK(cuMemAlloc(&big, 400 * MiB) == CUDA_SUCCESS && mem_type(big) == CU_MEMORYTYPE_HOST, "400 MiB spilled");
  CHECK(cuMemAlloc(&a, 80 * MiB) == CUDA_SUCCESS && mem_type(a) == CU_MEMORYTYPE_HOST, "80 MiB spilled");
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
  uint64_t allocs = vramsim_calls("cuMemHostAlloc");
  CHECK(cuMemsetD8Async(a, 0xAA, 80 * MiB, s) == CUDA_SUCCESS, "a late memset on the block");
  CHECK(cuMemFree(a) == CUDA_SUCCESS, "free it at once");
  CHECK(cuMemAlloc(&b, 70 * MiB) == CUDA_SUCCESS && mem_type(b) == CU_MEMORYTYPE_HOST, "70 MiB spilled");
  uint64_t made = vramsim_calls("cuMemHostAlloc") - allocs;
  if (arena_on)
    CHECK(b == a && made == 0, "the kept block serves it (%llu host allocations)", (unsigned long long)made);
  else
    CHECK(made == 1, "no arena: new host memory (%llu host allocations)", (unsigned long long)made);
  /* Its range is what the program asked for, not the kept block's 80 MiB
   * (the sim, as cuMemGetAddressRange, knows no host memory: pointer
   * attributes say). */
  size_t attr_size = 0;
  CUdeviceptr attr_base = 0;
  CUpointer_attribute at[2] = {CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR};
  void *ad[2] = {&attr_size, &attr_base};
  CHECK(cuPointerGetAttribute(&attr_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, b + MiB) == CUDA_SUCCESS &&
        attr_size == 70 * MiB, "RANGE_SIZE: %zu", attr_size);
  attr_size = 0;
  CHECK(cuPointerGetAttributes(2, at, ad, b + MiB) == CUDA_SUCCESS && attr_size == 70 * MiB && attr_base == b,
        "cuPointerGetAttributes: RANGE_SIZE %zu, RANGE_START at +%lld", attr_size, (long long)(attr_base - b));
  if (arena_on)
    CHECK(cuPointerGetAttribute(&attr_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, b + 70 * MiB) == CUDA_ERROR_INVALID_VALUE,
          "past the request the pointer is unknown, as past an arena block");
  CHECK(cuMemsetD8(b, 0x55, 70 * MiB) == CUDA_SUCCESS, "the program's own bytes");
  CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS, "the other stream done");
  unsigned char *buf = malloc(70 * MiB);
  CHECK(buf && cuMemcpyDtoH(buf, b, 70 * MiB) == CUDA_SUCCESS, "read back");
  for (size_t off = 0; off < 70 * MiB; off += 4093)
    CHECK(buf[off] == 0x55, "byte %zu is %#x: the block was handed out before the device was done with it", off,
          buf[off]);
  free(buf);
  CHECK(cuMemFree(b) == CUDA_SUCCESS && cuMemFree(big) == CUDA_SUCCESS, "every spilled block freed");
  CHECK(vramsim_calls("cuMemFreeHost") == vramsim_calls("cuMemHostAlloc"), "all host memory back: %llu of %llu",
        (unsigned long long)vramsim_calls("cuMemFreeHost"), (unsigned long long)vramsim_calls("cuMemHostAlloc"));
  CHECK(cuMemFree(dev) == CUDA_SUCCESS, "free");
  printf("reused %d\n", arena_on);
  return 0;
}

static int case_reuse(const char *arena) {
  config_in(arena, "[tenant s]\nlimit = 64MiB\non_limit = spill:1GiB\n");
  const char *args[] = {"reuse", arena, NULL};
  pid_t w = tp_spawn("reuse", "s", "VRAMSIM_ASYNC_DELAY_US=20000", args);
  CHECK(tp_wait(w) == 0, "the reuse worker passed");
  CHECK(tp_snapshot(&g_snap) == 0, "snapshot");
  const vs_snap_tenant *t = tp_tenant(&g_snap, "s");
  CHECK(!t || t->spilled == 0, "nothing left spilled (%llu)", t ? (unsigned long long)t->spilled : 0ull);
  SAY("arena %s: a freed spilled block %s", arena,
      strcmp(arena, "off") ? "served the next spill once the device was done" : "went back to the host");
  return 0;
}

/* Kept blocks within MAX (spill.h), under a 64 MiB limit with 56 MiB on the
 * device and spill:300MiB: 100 and 60 MiB spilled, the 60 freed and kept
 * (room: the 100 live); 120 MiB spilled (no kept block fits it): 280 MiB
 * pinned; 30 MiB spilled next (the kept 60 does not fit it either): the
 * kept block goes back to the host, or the process would pin 310 MiB.
 * Then freed blocks are kept only up to the live bytes. */
static int w_keepmax(void) {
  tp_cuda_up();
  CUdeviceptr dev, a, b, c, d;
  CHECK(cuMemAlloc(&dev, 56 * MiB) == CUDA_SUCCESS && mem_type(dev) == CU_MEMORYTYPE_DEVICE, "56 MiB on the device");
  CHECK(cuMemAlloc(&a, 100 * MiB) == CUDA_SUCCESS && mem_type(a) == CU_MEMORYTYPE_HOST, "100 MiB spilled");
  CHECK(cuMemAlloc(&b, 60 * MiB) == CUDA_SUCCESS && mem_type(b) == CU_MEMORYTYPE_HOST, "60 MiB spilled");
  uint64_t frees = vramsim_calls("cuMemFreeHost");
  CHECK(cuMemFree(b) == CUDA_SUCCESS && vramsim_calls("cuMemFreeHost") == frees, "the 60 MiB freed and kept");
  CHECK(cuMemAlloc(&c, 120 * MiB) == CUDA_SUCCESS && mem_type(c) == CU_MEMORYTYPE_HOST && c != b, "120 MiB spilled");
  CHECK(vramsim_calls("cuMemFreeHost") == frees, "the kept block stays: 280 MiB pinned");
  CHECK(cuMemAlloc(&d, 30 * MiB) == CUDA_SUCCESS && mem_type(d) == CU_MEMORYTYPE_HOST, "30 MiB spilled");
  CHECK(vramsim_calls("cuMemFreeHost") == frees + 1, "the kept block back to the host (%llu host frees)",
        (unsigned long long)(vramsim_calls("cuMemFreeHost") - frees));
  /* Kept at most the live bytes: the 120 MiB kept (130 live after it),
   * the 100 MiB not (30 live after it). */
  frees = vramsim_calls("cuMemFreeHost");
  CHECK(cuMemFree(c) == CUDA_SUCCESS && vramsim_calls("cuMemFreeHost") == frees, "the 120 MiB freed and kept");
  CHECK(cuMemFree(a) == CUDA_SUCCESS && vramsim_calls("cuMemFreeHost") == frees + 1,
        "the 100 MiB back to the host, more than the live bytes (%llu host frees)",
        (unsigned long long)(vramsim_calls("cuMemFreeHost") - frees));
  CHECK(cuMemFree(d) == CUDA_SUCCESS, "the last spilled block freed");
  CHECK(vramsim_calls("cuMemFreeHost") == vramsim_calls("cuMemHostAlloc"), "all host memory back");
  CHECK(cuMemFree(dev) == CUDA_SUCCESS, "free");
  return 0;
}

static int case_keepmax(const char *arena) {
  config_in(arena, "[tenant s]\nlimit = 64MiB\non_limit = spill:300MiB\n");
  const char *args[] = {"keepmax", NULL};
  pid_t w = tp_spawn("keepmax", "s", NULL, args);
  CHECK(tp_wait(w) == 0, "the keepmax worker passed");
  SAY("arena %s: the kept spilled blocks and the live ones stay within MAX", arena);
  return 0;
}

/* The driver refuses (a process without the shim holds most of the card;
 * the ledger does not see it): the request is spilled all the same. */
static int case_driver(const char *tool) {
  (void)tool;
  tp_config("arena = off\n", "[tenant d]\non_limit = spill:4GiB\n");
  const char *h[] = {"hold", "3072", NULL};
  pid_t o = tp_spawn("outsider", NULL, "LD_PRELOAD=", h);
  CHECK(wait_line("outsider.out", "holding", TP_EVENTUALLY_MS, o) == 0, "the outsider holds 3 GiB");
  const char *st[] = {"spilltry", "2048", NULL};
  char trace[600];
  snprintf(trace, sizeof trace, "VRAMSHIM_TRACE=%s", tp_path("trace-%p.csv"));
  pid_t d = tp_spawn("driver", "d", trace, st);
  CHECK(tp_wait(d) == 0, "refused by the driver, served from host memory");
  /* The trace has the program's allocation and free, spilled or not. */
  char name[64];
  snprintf(name, sizeof name, "trace-%d.csv", (int)d);
  char *csv = tp_read(name);
  CHECK(tp_count_lines(csv, ",allocate,") == 1 && tp_count_lines(csv, ",2147483648,") == 2 &&
            tp_count_lines(csv, ",free,") == 1,
        "the trace records the spilled block:\n%s", csv);
  free(csv);
  char *err = tp_read("driver.err");
  CHECK(tp_count_lines(err, "spilling") == 1, "the episode line:\n%s", err);
  free(err);
  SAY("a driver refusal under spill: 2 GiB served from host memory");
  kill(o, SIGTERM);
  CHECK(tp_wait(o) == 0, "the outsider exits");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  CHECK(argc >= 2, "usage: shim_spill case NAME ARENA WORKDIR TOOL | WORKER ARGS");
  const char *m = argv[1];
  if (strcmp(m, "case") != 0) {
    tp_worker_signals();
    if (!strcmp(m, "spiller")) return w_spiller();
    if (!strcmp(m, "spilltry")) return w_spilltry(argc - 2, argv + 2);
    if (!strcmp(m, "hold")) return w_hold(argc - 2, argv + 2);
    if (!strcmp(m, "try")) return w_try(argc - 2, argv + 2);
    if (!strcmp(m, "threads")) return w_threads();
    if (!strcmp(m, "ctxspill") && argc >= 3) return w_ctxspill(argv[2]);
    if (!strcmp(m, "reuse") && argc >= 3) return w_reuse(argv[2]);
    if (!strcmp(m, "keepmax")) return w_keepmax();
    CHECK(0, "unknown worker %s", m);
  }
  CHECK(argc >= 6, "case NAME ARENA WORKDIR TOOL");
  tp_workdir(argv[4]);
  int r = 1;
  if (!strcmp(argv[2], "spill")) r = case_spill(argv[3], argv[5]);
  else if (!strcmp(argv[2], "driver")) r = case_driver(argv[5]);
  else if (!strcmp(argv[2], "threads")) r = case_threads(argv[3]);
  else if (!strcmp(argv[2], "ctxend")) r = case_ctxend(argv[3]);
  else if (!strcmp(argv[2], "reuse")) r = case_reuse(argv[3]);
  else if (!strcmp(argv[2], "keepmax")) r = case_keepmax(argv[3]);
  else CHECK(0, "unknown case %s", argv[2]);
  if (r == 0) SAY("PASS %s %s", argv[2], argv[3]);
  return r;
}

/* Stream-ordered allocation served by the arena (stream_alloc.h, docs/arena.md
 * "The lane"), on the sim's asynchronous streams.
 *
 * `lane`: a program that made a stream of its own (so the process is out
 * of stream order) allocates with cuMemAllocAsync and frees with
 * cuMemFreeAsync on the legacy stream, each block freed while slow work on
 * the legacy stream still reads it: the freed block is the very next
 * allocation of its size, with no cuCtxSynchronize of the arena's and no
 * call to the driver's pool, and every read still sees its own bytes (the
 * new owner's writes queue behind it on the same stream).
 * `off-lane`: a block freed on the legacy stream with slow work on it, then
 * a cuMemAlloc (usable on any stream at once), written on the program's
 * other stream at once: that work must not overwrite the old bytes before
 * the legacy stream read them (the arena syncs first). With
 * VRAMSHIM_DEBUG_UNSAFE_REUSE=1 (the arena's sync a no-op)
 * `off-lane-unsafe` must see the damage, so the test catches early reuse.
 * Then the same with cuMemAllocAsync on the other stream: the arena makes
 * that stream wait for the lane (an event, cuStreamWaitEvent) instead of a
 * host sync, so the new bytes land only after the legacy stream read the
 * old ones, and the host never waited; `off-lane-unsafe` (the order made a
 * no-op as well) sees that damage too. Small or large, neither goes to the
 * driver's pool.
 * `driver`: what stays with the driver's pool: VRAMSHIM_ARENA_ASYNC=off
 * (run with it set), the per-thread default stream, and every request once
 * the program chose a pool of its own (cuDeviceSetMemPool).
 * `ctx-end`: stream-ordered arena blocks still live when their context is
 * reset leave the shim's books with it (the arena goes with its context),
 * and the next context serves them again.
 * `pool-stats`: the device's default pool counts the arena's
 * stream-ordered blocks beside its own (cuMemPoolGetAttribute: used,
 * reserved, the used high and its reset), another pool does not, and
 * cuMemPoolTrimTo of the default pool trims the arena (pool_view.c).
 * `peer-access MODE` (two cards): after cuMemPoolSetAccess, cuMemAllocAsync
 * is the driver's pool's; a block the arena served before reaches the
 * device given access in vmm mode (its mappings opened), not in chunks. */
#include "shim_test.h"
#include "vramsim.h"

#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

static shim_api g_shim;
static sim_api g_sim;
static uint64_t own_syncs(void) { return t_stats(&g_shim, 0).driver_calls[VRAMSHIM_CALL_SYNC]; }
static uint64_t pool_allocs(void) { return g_sim.calls("cuMemAllocAsync") + g_sim.calls("cuMemAllocAsync_ptsz"); }

static void fill(unsigned char *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed * 31 + i * 7);
}

static _Atomic int g_release;
static void sleeper(void *user) {   /* slow work: until released, at most user ms */
  int ms_max = (int)(intptr_t)user;
  for (int ms = 0; ms < ms_max && !atomic_load(&g_release); ms++) usleep(1000);
}

static const size_t sizes[] = {4096, 300 << 10, 24 << 20};   /* slab, heap, large */
#define NS (sizeof sizes / sizeof sizes[0])

static void lane(void) {
  CUstream s;
  T_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));   /* out of stream order from here */
  const int steps = 40;
  unsigned char *want[NS][2], *got[NS][2];
  for (size_t i = 0; i < NS; i++)
    for (int k = 0; k < 2; k++) want[i][k] = malloc(sizes[i]), got[i][k] = malloc(sizes[i]);
  uint64_t syncs0 = own_syncs(), pool0 = pool_allocs();
  int reused[NS] = {0};
  for (int step = 0; step < steps; step++) {
    /* Slow work first, so everything after it on the stream is still in
     * flight when the blocks are freed and allocated again. */
    atomic_store(&g_release, 0);
    T_CU(cuLaunchHostFunc(NULL, sleeper, (void *)(intptr_t)20));
    for (size_t i = 0; i < NS; i++) {
      CUdeviceptr p[2];
      for (int k = 0; k < 2; k++) {
        T_CU(cuMemAllocAsync(&p[k], sizes[i], NULL));
        fill(want[i][k], sizes[i], (unsigned)(step * 7 + (int)i * 2 + k));
        memset(got[i][k], 0, sizes[i]);
        T_CU(cuMemcpyHtoDAsync(p[k], want[i][k], sizes[i], NULL));
        T_CU(cuMemcpyDtoHAsync(got[i][k], p[k], sizes[i], NULL));
        /* Freed while the copies above have not run: the second round
         * gets this block back at once. */
        if (k == 0) T_CU(cuMemFreeAsync(p[0], NULL));
      }
      if (p[1] == p[0]) reused[i]++;
      T_CU(cuMemFreeAsync(p[1], NULL));
    }
    atomic_store(&g_release, 1);
    T_CU(cuStreamSynchronize(NULL));
    for (size_t i = 0; i < NS; i++)
      for (int k = 0; k < 2; k++)
        T_CHECK(!memcmp(got[i][k], want[i][k], sizes[i]), "step %d: %zu-byte block %d read wrong bytes", step,
                sizes[i], k);
  }
  uint64_t syncs = own_syncs() - syncs0, pool = pool_allocs() - pool0;
  T_SAY("lane: %d steps, reused at once %d/%d/%d, the arena's own syncs %llu, driver pool allocations %llu", steps,
        reused[0], reused[1], reused[2], (unsigned long long)syncs, (unsigned long long)pool);
  T_EQ_U64(syncs, 0, "the arena's cuCtxSynchronize calls for lane reuse");
  T_EQ_U64(pool, 0, "cuMemAllocAsync calls that reached the driver's pool");
  for (size_t i = 0; i < NS; i++)
    T_CHECK(reused[i] == steps, "a %zu-byte block freed on the lane came back at once only %d times of %d", sizes[i],
            reused[i], steps);
  for (size_t i = 0; i < NS; i++)
    for (int k = 0; k < 2; k++) free(want[i][k]), free(got[i][k]);
  T_CU(cuStreamDestroy(s));
}

/* A block of n bytes holding a, allocated and freed on the lane while
 * slow legacy-stream work (up to ms, until g_release) is queued before
 * its read into got: the freed block's old owner still reads it. */
static CUdeviceptr freed_under_slow_read(size_t n, const unsigned char *a, unsigned char *got, int ms) {
  CUdeviceptr x;
  memset(got, 0, n);
  T_CU(cuMemAllocAsync(&x, n, NULL));
  T_CU(cuMemcpyHtoD(x, a, n));
  atomic_store(&g_release, 0);
  T_CU(cuLaunchHostFunc(NULL, sleeper, (void *)(intptr_t)ms));
  T_CU(cuMemcpyDtoHAsync(got, x, n, NULL));
  T_CU(cuMemFreeAsync(x, NULL));
  return x;
}

/* Bit 0: the legacy stream read bytes a cuMemAlloc's owner wrote after
 * the free; bit 1: the same for a cuMemAllocAsync's on the other stream. */
static int off_lane(int unsafe) {
  CUstream s;
  T_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  size_t n = sizes[1];
  unsigned char *a = malloc(n), *b = malloc(n), *got = malloc(n);
  fill(a, n, 0x11);
  fill(b, n, 0xb2);
  /* Unsafe, nothing waits for the slow work and this function always
   * releases it: a minute's cap keeps a slow machine from ending it
   * before the new bytes land (which would hide the damage). */
  int cap = unsafe ? 60000 : 1000;
  CUdeviceptr y, x = freed_under_slow_read(n, a, got, cap);
  uint64_t syncs0 = own_syncs();
  T_CU(cuMemAlloc(&y, n));   /* off the lane: may be used on any stream at once */
  T_CU(cuMemcpyHtoDAsync(y, b, n, s));
  T_CU(cuStreamSynchronize(s));
  atomic_store(&g_release, 1);
  T_CU(cuStreamSynchronize(NULL));
  int overlap = y < x + n && x < y + n, damaged = memcmp(got, a, n) != 0;
  T_SAY("off-lane: the block freed on the lane %s; the arena's own syncs %llu; the legacy stream read %s",
        overlap ? "came back to cuMemAlloc" : "did not come back", (unsigned long long)(own_syncs() - syncs0),
        damaged ? "the NEW bytes (early reuse)" : "its original bytes");
  if (unsafe) T_CHECK(overlap, "the freed block never came back: the unsafe run proves nothing");
  else T_CHECK(own_syncs() > syncs0 || !overlap, "the block came back off the lane with no sync");
  T_CU(cuMemFree(y));

  /* The same, the new owner a cuMemAllocAsync on s: s waits, not the host. */
  CUdeviceptr y2, small, x2 = freed_under_slow_read(n, a, got, unsafe ? cap : 300);
  uint64_t syncs1 = own_syncs(), pool0 = pool_allocs();
  T_CU(cuMemAllocAsync(&y2, n, s));
  T_CU(cuMemcpyHtoDAsync(y2, b, n, s));
  uint64_t host_syncs = own_syncs() - syncs1;
  /* Unsafe, the write on s has nothing to wait for: let it land before the
   * lane's slow work ends (else the race proves nothing). Safe, s waits for
   * the lane, so the lane's work is released first. */
  if (unsafe) T_CU(cuStreamSynchronize(s));
  atomic_store(&g_release, 1);
  T_CU(cuStreamSynchronize(s));
  T_CU(cuStreamSynchronize(NULL));
  int overlap2 = y2 < x2 + n && x2 < y2 + n, damaged2 = memcmp(got, a, n) != 0;
  T_SAY("off-lane on a stream: the block freed on the lane %s; the arena's own syncs %llu; the legacy stream read %s",
        overlap2 ? "came back on the other stream" : "did not come back", (unsigned long long)host_syncs,
        damaged2 ? "the NEW bytes (early reuse)" : "its original bytes");
  if (unsafe) T_CHECK(overlap2, "the freed block never came back on the stream: the unsafe run proves nothing");
  else T_EQ_U64(host_syncs, 0, "host syncs for a cuMemAllocAsync on the program's stream");
  T_CU(cuMemAllocAsync(&small, 4096, s));
  T_EQ_U64(pool_allocs() - pool0, 0, "pool allocations for cuMemAllocAsync on the program's stream");
  T_CU(cuMemFreeAsync(small, s));
  T_CU(cuMemFreeAsync(y2, s));
  T_CU(cuStreamSynchronize(s));
  T_CU(cuStreamDestroy(s));
  free(a);
  free(b);
  free(got);
  return damaged | damaged2 << 1;   /* which of the two saw early reuse */
}

static void driver(void) {
  CUdeviceptr p;
  uint64_t pool0 = pool_allocs();
  if (getenv("VRAMSHIM_ARENA_ASYNC")) {   /* =off: every request to the driver's pool */
    T_CU(cuMemAllocAsync(&p, 1 << 20, NULL));
    T_CU(cuMemFreeAsync(p, NULL));
    T_CU(cuStreamSynchronize(NULL));
    T_EQ_U64(pool_allocs() - pool0, 1, "cuMemAllocAsync calls that reached the driver with VRAMSHIM_ARENA_ASYNC=off");
    return;
  }
  /* Served by the arena: the driver's pool sees nothing, and the block
   * describes itself as one from the device's default pool would. */
  T_CU(cuMemAllocAsync(&p, 1 << 20, NULL));
  CUmemoryPool def, got = NULL;
  unsigned char ipc = 1;
  T_CU(cuDeviceGetDefaultMemPool(&def, 0));
  T_CU(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
  T_CU(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p));
  T_CHECK(got == def, "the block's pool is %p, the device's default pool %p", (void *)got, (void *)def);
  T_CHECK(ipc == 0, "a stream-ordered block said it is legacy-IPC capable");
  T_CU(cuMemFreeAsync(p, NULL));
  T_EQ_U64(pool_allocs() - pool0, 0, "cuMemAllocAsync calls that reached the driver on the legacy stream");
  /* The per-thread default stream: the driver's. */
  T_CU(cuMemAllocAsync(&p, 1 << 20, CU_STREAM_PER_THREAD));
  T_CU(cuMemFreeAsync(p, CU_STREAM_PER_THREAD));
  T_CU(cuStreamSynchronize(NULL));
  T_EQ_U64(pool_allocs() - pool0, 1, "per-thread-stream cuMemAllocAsync calls that reached the driver");
  /* A pool of the program's choosing: the driver's from then on. */
  CUmemoryPool pool;
  T_CU(cuDeviceGetDefaultMemPool(&pool, 0));
  T_CU(cuDeviceSetMemPool(0, pool));
  T_CU(cuMemAllocAsync(&p, 1 << 20, NULL));
  T_CU(cuMemFreeAsync(p, NULL));
  T_CU(cuStreamSynchronize(NULL));
  T_EQ_U64(pool_allocs() - pool0, 2, "cuMemAllocAsync calls that reached the driver after cuDeviceSetMemPool");
  T_SAY("driver: the per-thread stream and a chosen pool go to the driver's pool");
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr) {
  cuuint64_t v = 0;
  T_CU(cuMemPoolGetAttribute(pool, attr, &v));
  return v;
}

static void pool_stats(void) {
  CUmemoryPool def, own;
  T_CU(cuDeviceGetDefaultMemPool(&def, 0));
  CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                          .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  T_CU(cuMemPoolCreate(&own, &props));
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0, "the default pool's used bytes at the start");
  /* Two blocks the arena serves on the legacy stream, one the driver's pool
   * serves on the per-thread stream: the pool counts all three. */
  const uint64_t a = 3 << 20, b = 300 << 10, c = 1 << 20;
  CUdeviceptr p, q, r;
  uint64_t pool0 = pool_allocs();
  T_CU(cuMemAllocAsync(&p, a, NULL));
  T_CU(cuMemAllocAsync(&q, b, NULL));
  T_EQ_U64(pool_allocs() - pool0, 0, "legacy-stream allocations that reached the driver's pool");
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), a + b, "used bytes with two arena blocks");
  T_CU(cuMemAllocAsync(&r, c, CU_STREAM_PER_THREAD));
  T_EQ_U64(pool_allocs() - pool0, 1, "per-thread-stream allocations that reached the driver's pool");
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), a + b + c, "used bytes with the driver's block too");
  uint64_t res = pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  T_CHECK(res >= a + b + c, "reserved %llu below used %llu", (unsigned long long)res, (unsigned long long)(a + b + c));
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH), a + b + c, "the used high");
  /* Another pool is the driver's alone. */
  T_EQ_U64(pool_attr(own, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0, "a pool of the program's own: used bytes");
  /* A free on the lane: used drops at once, the high stays until reset. */
  T_CU(cuMemFreeAsync(q, NULL));
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), a + c, "used bytes after a lane free");
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH), a + b + c, "the used high after a lane free");
  cuuint64_t zero = 0;
  uint64_t reserved_high = pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH);
  T_CU(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH), a + c, "the used high once reset");
  /* The two highs are reset apart, as the driver keeps them. */
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), reserved_high, "the reserved high after the used reset");
  T_CU(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
           "the reserved high once reset");
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH), a + c, "the used high after the reserved reset");
  T_CU(cuMemFreeAsync(r, CU_STREAM_PER_THREAD));
  T_CU(cuMemFreeAsync(p, NULL));
  T_CU(cuStreamSynchronize(NULL));
  T_EQ_U64(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0, "used bytes once all are freed");
  /* cuMemPoolTrimTo(default pool, 0) gives the arena's cached memory back
   * too (PyTorch's empty_cache on its cudaMallocAsync backend). */
  uint64_t held = t_stats(&g_shim, 0).reserved_bytes;
  T_CHECK(held > 0, "the arena holds nothing cached before the trim: the test proves nothing");
  T_CU(cuMemPoolTrimTo(own, 0));
  T_EQ_U64(t_stats(&g_shim, 0).reserved_bytes, held, "what the arena holds after trimming another pool");
  T_CU(cuMemPoolTrimTo(def, 0));
  T_EQ_U64(t_stats(&g_shim, 0).reserved_bytes, 0, "what the arena holds after trimming the default pool");
  T_CU(cuMemPoolDestroy(own));
  T_SAY("pool-stats: the default pool counted %llu + %llu arena bytes beside the driver's %llu; its trim "
        "gave back the arena's %llu cached bytes", (unsigned long long)a, (unsigned long long)b,
        (unsigned long long)c, (unsigned long long)held);
}

/* cuMemPoolSetAccess: access for another device is the driver's to give,
 * so from then on stream-ordered allocations are the driver's pool's (and
 * one warning names the arena's blocks served before). Two cards. */
static void peer_access(int vmm) {
  CUdeviceptr before, p;
  T_CU(cuMemAllocAsync(&before, 1 << 20, NULL));
  T_CHECK(!vramsim_device_can_access(1, before, 1 << 20), "device 1 reaches the block before cuMemPoolSetAccess");
  uint64_t pool0 = pool_allocs();
  CUmemoryPool def;
  T_CU(cuDeviceGetDefaultMemPool(&def, 0));
  CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1},
                       .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  T_CU(cuMemPoolSetAccess(def, &d, 1));
  CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  T_CU(cuMemPoolGetAccess(&f, def, &d.location));
  T_CHECK(f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "the driver's pool did not keep the access given (%d)", (int)f);
  /* the block the arena served before: a VMM arena opened it to device 1
   * as the driver's pool opens its own; a chunks arena could not (said) */
  T_CHECK(vramsim_device_can_access(1, before, 1 << 20) == vmm, "device 1 reaches the arena's earlier block: %d",
          vramsim_device_can_access(1, before, 1 << 20));
  T_CU(cuMemAllocAsync(&p, 1 << 20, NULL));
  T_EQ_U64(pool_allocs() - pool0, 1, "cuMemAllocAsync calls that reached the driver after cuMemPoolSetAccess");
  CUmemoryPool got = NULL;
  T_CU(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
  T_CHECK(got == def, "the block's pool is %p, not the default pool %p", (void *)got, (void *)def);
  T_CU(cuMemFreeAsync(p, NULL));
  T_CU(cuMemFreeAsync(before, NULL));
  T_CU(cuStreamSynchronize(NULL));
  T_EQ_U64(t_stats(&g_shim, 0).live_bytes, 0, "live bytes at the end");
  T_SAY("peer-access: after cuMemPoolSetAccess the driver's pool serves cuMemAllocAsync");
}

static void ctx_end(void) {
  CUdeviceptr p, q;
  T_CU(cuMemAllocAsync(&p, 1 << 20, NULL));
  T_CU(cuMemAllocAsync(&q, 8 << 20, NULL));
  T_EQ_U64(pool_allocs(), 0, "pool allocations before the reset");
  T_CHECK(t_stats(&g_shim, 0).live_bytes == (1 << 20) + (8 << 20), "live before the reset: %llu",
          (unsigned long long)t_stats(&g_shim, 0).live_bytes);
  T_CU(cuDevicePrimaryCtxReset(0));
  T_EQ_U64(t_stats(&g_shim, 0).live_bytes, 0, "live bytes once the context was reset");
  CUcontext ctx;
  T_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
  T_CU(cuCtxSetCurrent(ctx));
  T_CU(cuMemAllocAsync(&p, 1 << 20, NULL));
  T_CU(cuMemFreeAsync(p, NULL));
  T_CU(cuStreamSynchronize(NULL));
  T_EQ_U64(t_stats(&g_shim, 0).live_bytes, 0, "live bytes at the end");
  T_SAY("ctx-end: the reset took the live stream-ordered blocks with it");
}

int main(int argc, char **argv) {
  T_CHECK(argc == 2 || argc == 3,
          "usage: %s lane|off-lane|off-lane-unsafe|driver|ctx-end|pool-stats|peer-access [vmm|chunks]", argv[0]);
  g_shim = t_shim();
  g_sim = t_sim(RTLD_DEFAULT);
  T_CHECK(g_sim.calls, "needs the simulated driver's counters");
  CUcontext ctx = t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  const char *mode = argv[1];
  if (!strcmp(mode, "lane")) {
    lane();
  } else if (!strcmp(mode, "off-lane")) {
    int d = off_lane(0);
    T_CHECK(!d, "the legacy stream read bytes written on the other stream after the free (case %d)", d);
  } else if (!strcmp(mode, "off-lane-unsafe")) {
    int d = off_lane(1);
    T_CHECK(d == 3, "with the arena's sync and order made no-ops the early reuse was not seen in every case (%d): "
            "the test proves nothing", d);
  } else if (!strcmp(mode, "driver")) {
    driver();
  } else if (!strcmp(mode, "ctx-end")) {
    ctx_end();
  } else if (!strcmp(mode, "pool-stats")) {
    pool_stats();
  } else if (!strcmp(mode, "peer-access")) {
    peer_access(argc == 3 && !strcmp(argv[2], "vmm"));
  } else {
    T_CHECK(0, "unknown mode %s", mode);
  }
  (void)ctx;
  T_CU(cuDevicePrimaryCtxRelease(0));
  T_SAY("ok");
  return 0;
}

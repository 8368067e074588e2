/* The simulated driver as nvcuda.dll, under Wine: what tests/sim checks on
 * Linux, for the parts whose OS code differs (os_windows.c).
 *
 *   sim_win basic    allocate, memset, copy, cuMemGetInfo, OOM at the card's size, a CUDA array
 *   sim_win vmm      a VMM card: stitching, double mapping, unmap, release
 *   sim_win novmm    a card without VMM (VRAMSIM_VMM=0): VMM calls NOT_SUPPORTED
 *   sim_win ipc      cuIpc* CUDA_ERROR_NOT_SUPPORTED, as from a WDDM driver
 *   sim_win streams  streams that run later (VRAMSIM_ASYNC_DELAY_US), events, pools
 *   sim_win procs    a second process's allocation is seen by the first, and
 *                    reclaimed once that process is ended with TerminateProcess;
 *                    processes ended while hammering the state lock never
 *                    leave it stuck (the named mutex comes back abandoned)
 *
 * Linked against nvcuda through its import library: the runner
 * (tests/windows/run) copies the sim into the prefix's system32. Each check
 * prints one line; the exit code is the number of failed checks. */
#include <cuda.h>
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vramsim.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
static int failures;

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (cond) {                                                                 \
            printf("ok   %s:%d %s\n", __func__, __LINE__, #cond);                   \
        } else {                                                                    \
            printf("FAIL %s:%d %s: ", __func__, __LINE__, #cond);                   \
            printf(__VA_ARGS__);                                                    \
            printf("\n");                                                           \
            failures++;                                                             \
        }                                                                           \
        fflush(stdout);                                                             \
    } while (0)
#define CU(call, want)                                                              \
    do {                                                                            \
        CUresult r_ = (call);                                                       \
        CHECK(r_ == (want), "%s gave %d, want %d", #call, (int)r_, (int)(want));    \
    } while (0)

static CUcontext setup(void)
{
    CU(cuInit(0), CUDA_SUCCESS);
    CUdevice d;
    CU(cuDeviceGet(&d, 0), CUDA_SUCCESS);
    CUcontext c = NULL;
    CU(cuDevicePrimaryCtxRetain(&c, d), CUDA_SUCCESS);
    CU(cuCtxSetCurrent(c), CUDA_SUCCESS);
    return c;
}

static unsigned long long card_size(void)
{
    const char *e = getenv("VRAMSIM_CARDS");
    return e && strcmp(e, "3GiB") == 0 ? 3 * GiB : 0;
}

static void basic(void)
{
    setup();
    size_t fr = 0, total = 0;
    CU(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    CHECK(total == card_size(), "total %zu", total);
    CHECK(fr == total, "free %zu of %zu", fr, total);
    CUdeviceptr p = 0;
    const size_t n = 64 * MiB;
    CU(cuMemAlloc(&p, n), CUDA_SUCCESS);
    CU(cuMemsetD8(p, 0x5a, n), CUDA_SUCCESS);
    unsigned char *h = malloc(n);
    CU(cuMemcpyDtoH(h, p, n), CUDA_SUCCESS);
    CHECK(h[0] == 0x5a && h[n - 1] == 0x5a, "memset read back %x %x", h[0], h[n - 1]);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 7);
    CUdeviceptr q = 0;
    CU(cuMemAlloc(&q, n), CUDA_SUCCESS);
    CU(cuMemcpyHtoD(p, h, n), CUDA_SUCCESS);
    CU(cuMemcpyDtoD(q, p, n), CUDA_SUCCESS);
    memset(h, 0, n);
    CU(cuMemcpyDtoH(h, q, n), CUDA_SUCCESS);
    CHECK(h[12345] == (unsigned char)(12345 * 7), "copied byte %u", h[12345]);
    CU(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    CHECK(fr == total - 2 * n, "free %zu after %zu", fr, 2 * n);
    CHECK(vramsim_live_bytes(0) == 2 * n, "live %llu", (unsigned long long)vramsim_live_bytes(0));
    CUdeviceptr big = 0;
    CU(cuMemAlloc(&big, total), CUDA_ERROR_OUT_OF_MEMORY);   /* two 64 MiB are in use */
    CU(cuMemFree(p), CUDA_SUCCESS);
    CU(cuMemFree(q), CUDA_SUCCESS);
    CU(cuMemFree(q), CUDA_ERROR_INVALID_VALUE);
    CU(cuMemAlloc(&big, total), CUDA_SUCCESS);   /* now the whole card fits */
    CU(cuMemFree(big), CUDA_SUCCESS);
    void *pinned = NULL;
    CU(cuMemHostAlloc(&pinned, MiB, 0), CUDA_SUCCESS);
    memset(pinned, 1, MiB);
    CU(cuMemFreeHost(pinned), CUDA_SUCCESS);
    /* a CUDA array is charged to the card like an allocation (tools/sim/array.c) */
    CUDA_ARRAY_DESCRIPTOR d = {1000, 1000, CU_AD_FORMAT_FLOAT, 4};
    CUarray a = NULL;
    CU(cuArrayCreate(&a, &d), CUDA_SUCCESS);
    CU(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    CHECK(fr == total - 16 * MiB, "free %zu with a 16 MiB array", fr);
    CU(cuArrayDestroy(a), CUDA_SUCCESS);
    CU(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    CHECK(fr == total, "free %zu after the array", fr);
    free(h);
}

static CUmemAllocationProp prop0(void)
{
    CUmemAllocationProp pr;
    memset(&pr, 0, sizeof pr);
    pr.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    pr.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pr.location.id = 0;
    return pr;
}

static void set_rw(CUdeviceptr p, size_t n, CUresult want)
{
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(p, n, &d, 1), want);
}

static void vmm(void)
{
    setup();
    int v = -1;
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0), CUDA_SUCCESS);
    CHECK(v == 1, "VMM attribute %d", v);
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0), CUDA_SUCCESS);
    CHECK(v == 0, "POSIX fd handles on Windows: %d", v);
    CUmemAllocationProp pr = prop0();
    size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CHECK(g == 2 * MiB, "granularity %zu", g);
    CUdeviceptr va = 0, va2 = 0;
    CU(cuMemAddressReserve(&va, 3 * g, 0, 0, 0), CUDA_SUCCESS);
    CHECK(va % g == 0, "reservation %llx aligned", (unsigned long long)va);
    CUmemGenericAllocationHandle h[3];
    for (int i = 0; i < 3; i++) CU(cuMemCreate(&h[i], g, &pr, 0), CUDA_SUCCESS);
    size_t fr = 0, total = 0;
    CU(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    CHECK(fr == total - 3 * g, "physical memory charged: free %zu", fr);
    /* map the middle chunk first, then its neighbours: the reserved
     * pieces around each mapping are split and taken one by one */
    CU(cuMemMap(va + g, g, 0, h[1], 0), CUDA_SUCCESS);
    CU(cuMemMap(va, g, 0, h[0], 0), CUDA_SUCCESS);
    CU(cuMemMap(va + 2 * g, g, 0, h[2], 0), CUDA_SUCCESS);
    CU(cuMemMap(va, g, 0, h[1], 0), CUDA_ERROR_ALREADY_MAPPED);
    set_rw(va, 3 * g, CUDA_SUCCESS);
    /* one range for copies across the three chunks */
    size_t n = 3 * g;
    unsigned char *buf = malloc(n);
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i % 251);
    CU(cuMemcpyHtoD(va, buf, n), CUDA_SUCCESS);
    CU(cuMemsetD8(va + g - 16, 0xee, 32), CUDA_SUCCESS);   /* across a chunk border */
    memset(buf, 0, n);
    CU(cuMemcpyDtoH(buf, va, n), CUDA_SUCCESS);
    CHECK(buf[g - 17] == (unsigned char)((g - 17) % 251) && buf[g - 16] == 0xee && buf[g + 15] == 0xee &&
              buf[g + 16] == (unsigned char)((g + 16) % 251),
          "stitched bytes %x %x %x %x", buf[g - 17], buf[g - 16], buf[g + 15], buf[g + 16]);
    /* the middle chunk at a second address shows the same bytes */
    CU(cuMemAddressReserve(&va2, g, 0, 0, 0), CUDA_SUCCESS);
    CU(cuMemMap(va2, g, 0, h[1], 0), CUDA_SUCCESS);
    set_rw(va2, g, CUDA_SUCCESS);
    unsigned char b = 0;
    CU(cuMemcpyDtoH(&b, va2 + 100, 1), CUDA_SUCCESS);
    CHECK(b == (unsigned char)((g + 100) % 251), "alias byte %x", b);
    b = 0x42;
    CU(cuMemcpyHtoD(va2 + 100, &b, 1), CUDA_SUCCESS);
    CHECK(((volatile unsigned char *)(uintptr_t)va)[g + 100] == 0x42, "written through the alias");
    /* release while mapped: stays charged until unmapped everywhere */
    for (int i = 0; i < 3; i++) CU(cuMemRelease(h[i]), CUDA_SUCCESS);
    CU(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    CHECK(fr == total - 3 * g, "released but mapped: free %zu", fr);
    CU(cuMemUnmap(va + g, g), CUDA_SUCCESS);
    CU(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    CHECK(fr == total - 3 * g, "middle chunk still mapped at va2: free %zu", fr);
    CU(cuMemUnmap(va2, g), CUDA_SUCCESS);
    CU(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    CHECK(fr == total - 2 * g, "middle chunk gone: free %zu", fr);
    /* the hole is reserved again: a new chunk maps there */
    CUmemGenericAllocationHandle h4;
    CU(cuMemCreate(&h4, g, &pr, 0), CUDA_SUCCESS);
    CU(cuMemMap(va + g, g, 0, h4, 0), CUDA_SUCCESS);
    set_rw(va + g, g, CUDA_SUCCESS);
    CU(cuMemsetD8(va, 1, 3 * g), CUDA_SUCCESS);
    CU(cuMemRelease(h4), CUDA_SUCCESS);
    CU(cuMemAddressFree(va2, g), CUDA_SUCCESS);
    CU(cuMemAddressFree(va, 3 * g), CUDA_SUCCESS);   /* unmaps what is still mapped */
    CU(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    CHECK(fr == total, "all given back: free %zu of %zu", fr, total);
    /* the address space is free again: a reservation may take it */
    CUdeviceptr va3 = 0;
    CU(cuMemAddressReserve(&va3, 3 * g, 0, va, 0), CUDA_SUCCESS);
    CHECK(va3 == va, "hinted reservation at %llx got %llx", (unsigned long long)va, (unsigned long long)va3);
    CU(cuMemAddressFree(va3, 3 * g), CUDA_SUCCESS);
    pr.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CU(cuMemCreate(&h4, g, &pr, 0), CUDA_ERROR_NOT_SUPPORTED);
    free(buf);
}

static void novmm(void)
{
    setup();
    int v = -1;
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0), CUDA_SUCCESS);
    CHECK(v == 0, "VMM attribute %d", v);
    CUmemAllocationProp pr = prop0();
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    size_t g;
    CU(cuMemGetAllocationGranularity(&g, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_NOT_SUPPORTED);
    CU(cuMemCreate(&h, 2 * MiB, &pr, 0), CUDA_ERROR_NOT_SUPPORTED);
    CU(cuMemAddressReserve(&va, 2 * MiB, 0, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    /* plain allocations work as on any card */
    CUdeviceptr p;
    CU(cuMemAlloc(&p, 256 * MiB), CUDA_SUCCESS);
    CU(cuMemsetD32(p, 0xdeadbeef, 64 * MiB), CUDA_SUCCESS);
    unsigned int w = 0;
    CU(cuMemcpyDtoH(&w, p + 1000, 4), CUDA_SUCCESS);
    CHECK(w == 0xdeadbeef, "word %x", w);
    size_t fr, total;
    CU(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    CHECK(total == card_size() && fr == total - 256 * MiB, "free %zu of %zu", fr, total);
    CU(cuMemFree(p), CUDA_SUCCESS);
}

static void ipc(void)
{
    setup();
    CUdeviceptr p;
    CU(cuMemAlloc(&p, MiB), CUDA_SUCCESS);
    CUipcMemHandle ih;
    memset(&ih, 0, sizeof ih);
    CU(cuIpcGetMemHandle(&ih, p), CUDA_ERROR_NOT_SUPPORTED);
    CUdeviceptr q;
    CU(cuIpcOpenMemHandle(&q, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_NOT_SUPPORTED);
    CU(cuIpcCloseMemHandle(p), CUDA_ERROR_NOT_SUPPORTED);
    CU(cuMemFree(p), CUDA_SUCCESS);
}

/* Streams really run later (VRAMSIM_ASYNC_DELAY_US): stream worker
 * threads (winpthreads), events and their timing, stream-ordered
 * allocation from the default pool. */
static void streams(void)
{
    setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr p;
    CU(cuMemAlloc(&p, MiB), CUDA_SUCCESS);
    CU(cuMemsetD8(p, 0, MiB), CUDA_SUCCESS);
    CUevent e0, e1;
    CU(cuEventCreate(&e0, 0), CUDA_SUCCESS);
    CU(cuEventCreate(&e1, 0), CUDA_SUCCESS);
    CU(cuEventRecord(e0, st), CUDA_SUCCESS);
    CU(cuMemsetD8Async(p, 7, MiB, st), CUDA_SUCCESS);
    CU(cuEventRecord(e1, st), CUDA_SUCCESS);
    /* queued behind a 20 ms delay per operation: not run yet */
    CU(cuStreamQuery(st), CUDA_ERROR_NOT_READY);
    CHECK(((volatile unsigned char *)(uintptr_t)p)[100] == 0, "the async memset ran at once");
    CU(cuStreamSynchronize(st), CUDA_SUCCESS);
    CHECK(((volatile unsigned char *)(uintptr_t)p)[100] == 7, "the async memset did not run");
    float ms = -1;
    CU(cuEventElapsedTime(&ms, e0, e1), CUDA_SUCCESS);
    CHECK(ms >= 15 && ms < 10000, "elapsed %.1f ms for a 20 ms delayed memset", ms);
    CUdeviceptr q;
    CU(cuMemAllocAsync(&q, 4 * MiB, st), CUDA_SUCCESS);
    CU(cuMemsetD8Async(q, 3, 4 * MiB, st), CUDA_SUCCESS);
    CU(cuMemFreeAsync(q, st), CUDA_SUCCESS);
    CU(cuStreamSynchronize(st), CUDA_SUCCESS);
    CU(cuEventDestroy(e0), CUDA_SUCCESS);
    CU(cuEventDestroy(e1), CUDA_SUCCESS);
    CU(cuStreamDestroy(st), CUDA_SUCCESS);
    CU(cuMemFree(p), CUDA_SUCCESS);
}

/* A child that hammers the state lock (every call below takes it) until
 * it is ended at a random point, possibly while holding it. */
static int hammer(void)
{
    setup();
    printf("hammering\n");
    fflush(stdout);
    for (;;) {
        CUdeviceptr p;
        size_t fr, total;
        if (cuMemAlloc(&p, 4 << 20) == CUDA_SUCCESS) cuMemFree(p);
        cuMemGetInfo(&fr, &total);
    }
    return 0;
}

/* Starts this program with arg, its stdout a pipe; waits until its output
 * holds want. */
static int start_child(const wchar_t *arg, const char *want, PROCESS_INFORMATION *pi)
{
    HANDLE rd, wr;
    SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
    if (!CreatePipe(&rd, &wr, &sa, 0)) return -1;
    SetHandleInformation(rd, HANDLE_FLAG_INHERIT, 0);
    wchar_t exe[MAX_PATH], cmd[MAX_PATH + 32];
    GetModuleFileNameW(NULL, exe, MAX_PATH);
    swprintf(cmd, sizeof cmd / sizeof cmd[0], L"\"%ls\" %ls", exe, arg);
    STARTUPINFOW si;
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdOutput = wr;
    si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
    si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
    BOOL ok = CreateProcessW(exe, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, pi);
    CloseHandle(wr);
    /* the child's checks, then want (stdout is text mode: \r\n) */
    char out[8192] = {0};
    DWORD len = 0, got = 0;
    while (ok && !strstr(out, want) && len < sizeof out - 1 &&
           ReadFile(rd, out + len, (DWORD)(sizeof out - 1 - len), &got, NULL) && got > 0)
        len += got;
    CloseHandle(rd);
    return ok && strstr(out, want) ? 0 : -1;
}

/* The child: allocates, says so on stdout, then waits to be ended. */
static int hold(void)
{
    setup();
    CUdeviceptr p;
    if (cuMemAlloc(&p, GiB) != CUDA_SUCCESS) return 1;
    printf("holding\n");
    fflush(stdout);
    Sleep(INFINITE);
    return 0;
}

static size_t free_now(void)
{
    size_t fr = 0, total = 0;
    cuMemGetInfo(&fr, &total);
    return fr;
}

static void procs(void)
{
    setup();
    size_t fr0 = free_now();
    PROCESS_INFORMATION pi;
    int started = start_child(L"hold", "holding", &pi);
    CHECK(started == 0, "the child started and allocated (error %lu)", GetLastError());
    if (started != 0) return;
    CHECK(free_now() == fr0 - GiB, "the child's 1 GiB seen here: free %zu, was %zu", free_now(), fr0);
    TerminateProcess(pi.hProcess, 9);
    WaitForSingleObject(pi.hProcess, 20000);
    /* reclaimed at the next look at the card (a poll with a deadline) */
    size_t fr = 0;
    for (int i = 0; i < 200 && (fr = free_now()) != fr0; i++) Sleep(100);
    CHECK(fr == fr0, "the ended child's 1 GiB reclaimed: free %zu, want %zu", fr, fr0);
    CloseHandle(pi.hProcess);
    CloseHandle(pi.hThread);

    /* children ended at random points while hammering the lock: the
     * named mutex comes back abandoned, never blocking this process, and
     * whatever they held is reclaimed */
    int ended = 0;
    for (int round = 0; round < 8; round++) {
        if (start_child(L"hammer", "hammering", &pi) != 0) continue;
        Sleep(20 + (DWORD)(round * 37) % 90);
        TerminateProcess(pi.hProcess, 9);
        WaitForSingleObject(pi.hProcess, 20000);
        CloseHandle(pi.hProcess);
        CloseHandle(pi.hThread);
        ended++;
        CUdeviceptr p = 0;
        CU(cuMemAlloc(&p, 64 << 20), CUDA_SUCCESS);   /* the lock is not stuck */
        CU(cuMemFree(p), CUDA_SUCCESS);
    }
    CHECK(ended == 8, "%d of 8 hammering children started and were ended", ended);
    for (int i = 0; i < 200 && (fr = free_now()) != fr0; i++) Sleep(100);
    CHECK(fr == fr0, "after the hammering children: free %zu, want %zu", fr, fr0);
}

/* cuMemMap and cuMemAlloc while other threads of the process take and
 * give back address space (a program's heap, a ledger's file mapping, the
 * shim's own threads): every map lands where it was asked, every large
 * allocation on 2 MiB. The sim maps into a reservation by giving its piece
 * back and mapping the view there, and places an allocation by finding a
 * free aligned range and mapping there (os_windows.c); a range another
 * thread took in between made 4 % of the maps fail with
 * CUDA_ERROR_OUT_OF_MEMORY (measured under Wine 8 before the sim took its
 * ranges from the top of the address space). */
static volatile LONG race_stop;
static DWORD WINAPI race_taker(LPVOID arg)
{
    (void)arg;
    unsigned x = 12345;
    while (!race_stop) {
        x = x * 1103515245u + 12345u;
        SIZE_T n = (SIZE_T)(1 + (x >> 16) % 64) << 16;   /* 64 KiB .. 4 MiB */
        void *p = VirtualAlloc(NULL, n, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
        HANDLE s = CreateFileMappingA(INVALID_HANDLE_VALUE, NULL, PAGE_READWRITE, 0, 65536, NULL);
        void *v = s ? MapViewOfFile(s, FILE_MAP_ALL_ACCESS, 0, 0, 65536) : NULL;
        if (v) UnmapViewOfFile(v);
        if (s) CloseHandle(s);
        if (p) VirtualFree(p, 0, MEM_RELEASE);
    }
    return 0;
}

static void vmm_race(void)
{
    setup();
    CUmemAllocationProp pr = prop0();
    const size_t g = 2 * MiB, slots = 64;
    CUdeviceptr va = 0;
    CU(cuMemAddressReserve(&va, slots * g, 0, 0, 0), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, g, &pr, 0), CUDA_SUCCESS);
    HANDLE t[2];
    for (int i = 0; i < 2; i++) t[i] = CreateThread(NULL, 0, race_taker, NULL, 0, NULL);
    int failed = 0, unmapped_not = 0, allocs_failed = 0, misaligned = 0, rounds = 4000;
    CUresult first = CUDA_SUCCESS;
    for (int i = 0; i < rounds; i++) {
        CUdeviceptr at = va + (CUdeviceptr)((i * 7) % slots) * g;
        CUresult r = cuMemMap(at, g, 0, h, 0);
        if (r != CUDA_SUCCESS) {
            if (!failed++) first = r;
            continue;
        }
        if (cuMemUnmap(at, g) != CUDA_SUCCESS) unmapped_not++;
        /* and an allocation of 2 MiB or more starts on 2 MiB, as the driver's */
        CUdeviceptr p = 0;
        if (cuMemAlloc(&p, 4 * MiB) != CUDA_SUCCESS) {
            allocs_failed++;
            continue;
        }
        if (p % g) misaligned++;
        if (cuMemFree(p) != CUDA_SUCCESS) allocs_failed++;
    }
    race_stop = 1;
    WaitForMultipleObjects(2, t, TRUE, INFINITE);
    for (int i = 0; i < 2; i++) CloseHandle(t[i]);
    CHECK(failed == 0, "%d of %d maps failed (the first with %d) while another thread took address space", failed,
          rounds, (int)first);
    CHECK(unmapped_not == 0, "%d unmaps failed", unmapped_not);
    CHECK(allocs_failed == 0 && misaligned == 0, "%d allocations or frees failed, %d of %d not on 2 MiB",
          allocs_failed, misaligned, rounds);
    CU(cuMemRelease(h), CUDA_SUCCESS);
    CU(cuMemAddressFree(va, slots * g), CUDA_SUCCESS);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    if (strcmp(what, "hold") == 0) return hold();
    if (strcmp(what, "hammer") == 0) return hammer();
    if (strcmp(what, "basic") == 0) basic();
    else if (strcmp(what, "vmm") == 0) vmm();
    else if (strcmp(what, "vmm_race") == 0) vmm_race();
    else if (strcmp(what, "novmm") == 0) novmm();
    else if (strcmp(what, "ipc") == 0) ipc();
    else if (strcmp(what, "streams") == 0) streams();
    else if (strcmp(what, "procs") == 0) procs();
    else {
        fprintf(stderr, "usage: sim_win basic|vmm|vmm_race|novmm|ipc|streams|procs\n");
        return 2;
    }
    printf("%s: %d failed\n", what, failures);
    return failures;
}

/* The sim's OS services on Windows (os.h), tested under Wine 8.
 *
 * Device memory is pagefile-backed sections (CreateFileMapping), the card
 * state a file mapped with CreateFileMapping and locked by a named mutex
 * (WAIT_ABANDONED when its owner died: the robust lock), process identity
 * the pid plus its creation time (GetProcessTimes).
 *
 * VMM. The exact Windows tool for "reserve address space, then map
 * sections into parts of it" is placeholders (VirtualAlloc2 with
 * MEM_RESERVE_PLACEHOLDER, MapViewOfFile3 with MEM_REPLACE_PLACEHOLDER).
 * Wine 8 rejects MEM_RESERVE_PLACEHOLDER (ERROR_INVALID_PARAMETER,
 * measured), so this file approximates them: a reservation is one or more
 * plain MEM_RESERVE allocations; mapping into it releases the reserved
 * pieces the range touches, reserves again what lies outside the range, and
 * maps the section view at the address (MapViewOfFileEx); unmapping reserves
 * the hole again. Between the release and the map another thread of the
 * process that allocates could take the address: the map then fails with
 * CUDA_ERROR_OUT_OF_MEMORY rather than aliasing anything. Reservations
 * and aligned ranges are taken from the top of the address space, where
 * allocations placed bottom-up (Windows' default) do not come: 3 to 4.5 %
 * of maps failed beside two allocating threads before, none since
 * (tests/windows/sim, vmm_race; docs/windows.md). */
#include "os.h"
#include <windows.h>
#include <stdio.h>
#include <string.h>

/* A failure of this file's approximations, not the driver's behaviour: said
 * on stderr once per process and kind, so that a refusal it causes is not
 * taken for the card's. */
enum { NOTE_MAP, NOTE_RESERVE, NOTE_UNALIGNED, NOTE_KINDS };
static void os_note(int kind, const char *what)
{
    static volatile LONG said[NOTE_KINDS];
    if (!InterlockedExchange(&said[kind], 1))
        fprintf(stderr, "vramshim: sim: %s (Windows without placeholders, docs/windows.md; said once per process)\n",
                what);
}

/* ---- processes ---- */
int32_t sim_os_pid(void) { return (int32_t)GetCurrentProcessId(); }

static uint64_t filetime_u64(FILETIME t) { return ((uint64_t)t.dwHighDateTime << 32) | t.dwLowDateTime; }

uint64_t sim_os_proc_start(int32_t pid)
{
    HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h) return 0;
    FILETIME c, e, k, u;
    uint64_t v = GetProcessTimes(h, &c, &e, &k, &u) ? filetime_u64(c) : 0;
    CloseHandle(h);
    return v;
}

/* Gone (no such process), exited (still referenced by a handle: its
 * memory is the driver's again), or another process under the same pid. */
int sim_os_proc_dead(int32_t pid, uint64_t start)
{
    if (pid <= 0) return 0;
    HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!h) return GetLastError() == ERROR_INVALID_PARAMETER;   /* no such pid */
    DWORD code = 0;
    FILETIME c, e, k, u;
    int dead = GetExitCodeProcess(h, &code) && code != STILL_ACTIVE;
    if (!dead && start && GetProcessTimes(h, &c, &e, &k, &u) && filetime_u64(c) != start) dead = 1;
    CloseHandle(h);
    return dead;
}

void sim_os_sleep_us(uint64_t us)
{
    uint64_t ms = (us + 999) / 1000;
    while (ms > 0) {
        DWORD step = ms > 0x7fffffff ? 0x7fffffff : (DWORD)ms;
        Sleep(step);
        ms -= step;
    }
}

void sim_os_process_setup(void) {}   /* sections are handles: no descriptor limit to raise */

void sim_os_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    (void)prepare, (void)parent, (void)child;   /* no fork on Windows */
}

void sim_os_default_state_path(char *buf, size_t n)
{
    char tmp[MAX_PATH + 1];
    DWORD l = GetTempPathA(sizeof tmp, tmp);
    if (l == 0 || l >= sizeof tmp) snprintf(tmp, sizeof tmp, ".\\");
    snprintf(buf, n, "%svramsim.state", tmp);
}

/* ---- the card state ---- */
static HANDLE create_mutex, state_mutex;

/* Mutex names from the state file's full path (FNV-1a, case-folded: the
 * same file under two spellings is one card state). */
static void mutex_name(char *out, size_t n, const char *what, const char *path)
{
    char full[MAX_PATH * 2];
    DWORD l = GetFullPathNameA(path, sizeof full, full, NULL);
    const char *p = l > 0 && l < sizeof full ? full : path;
    uint64_t h = 1469598103934665603ull;
    for (; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
        if (c == '/') c = '\\';
        h = (h ^ c) * 1099511628211ull;
    }
    snprintf(out, n, "Local\\vramsim-%s-%016llx", what, (unsigned long long)h);
}

void *sim_os_state_map(const char *path, size_t size)
{
    char name[96];
    mutex_name(name, sizeof name, "create", path);
    HANDLE cm = CreateMutexA(NULL, FALSE, name);
    mutex_name(name, sizeof name, "lock", path);
    HANDLE lm = CreateMutexA(NULL, FALSE, name);
    if (!cm || !lm) {
        fprintf(stderr, "vramshim: sim: cannot create the state mutexes for %s (error %lu)\n", path,
                (unsigned long)GetLastError());
        if (cm) CloseHandle(cm);
        if (lm) CloseHandle(lm);
        return NULL;
    }
    WaitForSingleObject(cm, INFINITE);   /* abandoned or not: we own it now */
    /* FILE_FLAG_OPEN_REPARSE_POINT: a symbolic link is opened as itself,
     * never followed. The file inherits the folder's ACL (the user's own
     * %TEMP% by default). */
    HANDLE f = CreateFileA(path, GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           NULL, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT, NULL);
    void *m = NULL;
    if (f == INVALID_HANDLE_VALUE) {
        fprintf(stderr, "vramshim: sim: cannot open state file %s (error %lu)\n", path,
                (unsigned long)GetLastError());
    } else {
        HANDLE s = CreateFileMappingA(f, NULL, PAGE_READWRITE, (DWORD)((uint64_t)size >> 32), (DWORD)size, NULL);
        if (s) {
            m = MapViewOfFile(s, FILE_MAP_ALL_ACCESS, 0, 0, size);
            CloseHandle(s);   /* the view keeps the section */
        }
        CloseHandle(f);
    }
    if (!m) {
        ReleaseMutex(cm);
        CloseHandle(cm);
        CloseHandle(lm);
        return NULL;
    }
    create_mutex = cm;
    state_mutex = lm;
    return m;
}

void sim_os_state_ready(void)
{
    ReleaseMutex(create_mutex);
    CloseHandle(create_mutex);
    create_mutex = NULL;
}

void sim_os_lock_init(void *lock) { (void)lock; }   /* the named mutex is the lock */

int sim_os_lock(void *lock)
{
    (void)lock;
    return WaitForSingleObject(state_mutex, INFINITE) == WAIT_ABANDONED;
}

void sim_os_unlock(void *lock)
{
    (void)lock;
    ReleaseMutex(state_mutex);
}

/* ---- memory objects ---- */
int sim_os_obj_create(size_t len, const char *name, sim_os_obj *out)
{
    (void)name;   /* sections stay anonymous: nothing opens them by name */
    HANDLE s = CreateFileMappingA(INVALID_HANDLE_VALUE, NULL, PAGE_READWRITE | SEC_COMMIT,
                                  (DWORD)((uint64_t)len >> 32), (DWORD)len, NULL);
    if (!s) {
        DWORD e = GetLastError();
        return e == ERROR_NOT_ENOUGH_MEMORY || e == ERROR_COMMITMENT_LIMIT || e == ERROR_OUTOFMEMORY ||
                       e == ERROR_NO_SYSTEM_RESOURCES
                   ? -1
                   : -2;
    }
    *out = (sim_os_obj)s;
    return 0;
}

void sim_os_obj_close(sim_os_obj o)
{
    if (o != SIM_OS_NO_OBJ) CloseHandle((HANDLE)o);
}

/* An address aligned to align with size bytes free after it a moment ago
 * (a range found, given back, its aligned part named), or 0. Another thread
 * may take it in between: callers try again. */
static uintptr_t free_aligned(size_t size, size_t align)
{
    if (size + align < size) return 0;
    void *big = VirtualAlloc(NULL, size + align, MEM_RESERVE | MEM_TOP_DOWN, PAGE_NOACCESS);
    if (!big) return 0;
    VirtualFree(big, 0, MEM_RELEASE);
    return (((uintptr_t)big + align - 1) / align) * align;
}

void *sim_os_obj_map(sim_os_obj o, size_t len, size_t align)
{
    /* Views start on 64 KiB; for more, a free aligned range. */
    for (int tries = 0; align > 65536 && tries < 16; tries++) {
        uintptr_t a = free_aligned(len, align);
        if (!a) break;
        void *v = MapViewOfFileEx((HANDLE)o, FILE_MAP_ALL_ACCESS, 0, 0, len, (void *)a);
        if (v) return v;
    }
    if (align > 65536)
        os_note(NOTE_UNALIGNED, "an allocation's aligned range was taken 16 times in a row; it starts on 64 KiB only");
    return MapViewOfFile((HANDLE)o, FILE_MAP_ALL_ACCESS, 0, 0, len);
}

void sim_os_obj_unmap(void *addr, size_t len)
{
    (void)len;
    UnmapViewOfFile(addr);
}

void *sim_os_anon_alloc(size_t len) { return VirtualAlloc(NULL, len, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE); }

void sim_os_anon_free(void *addr, size_t len)
{
    (void)len;
    VirtualFree(addr, 0, MEM_RELEASE);
}

/* ---- address space for VMM (the approximation at the top) ---- */
static int reserve_at(uintptr_t a, size_t size)
{
    return VirtualAlloc((void *)a, size, MEM_RESERVE, PAGE_NOACCESS) == (void *)a;
}

void *sim_os_reserve(uintptr_t hint, size_t size, size_t align)
{
    if (hint && hint % align == 0 && reserve_at(hint, size)) return (void *)hint;
    for (int tries = 0; tries < 16; tries++) {
        uintptr_t a = free_aligned(size, align);
        if (!a) return NULL;
        if (reserve_at(a, size)) return (void *)a;
    }
    os_note(NOTE_RESERVE, "cuMemAddressReserve: a free aligned range was taken 16 times in a row; answering "
                          "CUDA_ERROR_OUT_OF_MEMORY");
    return NULL;
}

/* Releases every reserved piece inside [lo, hi), reserving again the parts
 * of a piece that lie outside it; -1 when something other than reserved or
 * free address space is there. */
static int unreserve(uintptr_t lo, uintptr_t hi, int keep_outside)
{
    for (uintptr_t p = lo; p < hi;) {
        MEMORY_BASIC_INFORMATION mi;
        if (VirtualQuery((void *)p, &mi, sizeof mi) != sizeof mi) return -1;
        /* a reserve-only allocation is one region: [AllocationBase, e) */
        uintptr_t b = (uintptr_t)mi.AllocationBase, e = (uintptr_t)mi.BaseAddress + mi.RegionSize;
        if (mi.State == MEM_FREE) {
            p = e;
            continue;
        }
        if (mi.State != MEM_RESERVE || mi.Type != MEM_PRIVATE) return -1;
        VirtualFree((void *)b, 0, MEM_RELEASE);
        if (keep_outside && b < lo) reserve_at(b, lo - b);
        if (keep_outside && e > hi) reserve_at(hi, e - hi);
        p = e;
    }
    return 0;
}

void sim_os_release(void *addr, size_t size) { unreserve((uintptr_t)addr, (uintptr_t)addr + size, 1); }

int sim_os_map_fixed(void *addr, size_t size, sim_os_obj o, size_t off)
{
    uintptr_t a = (uintptr_t)addr;
    if (unreserve(a, a + size, 1) != 0) return -1;
    void *v = MapViewOfFileEx((HANDLE)o, FILE_MAP_ALL_ACCESS, (DWORD)((uint64_t)off >> 32), (DWORD)off, size, addr);
    DWORD old;
    if (v == addr && VirtualProtect(addr, size, PAGE_NOACCESS, &old)) return 0;
    if (v) UnmapViewOfFile(v);
    reserve_at(a, size);
    os_note(NOTE_MAP, "cuMemMap: the address was taken by another allocation of this process between the sim's "
                      "release and its mapping; answering CUDA_ERROR_OUT_OF_MEMORY");
    return -1;
}

void sim_os_unmap_fixed(void *addr, size_t size)
{
    UnmapViewOfFile(addr);
    reserve_at((uintptr_t)addr, size);
}

int sim_os_protect(void *addr, size_t size, int access)
{
    DWORD prot = access == 3 ? PAGE_READWRITE : access == 1 ? PAGE_READONLY : PAGE_NOACCESS, old;
    return VirtualProtect(addr, size, prot, &old) ? 0 : -1;
}

/* ---- sharing memory between processes ----
 * A Windows driver in WDDM mode (every consumer card) answers cuIpc*
 * memory handles with CUDA_ERROR_NOT_SUPPORTED; POSIX descriptors are not
 * a Windows handle type at all. */
int sim_os_ipc_supported(void) { return 0; }

int sim_os_ipc_map(int32_t pid, int32_t obj, uint64_t id, size_t len, void **addr)
{
    (void)pid, (void)obj, (void)id, (void)len, (void)addr;
    return -1;
}

int sim_os_posix_fd_handles(void) { return 0; }

int sim_os_obj_export_fd(sim_os_obj o)
{
    (void)o;
    return -1;
}

int sim_os_obj_import_fd(int fd, sim_os_obj *out, size_t *size, int *card)
{
    (void)fd, (void)out, (void)size, (void)card;
    return -1;
}

/* POSIX file descriptor handles do not exist here (sim_os_posix_fd_handles). */
int sim_os_pool_fd_create(int32_t pid, uint64_t id, int card)
{
    (void)pid, (void)id, (void)card;
    return -1;
}

int sim_os_pool_fd_read(int fd, int32_t *pid, uint64_t *id, int *card)
{
    (void)fd, (void)pid, (void)id, (void)card;
    return -1;
}

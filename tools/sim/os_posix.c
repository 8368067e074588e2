/* The sim's OS services on Linux (os.h): memfds, mmap, /proc, a robust
 * process-shared pthread mutex and flock for the card state. */
#include "os.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(pthread_mutex_t) <= SIM_OS_LOCK_BYTES, "the state lock fits its bytes");

/* ---- processes ---- */
int32_t sim_os_pid(void) { return (int32_t)getpid(); }

/* Start time (field 22 of /proc/<pid>/stat) and state letter (field 3);
 * 0 when the process cannot be read. */
static uint64_t proc_stat(pid_t pid, char *state)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    /* the command name (field 2) may hold spaces and parentheses */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2]) return 0;
    if (state) *state = p[2];
    unsigned long long v = 0;
    int field = 2;
    for (p++; *p && field < 22; p++)
        if (*p == ' ') field++;
    if (sscanf(p, "%llu", &v) != 1) return 0;
    return v;
}

uint64_t sim_os_proc_start(int32_t pid) { return proc_stat(pid, NULL); }

/* Gone, a zombie (its memory is the driver's again once it has exited, reaped
 * or not), or a different process under a recycled pid. */
int sim_os_proc_dead(int32_t pid, uint64_t start)
{
    if (pid <= 0) return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    char state = 0;
    uint64_t st = proc_stat(pid, &state);
    if (state == 'Z' || state == 'X') return 1;
    return st != 0 && start != 0 && st != start;
}

void sim_os_sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* One memfd per allocation: make room for many. */
void sim_os_process_setup(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

void sim_os_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    pthread_atfork(prepare, parent, child);
}

void sim_os_default_state_path(char *buf, size_t n)
{
    snprintf(buf, n, "/dev/shm/vramsim-%u.state", (unsigned)getuid());
}

/* ---- the card state ---- */
static int state_fd = -1;

void *sim_os_state_map(const char *path, size_t size)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        fprintf(stderr, "vramshim: sim: cannot open state file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    /* flock serialises creation and formatting among processes. */
    flock(fd, LOCK_EX);
    struct stat st;
    if (fstat(fd, &st) != 0 || ((size_t)st.st_size < size && ftruncate(fd, (off_t)size) != 0)) {
        flock(fd, LOCK_UN);
        close(fd);
        return NULL;
    }
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        flock(fd, LOCK_UN);
        close(fd);
        return NULL;
    }
    state_fd = fd;
    return m;
}

void sim_os_state_ready(void)
{
    flock(state_fd, LOCK_UN);
    close(state_fd);
    state_fd = -1;
}

void sim_os_lock_init(void *lock)
{
    pthread_mutexattr_t at;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init((pthread_mutex_t *)lock, &at);
    pthread_mutexattr_destroy(&at);
}

int sim_os_lock(void *lock)
{
    pthread_mutex_t *m = lock;
    if (pthread_mutex_lock(m) == EOWNERDEAD) {
        pthread_mutex_consistent(m);
        return 1;
    }
    return 0;
}

void sim_os_unlock(void *lock) { pthread_mutex_unlock((pthread_mutex_t *)lock); }

/* ---- memory objects ---- */
int sim_os_obj_create(size_t len, const char *name, sim_os_obj *out)
{
    int f = memfd_create(name, MFD_CLOEXEC);
    if (f < 0) return errno == EMFILE || errno == ENFILE ? -1 : -2;
    if (ftruncate(f, (off_t)len) != 0) {
        close(f);
        return -1;
    }
    *out = f;
    return 0;
}

void sim_os_obj_close(sim_os_obj o)
{
    if (o >= 0) close((int)o);
}

void *sim_os_obj_map(sim_os_obj o, size_t len, size_t align)
{
    int prot = PROT_READ | PROT_WRITE, mf = MAP_SHARED | MAP_NORESERVE;
    if (align <= 4096) {
        void *m = mmap(NULL, len, prot, mf, (int)o, 0);
        return m == MAP_FAILED ? NULL : m;
    }
    void *at = sim_os_reserve(0, len, align);   /* an aligned range, then the object over it */
    if (!at) return NULL;
    void *m = mmap(at, len, prot, mf | MAP_FIXED, (int)o, 0);
    if (m == MAP_FAILED) {
        munmap(at, len);
        return NULL;
    }
    return m;
}

void sim_os_obj_unmap(void *addr, size_t len) { munmap(addr, len); }

void *sim_os_anon_alloc(size_t len)
{
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

void sim_os_anon_free(void *addr, size_t len) { munmap(addr, len); }

/* ---- address space for VMM ---- */
void *sim_os_reserve(uintptr_t hint, size_t size, size_t align)
{
    void *m = MAP_FAILED;
    int prot = PROT_NONE, mf = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (hint && hint % align == 0)   /* a hint, as for the driver */
        m = mmap((void *)hint, size, prot, mf | MAP_FIXED_NOREPLACE, -1, 0);
    if (m != MAP_FAILED) return m;
    if (size + align < size) return NULL;
    void *big = mmap(NULL, size + align, prot, mf, -1, 0);
    if (big == MAP_FAILED) return NULL;
    uintptr_t b = (uintptr_t)big, a = ((b + align - 1) / align) * align;
    if (a > b) munmap(big, a - b);
    if (b + size + align > a + size) munmap((void *)(a + size), b + size + align - (a + size));
    return (void *)a;
}

void sim_os_release(void *addr, size_t size) { munmap(addr, size); }

int sim_os_map_fixed(void *addr, size_t size, sim_os_obj o, size_t off)
{
    return mmap(addr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, (int)o, (off_t)off) == MAP_FAILED ? -1 : 0;
}

void sim_os_unmap_fixed(void *addr, size_t size)
{
    mmap(addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

int sim_os_protect(void *addr, size_t size, int access)
{
    int prot = access == 3 ? PROT_READ | PROT_WRITE : access == 1 ? PROT_READ : PROT_NONE;
    return mprotect(addr, size, prot);
}

/* ---- sharing memory between processes ---- */
int sim_os_ipc_supported(void) { return 1; }

/* /proc/<pid>/fd/<fd> (same user), after checking that the descriptor still
 * names that very buffer (memfd name "vramsim-<pid>-<id>."). */
int sim_os_ipc_map(int32_t pid, int32_t obj, uint64_t id, size_t len, void **addr)
{
    char path[64], link[256], want[96];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, (int)obj);
    ssize_t ln = readlink(path, link, sizeof link - 1);
    snprintf(want, sizeof want, "/memfd:vramsim-%d-%llu.", (int)pid, (unsigned long long)id);
    if (ln <= 0) return -1;
    link[ln] = 0;
    if (strncmp(link, want, strlen(want)) != 0) return -1;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return -1;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return -2;
    *addr = m;
    return 0;
}

int sim_os_posix_fd_handles(void) { return 1; }

int sim_os_obj_export_fd(sim_os_obj o) { return fcntl((int)o, F_DUPFD_CLOEXEC, 0); }

int sim_os_obj_import_fd(int in, sim_os_obj *out, size_t *size, int *card)
{
    char path[64], link[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", in);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) return -1;
    link[n] = 0;
    int pid;
    unsigned long long id;
    struct stat st;
    /* only memory of the sim: a memfd it named */
    if (sscanf(link, "/memfd:vramsim-%d-%llu.%d", &pid, &id, card) != 3 ||
        fstat(in, &st) != 0 || st.st_size <= 0)
        return -1;
    int fd = fcntl(in, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return -2;
    *size = (size_t)st.st_size;
    *out = fd;
    return 0;
}

int sim_os_pool_fd_create(int32_t pid, uint64_t id, int card)
{
    char name[96];
    snprintf(name, sizeof name, "vramsim-pool-%d-%llu.%d", (int)pid, (unsigned long long)id, card);
    return memfd_create(name, MFD_CLOEXEC);
}

int sim_os_pool_fd_read(int in, int32_t *pid, uint64_t *id, int *card)
{
    char path[64], link[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", in);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) return -1;
    link[n] = 0;
    int p;
    unsigned long long i;
    if (sscanf(link, "/memfd:vramsim-pool-%d-%llu.%d", &p, &i, card) != 3 || p <= 0) return -1;
    *pid = p;
    *id = i;
    return 0;
}

/* Card usage shared by every process naming the same state file.
 *
 * The file holds the card capacities and one slot per live process with the
 * bytes it has charged on each card. A card's usage is the sum over slots,
 * so a process that dies at any point leaves at most its own slot behind,
 * and reclaim() zeroes slots whose process is gone (checked with kill(pid,0)
 * and the process start time, so a recycled pid is not mistaken for the
 * owner). The mutex is robust and process-shared: a process killed while
 * holding it hands it to the next locker as EOWNERDEAD; slot updates are
 * single stores, so the state is consistent at every instruction. */
#include "sim_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_MAGIC 0x76726d73696d3031ull   /* "vrmsim01" */
#define STATE_VERSION 1u
#define MAX_SLOTS 512

struct slot {
    int32_t pid;
    uint32_t pad;
    uint64_t start;                 /* /proc/<pid>/stat starttime */
    uint64_t used[SIM_MAX_CARDS];
};

struct shared {
    uint64_t magic;
    uint32_t version;
    uint32_t ncards;
    uint64_t capacity[SIM_MAX_CARDS];
    pthread_mutex_t lock;
    struct slot slots[MAX_SLOTS];
};

static struct shared *sh;
static int my_slot = -1;

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

static uint64_t proc_start_time(pid_t pid) { return proc_stat(pid, NULL); }

/* Gone, a zombie (its memory is the driver's again once it has exited, reaped
 * or not), or a different process under a recycled pid. */
static int slot_dead(const struct slot *s)
{
    if (s->pid <= 0) return 0;
    if (kill(s->pid, 0) != 0 && errno == ESRCH) return 1;
    char state = 0;
    uint64_t st = proc_stat(s->pid, &state);
    if (state == 'Z' || state == 'X') return 1;
    return st != 0 && s->start != 0 && st != s->start;
}

static void reclaim(void)
{
    for (int i = 0; i < MAX_SLOTS; i++) {
        struct slot *s = &sh->slots[i];
        if (i != my_slot && slot_dead(s)) {
            memset(s->used, 0, sizeof s->used);
            s->start = 0;
            __atomic_store_n(&s->pid, 0, __ATOMIC_RELEASE);
        }
    }
}

static void lock_state(void)
{
    int rc = pthread_mutex_lock(&sh->lock);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&sh->lock);
        reclaim();
    }
}

static int any_live_slot(void)
{
    for (int i = 0; i < MAX_SLOTS; i++)
        if (sh->slots[i].pid > 0 && !slot_dead(&sh->slots[i])) return 1;
    return 0;
}

static void format_state(const struct sim_config *want)
{
    memset(sh, 0, sizeof *sh);
    pthread_mutexattr_t at;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&sh->lock, &at);
    pthread_mutexattr_destroy(&at);
    sh->ncards = (uint32_t)want->ncards;
    memcpy(sh->capacity, want->capacity, sizeof sh->capacity);
    sh->version = STATE_VERSION;
    __atomic_store_n(&sh->magic, STATE_MAGIC, __ATOMIC_RELEASE);
}

CUresult sim_state_open(const char *path, const struct sim_config *want, struct sim_config *got)
{
    if (!sh) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
            fprintf(stderr, "vramshim: sim: cannot open state file %s: %s\n", path, strerror(errno));
            return CUDA_ERROR_OPERATING_SYSTEM;
        }
        /* flock serialises creation and formatting among processes. */
        flock(fd, LOCK_EX);
        struct stat st;
        if (fstat(fd, &st) != 0 || ((size_t)st.st_size < sizeof *sh && ftruncate(fd, sizeof *sh) != 0)) {
            flock(fd, LOCK_UN);
            close(fd);
            return CUDA_ERROR_OPERATING_SYSTEM;
        }
        void *m = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            flock(fd, LOCK_UN);
            close(fd);
            return CUDA_ERROR_OPERATING_SYSTEM;
        }
        sh = m;
        int same = sh->ncards == (uint32_t)want->ncards &&
                   memcmp(sh->capacity, want->capacity, sizeof sh->capacity) == 0;
        if (sh->magic != STATE_MAGIC || sh->version != STATE_VERSION || (!same && !any_live_slot()))
            format_state(want);
        else if (!same)
            fprintf(stderr, "vramshim: sim: %s already describes %u card(s) used by live "
                            "processes; VRAMSIM_CARDS ignored\n", path, sh->ncards);
        flock(fd, LOCK_UN);
        close(fd);
    }
    got->ncards = (int)sh->ncards;
    memcpy(got->capacity, sh->capacity, sizeof got->capacity);
    if (my_slot >= 0) return CUDA_SUCCESS;
    lock_state();
    reclaim();
    for (int i = 0; i < MAX_SLOTS; i++) {
        if (sh->slots[i].pid == 0) {
            memset(sh->slots[i].used, 0, sizeof sh->slots[i].used);
            sh->slots[i].start = proc_start_time(getpid());
            __atomic_store_n(&sh->slots[i].pid, (int32_t)getpid(), __ATOMIC_RELEASE);
            my_slot = i;
            break;
        }
    }
    pthread_mutex_unlock(&sh->lock);
    if (my_slot < 0) {
        fprintf(stderr, "vramshim: sim: more than %d processes share %s\n", MAX_SLOTS, path);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    return CUDA_SUCCESS;
}

static uint64_t used_locked(int card)
{
    uint64_t u = 0;
    for (int i = 0; i < MAX_SLOTS; i++)
        if (sh->slots[i].pid > 0) u += sh->slots[i].used[card];
    return u;
}

CUresult sim_charge(int card, uint64_t bytes)
{
    if (!sh || my_slot < 0 || card < 0 || card >= (int)sh->ncards) return CUDA_ERROR_INVALID_DEVICE;
    lock_state();
    uint64_t cap = sh->capacity[card];
    uint64_t u = used_locked(card);
    if (u + bytes > cap || bytes > cap) {
        reclaim();   /* only on the slow path: it costs a syscall per process */
        u = used_locked(card);
    }
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (bytes <= cap && u + bytes <= cap) {
        sh->slots[my_slot].used[card] += bytes;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sh->lock);
    return r;
}

void sim_uncharge(int card, uint64_t bytes)
{
    if (!sh || my_slot < 0 || card < 0 || card >= (int)sh->ncards) return;
    lock_state();
    uint64_t *u = &sh->slots[my_slot].used[card];
    *u = *u >= bytes ? *u - bytes : 0;
    pthread_mutex_unlock(&sh->lock);
}

uint64_t sim_state_used(int card)
{
    if (!sh || card < 0 || card >= (int)sh->ncards) return 0;
    lock_state();
    reclaim();
    uint64_t u = used_locked(card);
    pthread_mutex_unlock(&sh->lock);
    return u;
}

/* The parent's slot and charges stay the parent's; the child takes its own
 * slot at its next cuInit. The mapping itself is inherited and still valid. */
void sim_state_after_fork_child(void) { my_slot = -1; }

/* Card usage shared by every process naming the same state file.
 *
 * The file holds the card capacities and one slot per live process with the
 * bytes it has charged on each card. A card's usage is the sum over slots,
 * so a process that dies at any point leaves at most its own slot behind,
 * and reclaim() zeroes slots whose process is gone (sim_os_proc_dead: the
 * pid and the process's start time, so a recycled pid is not mistaken for
 * the owner). The lock is robust and shared between processes (os.h: a
 * robust pthread mutex in the file, a named mutex on Windows): a process
 * killed while holding it hands it to the next locker, which reclaims;
 * slot updates are single stores, so the state is consistent at every
 * instruction. */
#include "sim_internal.h"
#include "os.h"
#include <stdio.h>
#include <string.h>

#define STATE_MAGIC 0x76726d73696d3031ull   /* "vrmsim01" */
#define STATE_VERSION 3u                    /* 2: the lock is os.h's; 3: contexts per slot */
#define MAX_SLOTS 512

struct slot {
    int32_t pid;
    uint32_t pad;
    uint64_t start;                 /* sim_os_proc_start: /proc/<pid>/stat starttime, Windows creation time */
    uint64_t used[SIM_MAX_CARDS];   /* allocations and context overhead */
    uint32_t contexts[SIM_MAX_CARDS];   /* live contexts: NVML lists the process while > 0 */
};

struct shared {
    uint64_t magic;
    uint32_t version;
    uint32_t ncards;
    uint64_t capacity[SIM_MAX_CARDS];
    _Alignas(16) unsigned char lock[SIM_OS_LOCK_BYTES];
    struct slot slots[MAX_SLOTS];
};

static struct shared *sh;
static int my_slot = -1;

static int slot_dead(const struct slot *s) { return sim_os_proc_dead(s->pid, s->start); }

static void reclaim(void)
{
    for (int i = 0; i < MAX_SLOTS; i++) {
        struct slot *s = &sh->slots[i];
        if (i != my_slot && slot_dead(s)) {
            memset(s->used, 0, sizeof s->used);
            memset(s->contexts, 0, sizeof s->contexts);
            s->start = 0;
            __atomic_store_n(&s->pid, 0, __ATOMIC_RELEASE);
        }
    }
}

static void lock_state(void)
{
    if (sim_os_lock(sh->lock)) reclaim();   /* the previous owner died holding it */
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
    sim_os_lock_init(sh->lock);
    sh->ncards = (uint32_t)want->ncards;
    memcpy(sh->capacity, want->capacity, sizeof sh->capacity);
    sh->version = STATE_VERSION;
    __atomic_store_n(&sh->magic, STATE_MAGIC, __ATOMIC_RELEASE);
}

CUresult sim_state_open(const char *path, const struct sim_config *want, struct sim_config *got)
{
    if (!sh) {
        /* returns with the creation lock held: formatting is serialised */
        void *m = sim_os_state_map(path, sizeof *sh);
        if (!m) return CUDA_ERROR_OPERATING_SYSTEM;
        sh = m;
        int same = sh->ncards == (uint32_t)want->ncards &&
                   memcmp(sh->capacity, want->capacity, sizeof sh->capacity) == 0;
        if (sh->magic != STATE_MAGIC || sh->version != STATE_VERSION || (!same && !any_live_slot()))
            format_state(want);
        else if (!same)
            fprintf(stderr, "vramshim: sim: %s already describes %u card(s) used by live "
                            "processes; VRAMSIM_CARDS ignored\n", path, sh->ncards);
        sim_os_state_ready();
    }
    got->ncards = (int)sh->ncards;
    memcpy(got->capacity, sh->capacity, sizeof got->capacity);
    if (my_slot >= 0) return CUDA_SUCCESS;
    lock_state();
    reclaim();
    for (int i = 0; i < MAX_SLOTS; i++) {
        if (sh->slots[i].pid == 0) {
            memset(sh->slots[i].used, 0, sizeof sh->slots[i].used);
            memset(sh->slots[i].contexts, 0, sizeof sh->slots[i].contexts);
            sh->slots[i].start = sim_os_proc_start(sim_os_pid());
            __atomic_store_n(&sh->slots[i].pid, sim_os_pid(), __ATOMIC_RELEASE);
            my_slot = i;
            break;
        }
    }
    sim_os_unlock(sh->lock);
    if (my_slot < 0) {
        fprintf(stderr, "vramshim: sim: more than %d processes share %s\n", MAX_SLOTS, path);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    return CUDA_SUCCESS;
}

/* The state file's card of an ordinal this process sees; -1 if none. */
static int phys_of(int card)
{
    if (!sh || card < 0 || card >= sim_cfg.ncards) return -1;
    int p = sim_cfg.phys[card];
    return p >= 0 && p < (int)sh->ncards ? p : -1;
}

static uint64_t used_locked(int card)
{
    uint64_t u = 0;
    for (int i = 0; i < MAX_SLOTS; i++)
        if (sh->slots[i].pid > 0) u += sh->slots[i].used[card];
    return u;
}

/* With the lock held: n more bytes on physical card for this process, or OOM. */
static CUresult charge_locked(int card, uint64_t bytes)
{
    uint64_t cap = sh->capacity[card];
    uint64_t u = used_locked(card);
    if (u + bytes > cap || bytes > cap) {
        reclaim();   /* only on the slow path: it costs a syscall per process */
        u = used_locked(card);
    }
    if (bytes > cap || u + bytes > cap) return CUDA_ERROR_OUT_OF_MEMORY;
    sh->slots[my_slot].used[card] += bytes;
    return CUDA_SUCCESS;
}

CUresult sim_charge(int ordinal, uint64_t bytes)
{
    int card = phys_of(ordinal);
    if (my_slot < 0 || card < 0) return CUDA_ERROR_INVALID_DEVICE;
    lock_state();
    CUresult r = charge_locked(card, bytes);
    sim_os_unlock(sh->lock);
    return r;
}

/* A context begins on the card of this ordinal: its overhead is taken like
 * an allocation (a full card refuses the context, as a real one does), and
 * the process is one NVML lists on the card while it has a context there. */
CUresult sim_state_ctx_begin(int ordinal, uint64_t overhead)
{
    int card = phys_of(ordinal);
    if (my_slot < 0 || card < 0) return CUDA_ERROR_INVALID_DEVICE;
    lock_state();
    CUresult r = charge_locked(card, overhead);
    if (r == CUDA_SUCCESS) sh->slots[my_slot].contexts[card]++;
    sim_os_unlock(sh->lock);
    return r;
}

void sim_state_ctx_end(int ordinal, uint64_t overhead)
{
    int card = phys_of(ordinal);
    if (my_slot < 0 || card < 0) return;
    lock_state();
    struct slot *s = &sh->slots[my_slot];
    s->used[card] = s->used[card] >= overhead ? s->used[card] - overhead : 0;
    if (s->contexts[card]) s->contexts[card]--;
    sim_os_unlock(sh->lock);
}

/* card: a physical index (NVML's numbering), not an ordinal. */
unsigned sim_state_processes(int card, int32_t *pids, uint64_t *used, unsigned max)
{
    if (!sh || card < 0 || card >= (int)sh->ncards) return 0;
    unsigned n = 0;
    lock_state();
    reclaim();
    for (int i = 0; i < MAX_SLOTS; i++) {
        const struct slot *s = &sh->slots[i];
        if (s->pid <= 0 || s->contexts[card] == 0) continue;
        if (n < max) {
            pids[n] = s->pid;
            used[n] = s->used[card];
        }
        n++;
    }
    sim_os_unlock(sh->lock);
    return n;
}

void sim_uncharge(int ordinal, uint64_t bytes)
{
    int card = phys_of(ordinal);
    if (my_slot < 0 || card < 0) return;
    lock_state();
    uint64_t *u = &sh->slots[my_slot].used[card];
    *u = *u >= bytes ? *u - bytes : 0;
    sim_os_unlock(sh->lock);
}

uint64_t sim_state_used(int ordinal)
{
    int card = phys_of(ordinal);
    if (card < 0) return 0;
    lock_state();
    reclaim();
    uint64_t u = used_locked(card);
    sim_os_unlock(sh->lock);
    return u;
}

/* The parent's slot and charges stay the parent's; the child takes its own
 * slot at its next cuInit. The mapping itself is inherited and still valid. */
void sim_state_after_fork_child(void) { my_slot = -1; }

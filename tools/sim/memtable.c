/* The process's table of device memory records, sorted by base address so
 * an interior pointer finds its allocation by binary search; memfd backing;
 * per-process live counters. */
#include "sim_internal.h"
#include "os.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pthread_mutex_t sim_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_alloc **tab;
static size_t ntab, captab;
static _Atomic uint64_t next_id = 1;
static _Atomic int64_t live_bytes[SIM_MAX_CARDS], live_count[SIM_MAX_CARDS];

uint64_t sim_next_id(void) { return atomic_fetch_add(&next_id, 1); }

/* index of the last record with base <= p, or -1 */
static ssize_t floor_index(uintptr_t p)
{
    size_t lo = 0, hi = ntab;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tab[mid]->base <= p) lo = mid + 1;
        else hi = mid;
    }
    return (ssize_t)lo - 1;
}

void sim_mem_insert(struct sim_alloc *a)
{
    if (ntab == captab) {
        size_t nc = captab ? captab * 2 : 256;
        struct sim_alloc **nv = realloc(tab, nc * sizeof *nv);
        if (!nv) abort();   /* host out of memory: nothing sane to return */
        tab = nv;
        captab = nc;
    }
    size_t i = (size_t)(floor_index(a->base) + 1);
    memmove(&tab[i + 1], &tab[i], (ntab - i) * sizeof *tab);
    tab[i] = a;
    ntab++;
}

void sim_mem_remove(struct sim_alloc *a)
{
    ssize_t i = floor_index(a->base);
    /* equal bases cannot happen: mappings never overlap */
    if (i < 0 || tab[i] != a) return;
    memmove(&tab[i], &tab[i + 1], (ntab - (size_t)i - 1) * sizeof *tab);
    ntab--;
}

struct sim_alloc *sim_mem_find(uintptr_t p)
{
    ssize_t i = floor_index(p);
    if (i < 0) return NULL;
    struct sim_alloc *a = tab[i];
    size_t extent = a->size ? a->size : 1;
    if (a->kind == SIM_K_VA) extent = a->map_len;
    return p - a->base < extent ? a : NULL;
}

struct sim_alloc *sim_mem_find_base(uintptr_t p)
{
    ssize_t i = floor_index(p);
    return i >= 0 && tab[i]->base == p ? tab[i] : NULL;
}

struct sim_alloc *sim_mem_find_ipc(int32_t pid, uint64_t id)
{
    for (size_t i = 0; i < ntab; i++)
        if (tab[i]->kind == SIM_K_IPC && tab[i]->ipc_pid == pid && tab[i]->ipc_id == id) return tab[i];
    return NULL;
}

size_t sim_mem_collect_ctx(struct sim_ctx *ctx, struct sim_alloc ***out)
{
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc **v = malloc((ntab + 1) * sizeof *v);
    size_t n = 0, j = 0;
    for (size_t i = 0; v && i < ntab; i++) {
        struct sim_alloc *a = tab[i];
        /* cuda.h (cuCtxDestroy): stream-ordered blocks are no context's */
        if (a->ctx == ctx && a->kind != SIM_K_VA && a->kind != SIM_K_HOST && a->kind != SIM_K_POOL) v[n++] = a;
        else tab[j++] = a;
    }
    if (v) ntab = j;
    pthread_mutex_unlock(&sim_mem_lock);
    *out = v;
    return n;
}

CUresult sim_backing_create(size_t len, uint64_t id, int card, sim_os_obj *obj, void **addr)
{
    char name[64];
    snprintf(name, sizeof name, "vramsim-%d-%llu.%d", (int)sim_os_pid(), (unsigned long long)id, card);
    size_t l = SIM_ROUND_UP(len, SIM_PAGE);
    sim_os_obj o;
    int rc = sim_os_obj_create(l, name, &o);
    if (rc != 0) return rc == -1 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_OPERATING_SYSTEM;
    if (addr) {
        /* Large allocations on 2 MiB, as the real driver places them (its
         * big pages: every block of 16 MiB or more in ../shared/traces'
         * ctx128-forward lies on 2 MiB), and so that where a program's
         * memory lands does not depend on the host's mmap: an allocator
         * over the sim places slabs on 2 MiB in its chunks. */
        void *m = sim_os_obj_map(o, l, l >= SIM_BIG_PAGE ? SIM_BIG_PAGE : SIM_PAGE);
        if (!m) {
            sim_os_obj_close(o);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        *addr = m;
    }
    *obj = o;
    return CUDA_SUCCESS;
}

void sim_backing_destroy(sim_os_obj obj, void *addr, size_t len)
{
    if (addr) sim_os_obj_unmap(addr, SIM_ROUND_UP(len, SIM_PAGE));
    sim_os_obj_close(obj);
}

void sim_live_add(int card, int64_t bytes, int64_t count)
{
    if (card < 0 || card >= SIM_MAX_CARDS) return;
    atomic_fetch_add(&live_bytes[card], bytes);
    atomic_fetch_add(&live_count[card], count);
}

SIM_API uint64_t vramsim_live_bytes(int card)
{
    if (card < 0 || card >= SIM_MAX_CARDS) return 0;
    int64_t v = atomic_load(&live_bytes[card]);
    return v > 0 ? (uint64_t)v : 0;
}

SIM_API uint64_t vramsim_live_count(int card)
{
    if (card < 0 || card >= SIM_MAX_CARDS) return 0;
    int64_t v = atomic_load(&live_count[card]);
    return v > 0 ? (uint64_t)v : 0;
}

void sim_mem_after_fork_child(void)
{
    /* The parent's records are the parent's: forget them (mappings stay). */
    free(tab);
    tab = NULL;
    ntab = captab = 0;
    for (int i = 0; i < SIM_MAX_CARDS; i++) {
        atomic_store(&live_bytes[i], 0);
        atomic_store(&live_count[i], 0);
    }
}

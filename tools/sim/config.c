/* cuInit, configuration from the environment, call counters, fork. */
#include "sim_internal.h"
#include "os.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

_Atomic uint64_t sim_call_counts[SIM_FN_COUNT];
struct sim_config sim_cfg;

static const char *const fn_names[SIM_FN_COUNT] = {
#define SIM_FN(name) #name,
#include "sim_api.def"
#undef SIM_FN
};

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int initialized;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

int sim_initialized(void) { return atomic_load_explicit(&initialized, memory_order_acquire); }

/* "24GiB", "3 GiB", "512MiB", "1048576", "1.5GiB" */
int sim_parse_size(const char *s, uint64_t *out)
{
    static const struct { const char *unit; uint64_t mul; } units[] = {
        {"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30},
        {"TiB", 1ull << 40}, {"KB", 1000ull}, {"MB", 1000000ull}, {"GB", 1000000000ull},
        {"K", 1ull << 10}, {"M", 1ull << 20}, {"G", 1ull << 30}, {"", 1}};
    char *end;
    while (isspace((unsigned char)*s)) s++;
    if (!isdigit((unsigned char)*s)) return -1;
    double v = strtod(s, &end);
    while (isspace((unsigned char)*end)) end++;
    size_t n = strlen(end);
    while (n && isspace((unsigned char)end[n - 1])) n--;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].unit) == n && strncmp(end, units[i].unit, n) == 0) {
            double b = v * (double)units[i].mul;
            if (b < 1 || b > 1e18) return -1;
            *out = (uint64_t)b;
            return 0;
        }
    }
    return -1;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    return *end ? dflt : (uint64_t)x;
}

static int read_config(struct sim_config *c)
{
    memset(c, 0, sizeof *c);
    const char *cards = getenv("VRAMSIM_CARDS");
    if (!cards || !*cards) cards = "24GiB";
    char buf[512];
    snprintf(buf, sizeof buf, "%s", cards);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (c->ncards == SIM_MAX_CARDS || sim_parse_size(tok, &c->capacity[c->ncards]) != 0) {
            fprintf(stderr, "vramshim: sim: bad VRAMSIM_CARDS \"%s\" (sizes like 3GiB,24GiB; "
                            "at most %d cards)\n", cards, SIM_MAX_CARDS);
            return -1;
        }
        c->ncards++;
    }
    if (c->ncards == 0) return -1;
    const char *vmm = getenv("VRAMSIM_VMM");
    c->vmm = !(vmm && strcmp(vmm, "0") == 0);
    const char *mo = getenv("VRAMSIM_MAP_OFFSET");
    c->map_offset = mo && strcmp(mo, "1") == 0;
    c->async_delay_us = env_u64("VRAMSIM_ASYNC_DELAY_US", 0);
    c->alloc_latency_us = env_u64("VRAMSIM_ALLOC_LATENCY_US", 0);
    c->end_latency_us = env_u64("VRAMSIM_END_LATENCY_US", 0);
    /* VRAMSIM_CONTEXT_OVERHEAD: what each context takes of the card
     * (docs/sim.md, "Context overhead"); "0" turns it off. */
    c->context_overhead = SIM_DEFAULT_CONTEXT_OVERHEAD;
    const char *o = getenv("VRAMSIM_CONTEXT_OVERHEAD");
    if (o && *o) {
        uint64_t v = 0;
        if (strspn(o, "0 ") == strlen(o)) {
            c->context_overhead = 0;
        } else if (sim_parse_size(o, &v) == 0) {
            c->context_overhead = v;
        } else {
            fprintf(stderr, "vramshim: sim: bad VRAMSIM_CONTEXT_OVERHEAD \"%s\" (a size like 300MiB, "
                            "or 0); using %llu MiB\n", o, (unsigned long long)(c->context_overhead >> 20));
        }
    }
    c->alloc_granule = 512;
    const char *g = getenv("VRAMSIM_ALLOC_GRANULE");
    if (g && *g && (sim_parse_size(g, &c->alloc_granule) != 0 || c->alloc_granule == 0))
        c->alloc_granule = 512;
    return 0;
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
static void uuid_text(const CUuuid *u, char out[41])
{
    const unsigned char *b = (const unsigned char *)u->bytes;
    snprintf(out, 41, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* The physical card one entry names, or -1. */
static int entry_card(const char *e, size_t n, int nphys, const uint64_t *cap)
{
    if (n == 0) return -1;
    int digits = 1;
    for (size_t i = 0; i < n; i++) digits &= isdigit((unsigned char)e[i]) != 0;
    if (digits) {
        if (n > 3) return -1;
        int v = atoi(e);
        return v < nphys ? v : -1;
    }
    /* a UUID with or without "GPU-", or a prefix naming one card only */
    const char *want = e;
    size_t wn = n;
    if (wn >= 4 && !strncmp(want, "GPU-", 4)) want += 4, wn -= 4;
    if (wn == 0) return -1;
    int found = -1;
    for (int c = 0; c < nphys; c++) {
        CUuuid u;
        char t[41];
        sim_phys_uuid(c, cap[c], &u);
        uuid_text(&u, t);
        if (wn <= strlen(t + 4) && strncasecmp(t + 4, want, wn) == 0) {
            if (found >= 0) return -1;   /* not unique */
            found = c;
        }
    }
    return found;
}

int sim_visible_devices(const char *cvd, int nphys, const uint64_t *cap, int phys[SIM_MAX_CARDS])
{
    if (!cvd) {
        for (int i = 0; i < nphys; i++) phys[i] = i;
        return nphys;
    }
    int n = 0;
    const char *p = cvd;
    while (n < SIM_MAX_CARDS) {
        while (*p == ' ') p++;
        size_t len = strcspn(p, ",");
        size_t l = len;
        while (l && p[l - 1] == ' ') l--;
        int c = entry_card(p, l, nphys, cap);
        for (int i = 0; i < n; i++)
            if (phys[i] == c) c = -1;   /* listed twice: ends the list */
        if (c < 0) break;
        phys[n++] = c;
        if (!p[len]) break;
        p += len + 1;
    }
    return n;
}

static void before_fork(void)
{
    pthread_mutex_lock(&init_lock);
    pthread_mutex_lock(&sim_mem_lock);
}
static void after_fork_parent(void)
{
    pthread_mutex_unlock(&sim_mem_lock);
    pthread_mutex_unlock(&init_lock);
}
/* The child starts clean: no context, no streams (their threads are gone),
 * no allocations of its own, no slot in the shared state; cuInit again. */
static void after_fork_child(void)
{
    pthread_mutex_init(&sim_mem_lock, NULL);
    pthread_mutex_init(&init_lock, NULL);
    atomic_store(&initialized, 0);
    sim_stream_after_fork_child();
    sim_event_after_fork_child();
    sim_pool_after_fork_child();
    sim_graph_after_fork_child();
    sim_vmm_after_fork_child();
    sim_mem_after_fork_child();
    sim_ctx_after_fork_child();
    sim_state_after_fork_child();
    vramsim_reset_calls();
}
static void install_atfork(void) { sim_os_atfork(before_fork, after_fork_parent, after_fork_child); }

CUresult sim_init(void)
{
    pthread_once(&atfork_once, install_atfork);
    if (sim_initialized()) return CUDA_SUCCESS;
    pthread_mutex_lock(&init_lock);
    CUresult r = CUDA_SUCCESS;
    if (!sim_initialized()) {
        struct sim_config want;
        if (read_config(&want) != 0) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else {
            sim_os_process_setup();
            char path[4096];
            const char *p = getenv("VRAMSIM_STATE");
            if (!p || !*p) {
                sim_os_default_state_path(path, sizeof path);
                p = path;
            }
            struct sim_config got = want;
            r = sim_state_open(p, &want, &got);
            if (r == CUDA_SUCCESS) {
                /* the state file's cards are the physical ones; this process
                 * sees those CUDA_VISIBLE_DEVICES names, in its order */
                got.nphys = got.ncards;
                memcpy(got.phys_capacity, got.capacity, sizeof got.phys_capacity);
                got.ncards = sim_visible_devices(getenv("CUDA_VISIBLE_DEVICES"), got.nphys, got.phys_capacity,
                                                 got.phys);
                for (int i = 0; i < got.ncards; i++) got.capacity[i] = got.phys_capacity[got.phys[i]];
                sim_cfg = got;
                /* no card visible (CUDA_VISIBLE_DEVICES names none): the
                 * driver's answer, and it stays uninitialised */
                if (got.ncards) atomic_store_explicit(&initialized, 1, memory_order_release);
                else r = CUDA_ERROR_NO_DEVICE;
            }
        }
    }
    pthread_mutex_unlock(&init_lock);
    return r;
}

SIM_API CUresult cuInit(unsigned int flags)
{
    SIM_COUNT(cuInit);
    pthread_once(&atfork_once, install_atfork);
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    return sim_init();
}

/* VRAMSIM_DRIVER_VERSION (default 13000, the toolkit's): what
 * cuDriverGetVersion says. Below 13000 the sim is a CUDA 12 driver for the
 * functions CUDA 13 gave a new signature under an old name's _v2 (see
 * context.c). Read on first use (also before cuInit). */
int sim_driver_version(void)
{
    static _Atomic int cached;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v) return v;
    const char *e = getenv("VRAMSIM_DRIVER_VERSION");
    v = e && atoi(e) >= 2000 ? atoi(e) : 13000;
    atomic_store_explicit(&cached, v, memory_order_relaxed);
    return v;
}

SIM_API CUresult cuDriverGetVersion(int *v)
{
    SIM_COUNT(cuDriverGetVersion);
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = sim_driver_version();
    return CUDA_SUCCESS;
}

void sim_sleep_us(uint64_t us) { sim_os_sleep_us(us); }

void sim_latency(void)
{
    if (sim_cfg.alloc_latency_us) sim_sleep_us(sim_cfg.alloc_latency_us);
}

/* ---- extension API ---- */
SIM_API uint64_t vramsim_calls(const char *fn)
{
    if (!fn) return 0;
    for (int i = 0; i < SIM_FN_COUNT; i++)
        if (strcmp(fn_names[i], fn) == 0)
            return atomic_load_explicit(&sim_call_counts[i], memory_order_relaxed);
    return 0;
}

SIM_API void vramsim_reset_calls(void)
{
    for (int i = 0; i < SIM_FN_COUNT; i++)
        atomic_store_explicit(&sim_call_counts[i], 0, memory_order_relaxed);
}

SIM_API uint64_t vramsim_card_used(int card)
{
    if (!sim_initialized() || card < 0 || card >= sim_cfg.ncards) return 0;
    return sim_state_used(card);
}

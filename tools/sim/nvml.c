/* The sim's NVML: libnvidia-ml.so.1 (Windows: nvml.dll), over the cards and
 * processes of the sim's shared state (vramsim.h's NVML extension API).
 *
 * What it models is what tools and servers read (nvml_api.def): init and
 * shutdown, the cards by physical index, UUID and PCI bus id, name, UUID,
 * index, PCI info, memory info v1 and v2, the running compute processes
 * with the card memory each holds (allocations and context overhead, every
 * struct version), driver and CUDA driver versions, error strings. Every
 * other function nvml.h declares is a generated stub returning
 * NVML_ERROR_NOT_SUPPORTED (gen_nvml_stubs.sh), as on a card without the
 * feature. Indexes are physical: CUDA_VISIBLE_DEVICES does not change them
 * (the sim has no such mapping in CUDA either, so the two agree).
 *
 * No cuInit and no context: the library attaches to the shared state
 * itself (vramsim_nvml_attach), so a process that only reads NVML is not
 * one of the card's processes. */
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#define NVML_STATIC_IMPORT 1   /* Windows: defined here, exported by nvml.def, never dllimport */
#include <nvml.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "vramsim.h"

#ifndef NVML_SIM_API
#define NVML_SIM_API __attribute__((visibility("default")))
#endif
#define MAX_CARDS 16
#define MAX_PROCS 512

/* A handle is the address of its card's entry: stable for the life of the
 * library, so a handle taken before nvmlShutdown still names the card. The
 * card is the entry's place in the table, never written: an nvmlInit of one
 * thread while another uses a handle (the shim's background thread reads
 * NVML while the program initialises it again) changes nothing under it. */
struct nvmlDevice_st {
    char unused;
};
static struct nvmlDevice_st g_dev[MAX_CARDS];
static atomic_int g_refs;   /* nvmlInit calls not yet matched by nvmlShutdown */

static nvmlReturn_t init(void)
{
    if (vramsim_nvml_attach() != 0) return NVML_ERROR_DRIVER_NOT_LOADED;
    atomic_fetch_add(&g_refs, 1);
    return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlInit_v2(void) { return init(); }
NVML_SIM_API nvmlReturn_t nvmlInit(void) { return init(); }
NVML_SIM_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;   /* NVML_INIT_FLAG_NO_GPUS / NO_ATTACH: nothing to skip here */
    return init();
}

NVML_SIM_API nvmlReturn_t nvmlShutdown(void)
{
    int r = atomic_load(&g_refs);
    while (r > 0 && !atomic_compare_exchange_weak(&g_refs, &r, r - 1)) {
    }
    return r > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static int ready(void) { return atomic_load(&g_refs) > 0; }

/* The card of a handle, or -1 for a handle that is not one of ours. */
static int card_of(nvmlDevice_t d)
{
    if (!d || d < &g_dev[0] || d >= &g_dev[MAX_CARDS]) return -1;
    int c = (int)(d - &g_dev[0]);
    return c < vramsim_card_count() ? c : -1;
}

#define REQUIRE_CARD(card, d)                                   \
    if (!ready()) return NVML_ERROR_UNINITIALIZED;              \
    int card = card_of(d);                                      \
    if (card < 0) return NVML_ERROR_INVALID_ARGUMENT

/* Copies s into out (len bytes with the terminator), or INSUFFICIENT_SIZE. */
static nvmlReturn_t put_string(char *out, unsigned len, const char *s)
{
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

static void uuid_string(int card, char out[NVML_DEVICE_UUID_V2_BUFFER_SIZE])
{
    unsigned char b[16];
    vramsim_card_identity(card, NULL, 0, b, NULL, 0);
    snprintf(out, NVML_DEVICE_UUID_V2_BUFFER_SIZE,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
             b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* ---- system ---- */

/* The driver version a CUDA 13.0 driver (VRAMSIM_DRIVER_VERSION 13000)
 * ships with is 580; each CUDA minor adds 5 to the branch, roughly. */
static void driver_version(char *out, size_t n)
{
    int cuda = vramsim_driver_version();
    int branch = 580 + ((cuda / 1000) - 13) * 20 + ((cuda % 1000) / 10) * 5;
    snprintf(out, n, "%d.00", branch < 100 ? 100 : branch);
}

NVML_SIM_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!ready()) return NVML_ERROR_UNINITIALIZED;
    char v[32];
    driver_version(v, sizeof v);
    return put_string(version, length, v);
}

NVML_SIM_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    if (!ready()) return NVML_ERROR_UNINITIALIZED;
    char d[32], v[48];
    driver_version(d, sizeof d);
    snprintf(v, sizeof v, "%d.%s", NVML_API_VERSION, d);
    return put_string(version, length, v);
}

NVML_SIM_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    if (!v) return NVML_ERROR_INVALID_ARGUMENT;
    *v = vramsim_driver_version();
    return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

/* ---- devices ---- */

NVML_SIM_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!ready()) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)vramsim_card_count();
    return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

NVML_SIM_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!ready()) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned)vramsim_card_count() || index >= MAX_CARDS) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_dev[index];
    return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (!ready()) return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int c = 0; c < vramsim_card_count() && c < MAX_CARDS; c++) {
        char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        uuid_string(c, u);
        if (strcmp(u, uuid) == 0) {
            *device = &g_dev[c];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* "00000000:10:00.0", "0000:10:00.0" or "10:00.0", any case. */
static int parse_bus_id(const char *s, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *fn)
{
    *dom = 0;
    if (sscanf(s, "%x:%x:%x.%x", dom, bus, dev, fn) == 4) return 0;
    if (sscanf(s, "%x:%x.%x", bus, dev, fn) == 3) return 0;
    return -1;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    if (!ready()) return NVML_ERROR_UNINITIALIZED;
    unsigned dom, bus, dev, fn;
    if (!pciBusId || !device || parse_bus_id(pciBusId, &dom, &bus, &dev, &fn) != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int c = 0; c < vramsim_card_count() && c < MAX_CARDS; c++) {
        char p[32];
        unsigned d2, b2, v2, f2;
        vramsim_card_identity(c, NULL, 0, NULL, p, sizeof p);
        if (parse_bus_id(p, &d2, &b2, &v2, &f2) == 0 && d2 == dom && b2 == bus && v2 == dev && f2 == fn) {
            *device = &g_dev[c];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    REQUIRE_CARD(card, device);
    char n[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    vramsim_card_identity(card, n, sizeof n, NULL, NULL, 0);
    return put_string(name, length, n);
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    REQUIRE_CARD(card, device);
    char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    uuid_string(card, u);
    return put_string(uuid, length, u);
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    REQUIRE_CARD(card, device);
    if (!index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)card;
    return NVML_SUCCESS;
}

static nvmlReturn_t pci_info(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    REQUIRE_CARD(card, device);
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    char p[32];
    vramsim_card_identity(card, NULL, 0, NULL, p, sizeof p);
    memset(pci, 0, sizeof *pci);
    unsigned fn;
    parse_bus_id(p, &pci->domain, &pci->bus, &pci->device, &fn);
    snprintf(pci->busId, sizeof pci->busId, "%s", p);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, pci->domain, pci->bus,
             pci->device);
    pci->pciDeviceId = 0x233010deu;   /* an H100's device id and NVIDIA's vendor id */
    return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return pci_info(device, pci);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return pci_info(device, pci);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return pci_info(device, pci);
}

/* ---- memory ---- */

/* The card: total its capacity, used what every live process holds on it
 * (allocations and context overhead), free the rest, never below 0. */
static void card_memory(int card, unsigned long long *total, unsigned long long *free_b, unsigned long long *used)
{
    uint64_t cap = vramsim_card_capacity(card), u = vramsim_card_used(card);
    if (u > cap) u = cap;
    *total = cap;
    *used = u;
    *free_b = cap - u;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    REQUIRE_CARD(card, device);
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    card_memory(card, &memory->total, &memory->free, &memory->used);
    return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    REQUIRE_CARD(card, device);
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    card_memory(card, &memory->total, &memory->free, &memory->used);
    memory->reserved = 0;   /* the sim sets nothing aside for the driver */
    return NVML_SUCCESS;
}

/* ---- processes ---- */

/* The processes with a context on the card, written as NVML's struct of
 * version `ver` (1: pid and usedGpuMemory; 2 and 3: the same layout with
 * the MIG instance ids, 0xFFFFFFFF without MIG). NVML's protocol: *count
 * in is the room in infos; too little room sets *count to what is needed
 * and returns INSUFFICIENT_SIZE; none running is SUCCESS with *count 0. */
/* VRAMSIM_NVML_PID_BASE=N: every pid is reported as N + pid, as a host's
 * NVML reports the host's pids to a process in a container with a PID
 * namespace of its own (it does not find itself in the list). */
static unsigned pid_base(void)
{
    static _Atomic long base = -1;
    long b = atomic_load(&base);
    if (b < 0) {
        const char *e = getenv("VRAMSIM_NVML_PID_BASE");
        b = e && *e ? strtol(e, NULL, 10) : 0;
        if (b < 0) b = 0;
        atomic_store(&base, b);
    }
    return (unsigned)b;
}

static nvmlReturn_t processes(nvmlDevice_t device, unsigned *count, void *infos, int ver, int compute)
{
    REQUIRE_CARD(card, device);
    unsigned base = pid_base();
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    static _Thread_local int32_t pids[MAX_PROCS];
    static _Thread_local uint64_t used[MAX_PROCS];
    unsigned n = compute ? vramsim_card_processes(card, pids, used, MAX_PROCS) : 0;
    if (n > MAX_PROCS) n = MAX_PROCS;
    if (n > *count) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n && !infos) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < n; i++) {
        if (ver == 1) {
            nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)infos + i;
            p->pid = base + (unsigned)pids[i];
            p->usedGpuMemory = used[i];
        } else {
            nvmlProcessInfo_v2_t *p = (nvmlProcessInfo_v2_t *)infos + i;
            p->pid = base + (unsigned)pids[i];
            p->usedGpuMemory = used[i];
            p->gpuInstanceId = 0xFFFFFFFFu;
            p->computeInstanceId = 0xFFFFFFFFu;
        }
    }
    *count = n;
    return NVML_SUCCESS;
}

NVML_SIM_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p)
{
    return processes(d, n, p, 1, 1);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n,
                                                                   nvmlProcessInfo_v2_t *p)
{
    return processes(d, n, p, 2, 1);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p)
{
    return processes(d, n, p, 3, 1);
}
/* No graphics and no MPS clients on the sim's cards: empty lists. */
NVML_SIM_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *n,
                                                                 nvmlProcessInfo_v1_t *p)
{
    return processes(d, n, p, 1, 0);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *n,
                                                                    nvmlProcessInfo_v2_t *p)
{
    return processes(d, n, p, 2, 0);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *n,
                                                                    nvmlProcessInfo_t *p)
{
    return processes(d, n, p, 3, 0);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t d, unsigned int *n,
                                                                   nvmlProcessInfo_v1_t *p)
{
    return processes(d, n, p, 1, 0);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n,
                                                                      nvmlProcessInfo_v2_t *p)
{
    return processes(d, n, p, 2, 0);
}
NVML_SIM_API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n,
                                                                      nvmlProcessInfo_t *p)
{
    return processes(d, n, p, 3, 0);
}

/* ---- errors ---- */

NVML_SIM_API const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

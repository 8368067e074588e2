/* Extension API of the simulated CUDA driver (libvramsim.so, laid out as
 * libcuda.so.1). Tests link the `vramsim` target or look these up with
 * dlsym(RTLD_DEFAULT, ...). All counters are per process except
 * vramsim_card_used, which is card-wide across every process sharing the
 * state file ($VRAMSIM_STATE). */
#ifndef VRAMSIM_H
#define VRAMSIM_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Calls made by this process to the sim function with this exported name,
 * e.g. "cuMemAlloc_v2"; 0 for a name the sim does not export. */
uint64_t vramsim_calls(const char *fn);
void vramsim_reset_calls(void);
/* Sum of REQUESTED sizes of this process's live device allocations on card,
 * every path (cuMemAlloc*, pitch = pitch*height, managed, async/pool,
 * cuMemCreate physical memory), and their number. */
uint64_t vramsim_live_bytes(int card);
uint64_t vramsim_live_count(int card);
/* Card-wide bytes in use by all live processes, as charged (docs/sim.md):
 * allocations and each context's overhead. */
uint64_t vramsim_card_used(int card);

/* What the sim's NVML (libnvidia-ml.so.1, tools/sim/nvml.c) reads: the
 * cards and the processes of the shared state, without cuInit and without
 * a context. vramsim_nvml_attach reads the configuration and opens the
 * state (0, or -1 when VRAMSIM_CARDS is bad or the state cannot be opened);
 * the others need it first. Card indexes are the sim's physical ones. */
int vramsim_nvml_attach(void);
int vramsim_card_count(void);
uint64_t vramsim_card_capacity(int card);
/* name, UUID (16 bytes, as cuDeviceGetUuid), PCI bus id "00000000:10:00.0";
 * 0, or -1 for a card out of range. */
int vramsim_card_identity(int card, char *name, unsigned name_len, unsigned char uuid[16], char *pci,
                          unsigned pci_len);
/* The live processes with a context on card: pid and the bytes each holds
 * there (allocations and context overhead), up to max of them; returns how
 * many there are. */
unsigned vramsim_card_processes(int card, int32_t *pids, uint64_t *used, unsigned max);
/* 1 when a kernel on device dev could touch [ptr, ptr+n) (the sim runs no
 * kernels: tests ask this instead): memory of a context of dev, or of a
 * context another device's was given access to by cuCtxEnablePeerAccess
 * from a context of dev; a VMM mapping cuMemSetAccess opened to dev;
 * managed and pinned host memory. Else 0. */
int vramsim_device_can_access(int dev, uint64_t ptr, uint64_t n);
/* VRAMSIM_DRIVER_VERSION (what cuDriverGetVersion says, default 13000). */
int vramsim_driver_version(void);
/* VRAMSIM_CONTEXT_OVERHEAD as this process read it. */
uint64_t vramsim_context_overhead(void);

#ifdef __cplusplus
}
#endif
#endif

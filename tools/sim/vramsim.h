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
/* Card-wide bytes in use by all live processes, as charged (docs/sim.md). */
uint64_t vramsim_card_used(int card);

#ifdef __cplusplus
}
#endif
#endif

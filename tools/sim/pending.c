/* Temporary: pools, VMM and IPC arrive in pool.c, vmm.c and ipc.c. */
#include "sim_internal.h"
void sim_pool_free_now(struct sim_alloc *a) { sim_free_record(a); }
void sim_pool_after_fork_child(void) {}
int sim_vmm_range_ok(uintptr_t p, size_t n) { (void)p; (void)n; return 0; }
void sim_vmm_after_fork_child(void) {}

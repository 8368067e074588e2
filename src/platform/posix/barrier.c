#include "barrier.h"

#include <unistd.h>
#include <sys/syscall.h>

/* linux/membarrier.h's command numbers, spelt here so that older headers
 * build too (a kernel without them refuses the registration: 0). */
#define VS_MEMBARRIER_PRIVATE_EXPEDITED (1 << 3)
#define VS_MEMBARRIER_REGISTER_PRIVATE_EXPEDITED (1 << 4)

int vs_plat_heavy_barrier_init(void) {
#ifdef SYS_membarrier
  return syscall(SYS_membarrier, VS_MEMBARRIER_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#else
  return 0;
#endif
}

void vs_plat_heavy_barrier(void) {
#ifdef SYS_membarrier
  /* Registered (init said 1): the command cannot fail. */
  (void)syscall(SYS_membarrier, VS_MEMBARRIER_PRIVATE_EXPEDITED, 0, 0);
#endif
}

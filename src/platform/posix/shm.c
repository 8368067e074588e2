#include "shm.h"

#include <sys/mman.h>

void *vs_plat_map_shared(int fd, size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? NULL : p;
}

void vs_plat_unmap(void *addr, size_t size) { munmap(addr, size); }

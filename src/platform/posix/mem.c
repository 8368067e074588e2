#include "mem.h"

#include <stdlib.h>

void *vs_plat_aligned_alloc(size_t align, size_t size) { return aligned_alloc(align, size); }
void vs_plat_aligned_free(void *p) { free(p); }

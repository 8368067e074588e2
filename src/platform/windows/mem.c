#include "mem.h"

#include <malloc.h>

void *vs_plat_aligned_alloc(size_t align, size_t size) { return _aligned_malloc(size, align); }
void vs_plat_aligned_free(void *p) { _aligned_free(p); }

/* Over-aligned heap memory (cache-line aligned structures). C11's
 * aligned_alloc/free on POSIX; Windows' C library has no aligned_alloc:
 * _aligned_malloc, which must be freed by _aligned_free (never free()). */
#ifndef VS_PLAT_MEM_H
#define VS_PLAT_MEM_H
#include <stddef.h>

/* size: a multiple of align; NULL on failure. */
void *vs_plat_aligned_alloc(size_t align, size_t size);
void vs_plat_aligned_free(void *p);
#endif

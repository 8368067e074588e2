/* Shared mappings of a file (the ledger): every process that maps the same
 * file sees the same bytes. POSIX: mmap MAP_SHARED. Windows:
 * CreateFileMapping + MapViewOfFile of the descriptor's handle (the
 * mapping object is closed at once; the view keeps it). */
#ifndef VS_PLAT_SHM_H
#define VS_PLAT_SHM_H
#include <stddef.h>

/* Maps size bytes of the file open read-write as fd: the address, or NULL
 * with errno. */
void *vs_plat_map_shared(int fd, size_t size);
void vs_plat_unmap(void *addr, size_t size);
#endif

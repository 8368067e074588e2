#include "shm.h"

#include <errno.h>
#include <stdint.h>

#include "wutil.h"

/* The mapping object is closed at once: the view keeps it (and the file)
 * alive until UnmapViewOfFile. */
void *vs_plat_map_shared(int fd, size_t size) {
  HANDLE f = vs_win_handle(fd);
  HANDLE m = f == INVALID_HANDLE_VALUE ? NULL
                                       : CreateFileMappingW(f, NULL, PAGE_READWRITE, (DWORD)((uint64_t)size >> 32),
                                                            (DWORD)(size & 0xffffffffu), NULL);
  if (!m) {
    errno = vs_win_errno(GetLastError());
    return NULL;
  }
  void *p = MapViewOfFile(m, FILE_MAP_READ | FILE_MAP_WRITE, 0, 0, size);
  DWORD e = GetLastError();
  CloseHandle(m);
  if (!p) errno = vs_win_errno(e);
  return p;
}

void vs_plat_unmap(void *addr, size_t size) {
  (void)size;
  UnmapViewOfFile(addr);
}

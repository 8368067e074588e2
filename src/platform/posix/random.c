#include "random.h"

#include <errno.h>
#include <sys/random.h>
#include <sys/types.h>

int vs_plat_random(void *buf, size_t len) {
  unsigned char *p = buf;
  while (len) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

#include "random.h"

#include <windows.h>
#include <bcrypt.h>

int vs_plat_random(void *buf, size_t len) {
  return BCryptGenRandom(NULL, buf, (ULONG)len, BCRYPT_USE_SYSTEM_PREFERRED_RNG) == 0 ? 0 : -1;
}

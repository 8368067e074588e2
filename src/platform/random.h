/* Unpredictable bytes from the system (nonces of IPC handles). POSIX:
 * getrandom(2); Windows: BCryptGenRandom with the system's generator. */
#ifndef VS_PLAT_RANDOM_H
#define VS_PLAT_RANDOM_H
#include <stddef.h>

/* Fills buf with len bytes; 0, or -1 when the system gives none. */
int vs_plat_random(void *buf, size_t len);

#endif

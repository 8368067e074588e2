#include "bgthread.h"

#include <pthread.h>

/* winpthreads' threads are Windows threads; there is no signal mask to set
 * (Windows delivers no asynchronous signals to a thread) and no name to
 * give before Windows 10's SetThreadDescription, which Wine 8 lacks. */
int vs_plat_thread_spawn(void *(*fn)(void *), void *arg, const char *name) {
  (void)name;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = pthread_create(&t, &at, fn, arg);
  pthread_attr_destroy(&at);
  return rc;
}

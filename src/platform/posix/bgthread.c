#include "bgthread.h"

#include <pthread.h>
#include <signal.h>

int vs_plat_thread_spawn(void *(*fn)(void *), void *arg, const char *name) {
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  /* The new thread inherits the mask in force at pthread_create. */
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = pthread_create(&t, &at, fn, arg);
  pthread_attr_destroy(&at);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0 && name) pthread_setname_np(t, name);
  return rc;
}

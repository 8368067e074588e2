#include "dump_signal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>

static void (*volatile g_fn)(void);

static void on_signal(int sig) {
  (void)sig;
  void (*fn)(void) = g_fn;
  if (fn) fn();
}

int vs_plat_dump_signal_install(int signo, void (*fn)(void)) {
  g_fn = fn;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  return sigaction(signo, &sa, NULL) ? errno : 0;
}

int vs_plat_dump_signal_send(int pid, int signo) { return kill((pid_t)pid, signo); }

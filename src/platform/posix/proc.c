#include "proc.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int vs_plat_pid(void) { return (int)getpid(); }

long vs_plat_tid(void) { return (long)syscall(SYS_gettid); }

uint64_t vs_plat_self_start_time(void) {
  char buf[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  /* Field 22 (starttime), counting from the one after the ")" of comm. */
  char *p = strrchr(buf, ')');
  if (!p) return 0;
  int field = 2;
  for (; *p && field < 22; p++)
    if (*p == ' ') field++;
  return strtoull(p, NULL, 10);
}

void vs_plat_user_desc(char *out, size_t len) { snprintf(out, len, "uid %u", (unsigned)geteuid()); }

void vs_plat_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  pthread_atfork(prepare, parent, child);
}

void vs_plat_stop_self(void) { raise(SIGSTOP); }

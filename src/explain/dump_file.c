/* Dump files: a private directory, exclusive creation, no symlinks. */
#include "dump_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dir.h"
#include "dump_json.h"
#include "file.h"
#include "log.h"
#include "timeutil.h"

/* The folder: made owner-only, checked private (src/platform/dir.h). */
static int prepare_dir(const char *dir, char *err, size_t errlen) { return vs_plat_own_dir_open(dir, err, errlen); }

int vs_dump_dir_prepare(const char *dir, char *err, size_t errlen) {
  int fd = prepare_dir(dir, err, errlen);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

/* Opens a new dump file in the directory dfd (dir, checked by prepare_dir);
 * returns its fd (write-only, close-on-exec) and its path in path, or -1
 * with the reason in err. card < 0: "all". */
static int open_file(int dfd, const char *dir, int64_t pid, int card, uint64_t time_unix_ms, char *path,
                     size_t pathlen, char *err, size_t errlen) {
  time_t t = (time_t)(time_unix_ms / 1000);
  struct tm tm;
  char when[32], cardname[16], name[128];
  vs_plat_gmtime(t, &tm);
  strftime(when, sizeof when, "%Y%m%dT%H%M%S", &tm);
  if (card < 0) snprintf(cardname, sizeof cardname, "all");
  else snprintf(cardname, sizeof cardname, "%d", card);
  for (int attempt = 0; attempt < 100; attempt++) {
    char suffix[8] = "";
    if (attempt) snprintf(suffix, sizeof suffix, "-%d", attempt);
    snprintf(name, sizeof name, "vramshim-%lld-%s-%s.%03uZ%s.json", (long long)pid, cardname, when,
             (unsigned)(time_unix_ms % 1000), suffix);
    int fd = vs_plat_openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      snprintf(path, pathlen, "%s/%s", dir, name);
      return fd;
    }
    if (errno != EEXIST) {
      snprintf(err, errlen, "cannot create %s/%s: %s", dir, name, strerror(errno));
      return -1;
    }
  }
  snprintf(err, errlen, "cannot create a dump file in %s: 100 names taken", dir);
  return -1;
}

int vs_dump_write_file(const vs_dump *d, const char *dir, int card, char *path, size_t pathlen, char *err,
                       size_t errlen) {
  int dfd = prepare_dir(dir, err, errlen);
  if (dfd < 0) return -1;
  int fd = open_file(dfd, dir, d->pid, card, d->time_unix_ms, path, pathlen, err, errlen);
  close(dfd);
  if (fd < 0) return -1;
  if (vs_dump_write_fd(d, fd) || vs_plat_fsync(fd)) {
    snprintf(err, errlen, "writing %s: %s", path, strerror(errno));
    close(fd);
    unlink(path);
    return -1;
  }
  if (close(fd)) {
    snprintf(err, errlen, "writing %s: %s", path, strerror(errno));
    unlink(path);
    return -1;
  }
  return 0;
}

int vs_dump_write_logged(const vs_dump *d, const char *dir, int card, const char *what, char *path, size_t pathlen) {
  char err[512], where[24];
  if (card < 0) snprintf(where, sizeof where, "all cards");
  else snprintf(where, sizeof where, "card %d", card);
  if (vs_dump_write_file(d, dir, card, path, pathlen, err, sizeof err)) {
    VS_WARN("%s: %s; no dump written: %s", where, what, err);
    return -1;
  }
  VS_WARN("%s: %s; dump written to %s", where, what, path);
  return 0;
}

int vs_ratelimit_allow(vs_ratelimit *rl, uint64_t now_ms, uint64_t interval_ms) {
  uint64_t next = atomic_load_explicit(&rl->next_ms, memory_order_relaxed);
  /* Exactly one caller wins each window: the one whose CAS moves next_ms. */
  while (now_ms >= next) {
    if (atomic_compare_exchange_weak_explicit(&rl->next_ms, &next, now_ms + interval_ms, memory_order_relaxed,
                                              memory_order_relaxed))
      return 1;
  }
  return 0;
}

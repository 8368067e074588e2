/* Dump files: a private directory, exclusive creation, no symlinks. */
#include "dump_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dump_json.h"
#include "log.h"

/* An existing directory is acceptable when it is ours and private enough:
 * a world- or group-writable one would let another user swap files. */
static int check_dir(int fd, const char *dir, char *err, size_t errlen) {
  struct stat st;
  if (fstat(fd, &st)) {
    snprintf(err, errlen, "dump_dir %s: %s", dir, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "dump_dir %s is not a directory", dir);
    return -1;
  }
  if (st.st_uid != geteuid()) {
    snprintf(err, errlen, "dump_dir %s belongs to another user (uid %u)", dir, (unsigned)st.st_uid);
    return -1;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(err, errlen, "dump_dir %s is writable by group or others (mode %03o); refusing to write dumps there", dir,
             (unsigned)(st.st_mode & 0777));
    return -1;
  }
  return 0;
}

/* Opens dir itself without following a symlink at its last component. */
static int open_dir(const char *dir) {
  return open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* vs_dump_dir_prepare, handing back the checked directory open (its fd),
 * or -1 with the reason in err. */
static int prepare_dir(const char *dir, char *err, size_t errlen) {
  if (!dir || !*dir) {
    snprintf(err, errlen, "dump_dir is empty");
    return -1;
  }
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) {
    snprintf(err, errlen, "dump_dir path too long");
    return -1;
  }
  /* Missing parents are made 0700 too; existing parents are left alone. */
  for (char *s = tmp + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(tmp, 0700) && errno != EEXIST) {
      snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
      return -1;
    }
    *s = '/';
  }
  if (mkdir(dir, 0700) && errno != EEXIST) {
    snprintf(err, errlen, "cannot create dump_dir %s: %s", dir, strerror(errno));
    return -1;
  }
  int fd = open_dir(dir);
  if (fd < 0) {
    snprintf(err, errlen, "dump_dir %s: %s%s", dir, strerror(errno),
             errno == ELOOP || errno == ENOTDIR ? " (a symlink or not a directory)" : "");
    return -1;
  }
  if (check_dir(fd, dir, err, errlen)) {
    close(fd);
    return -1;
  }
  return fd;
}

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
  gmtime_r(&t, &tm);
  strftime(when, sizeof when, "%Y%m%dT%H%M%S", &tm);
  if (card < 0) snprintf(cardname, sizeof cardname, "all");
  else snprintf(cardname, sizeof cardname, "%d", card);
  for (int attempt = 0; attempt < 100; attempt++) {
    char suffix[8] = "";
    if (attempt) snprintf(suffix, sizeof suffix, "-%d", attempt);
    snprintf(name, sizeof name, "vramshim-%lld-%s-%s.%03uZ%s.json", (long long)pid, cardname, when,
             (unsigned)(time_unix_ms % 1000), suffix);
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
  if (vs_dump_write_fd(d, fd) || fsync(fd)) {
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

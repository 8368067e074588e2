/* Dump files: a private directory, exclusive creation, no symlinks. */
#include "dump_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dir.h"
#include "dump_json.h"
#include "file.h"
#include "log.h"
#include "timeutil.h"

/* The folder: made owner-only, checked private, or this user's own
 * folder inside a shared one (src/platform/dir.h); its path in used. */
static int prepare_dir(const char *dir, char *used, size_t usedlen, char *err, size_t errlen) {
  return vs_plat_own_dir_open(dir, used, usedlen, err, errlen);
}

int vs_dump_dir_prepare(const char *dir, char *err, size_t errlen) {
  char used[4200];
  int fd = prepare_dir(dir, used, sizeof used, err, errlen);
  if (fd < 0) return -1;
  close(fd);
  return 0;
}

/* The name of a new dump in the folder dfd: the first of
 * vramshim-<pid>-<card>-<UTC time>[-N].json not there yet (only this
 * process writes names with its pid, one dump at a time). 0, or -1. */
static int pick_name(int dfd, int64_t pid, int card, uint64_t time_unix_ms, char *name, size_t namelen) {
  time_t t = (time_t)(time_unix_ms / 1000);
  struct tm tm;
  char when[32], cardname[16];
  vs_plat_gmtime(t, &tm);
  strftime(when, sizeof when, "%Y%m%dT%H%M%S", &tm);
  if (card < 0) snprintf(cardname, sizeof cardname, "all");
  else snprintf(cardname, sizeof cardname, "%d", card);
  for (int attempt = 0; attempt < 100; attempt++) {
    char suffix[8] = "";
    if (attempt) snprintf(suffix, sizeof suffix, "-%d", attempt);
    snprintf(name, namelen, "vramshim-%lld-%s-%s.%03uZ%s.json", (long long)pid, cardname, when,
             (unsigned)(time_unix_ms % 1000), suffix);
    int fd = vs_plat_openat(dfd, name, O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0 && errno == ENOENT) return 0;
    if (fd >= 0) close(fd);
  }
  return -1;
}

/* ---- The folder's cap (issue 23) ---- */
/* "vramshim-<pid>-<card>-" before the time, or NULL when name is not a
 * dump's: the time part sorts dumps oldest first (UTC, fixed width). */
static const char *dump_time(const char *name) {
  if (strncmp(name, "vramshim-", 9)) return NULL;
  const char *p = strchr(name + 9, '-');
  p = p ? strchr(p + 1, '-') : NULL;
  size_t n = strlen(name);
  if (!p || n < 5 || strcmp(name + n - 5, ".json") || strlen(p + 1) < 20 || p[9] != 'T') return NULL;
  return p + 1;
}

typedef struct folder_walk {
  char (*names)[128];
  size_t n, cap;
  char stale[16][128];   /* parts of dumps never finished (a killed writer), removed */
  size_t nstale;
  char old_part[32];     /* the time before which a part is stale */
} folder_walk;

static int walk_entry(const char *name, void *arg) {
  folder_walk *w = arg;
  if (strlen(name) >= 128) return 0;
  size_t n = strlen(name);
  if (name[0] == '.' && n > 5 && !strcmp(name + n - 5, ".part")) {
    char base[128];
    snprintf(base, sizeof base, "%.*s", (int)(n - 6), name + 1);
    const char *t = dump_time(base);
    if (t && strcmp(t, w->old_part) < 0 && w->nstale < 16) snprintf(w->stale[w->nstale++], 128, "%s", name);
    return 0;
  }
  if (!dump_time(name)) return 0;
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 64;
    void *nn = realloc(w->names, cap * sizeof *w->names);
    if (!nn) return 1;
    w->names = nn;
    w->cap = cap;
  }
  snprintf(w->names[w->n++], 128, "%s", name);
  return 0;
}

static int by_time(const void *a, const void *b) { return strcmp(dump_time(a), dump_time(b)); }

/* Keeps the VS_DUMP_FOLDER_KEEP newest dumps of the folder dfd (at used):
 * every dump there is this user's (the folder is private, or this user's
 * own inside a shared one), so many processes together stay bounded too.
 * Parts of dumps whose writer was killed, older than a minute, go as well.
 * Closes dfd. */
static void prune_folder(int dfd, const char *used, uint64_t now_unix_ms) {
  folder_walk w;
  memset(&w, 0, sizeof w);
  time_t t = (time_t)(now_unix_ms / 1000 - 60);
  struct tm tm;
  vs_plat_gmtime(t, &tm);
  strftime(w.old_part, sizeof w.old_part, "%Y%m%dT%H%M%S", &tm);
  if (vs_plat_dir_each(dfd, walk_entry, &w) == 0) {
    char path[4400];
    for (size_t i = 0; i < w.nstale; i++) {
      snprintf(path, sizeof path, "%s/%s", used, w.stale[i]);
      (void)unlink(path);
    }
    if (w.n > VS_DUMP_FOLDER_KEEP) {
      qsort(w.names, w.n, sizeof *w.names, by_time);
      for (size_t i = 0; i < w.n - VS_DUMP_FOLDER_KEEP; i++) {
        snprintf(path, sizeof path, "%s/%s", used, w.names[i]);
        if (unlink(path) == 0) VS_DEBUG("dump %s removed (the folder keeps its %d newest)", path, VS_DUMP_FOLDER_KEEP);
      }
    }
  }
  free(w.names);
}

int vs_dump_write_file(const vs_dump *d, const char *dir, int card, char *path, size_t pathlen, char *err,
                       size_t errlen) {
  char used[4200], name[128], part[136];
  int dfd = prepare_dir(dir, used, sizeof used, err, errlen);
  if (dfd < 0) return -1;
  if (pick_name(dfd, d->pid, card, d->time_unix_ms, name, sizeof name)) {
    snprintf(err, errlen, "cannot create a dump file in %s: 100 names taken", used);
    close(dfd);
    return -1;
  }
  /* Written under a hidden name and renamed when complete: a writer
   * killed midway (or a full disk) never leaves an empty or partial dump
   * under a dump's name. */
  snprintf(part, sizeof part, ".%s.part", name);
  snprintf(path, pathlen, "%s/%s", used, name);
  int fd = vs_plat_openat(dfd, part, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create %s/%s: %s", used, part, strerror(errno));
    close(dfd);
    return -1;
  }
  int bad = vs_dump_write_fd(d, fd) || vs_plat_fsync(fd);
  int e = errno;
  if (close(fd) && !bad) {
    bad = 1;
    e = errno;
  }
  if (!bad && vs_plat_renameat(dfd, part, name)) {
    bad = 1;
    e = errno;
  }
  if (bad) {
    char pp[4400];
    snprintf(pp, sizeof pp, "%s/%s", used, part);
    (void)unlink(pp);
    snprintf(err, errlen, "writing %s: %s", path, strerror(e));
    close(dfd);
    return -1;
  }
  prune_folder(dfd, used, d->time_unix_ms);
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

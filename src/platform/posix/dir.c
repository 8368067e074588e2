#include "dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Issue 10, the takeover of a ledger dir: another local user who made the
 * directory (or a file in it) first would see and could break the usage of
 * every shimmed process. Trusted: a directory owned by root or by us, not
 * writable by others; group-writable is fine (the packaged /run/vramshim is
 * root:vramshim 2770, shared by the users of one card). */
static int check_dir(int dfd, const char *dir, const char *what, char *err, size_t errlen) {
  struct stat st;
  if (fstat(dfd, &st)) {
    snprintf(err, errlen, "%s %s: %s", what, dir, strerror(errno));
    return -1;
  }
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    snprintf(err, errlen,
             "%s %s belongs to another user (uid %u); refusing to use it (another user could read and break "
             "this process's accounting): remove it, or set ledger_dir to a directory of root or of uid %u",
             what, dir, (unsigned)st.st_uid, (unsigned)geteuid());
    return -1;
  }
  if (st.st_mode & S_IWOTH) {
    snprintf(err, errlen, "%s %s is world-writable; refusing to use it (chmod o-w it, or pick another)", what, dir);
    return -1;
  }
  return 0;
}

int vs_plat_private_dir_open(const char *dir, const char *what, int create, char *err, size_t errlen) {
  if (create && mkdir(dir, 0700) && errno != EEXIST) {
    snprintf(err, errlen, "%s %s: cannot create it: %s", what, dir, strerror(errno));
    return -1;
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    int e = errno;
    snprintf(err, errlen, "%s %s: cannot open it: %s", what, dir,
             e == ELOOP ? "it is a symbolic link" : e == ENOTDIR ? "not a directory" : strerror(e));
    return -1;
  }
  if (check_dir(dfd, dir, what, err, errlen)) {
    close(dfd);
    return -1;
  }
  return dfd;
}

int vs_plat_shared_file_check(int fd, const char *path, char *err, size_t errlen) {
  struct stat st;
  if (fstat(fd, &st)) {
    snprintf(err, errlen, "ledger %s: %s", path, strerror(errno));
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "ledger %s is not a regular file; refusing to use it", path);
    return -1;
  }
  if (st.st_mode & S_IWOTH) {
    snprintf(err, errlen, "ledger %s is world-writable; refusing to use it", path);
    return -1;
  }
  /* Another user's file is trusted only inside a root-owned, group-shared
   * directory (its group is the directory's): the administrator put both
   * users in that group to share the card. */
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    char dir[4096 + 64];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    struct stat ds;
    if (!slash || stat(dir, &ds) || ds.st_uid != 0 || !(ds.st_mode & S_ISGID) || ds.st_gid != st.st_gid) {
      snprintf(err, errlen,
               "ledger %s belongs to another user (uid %u); refusing to use it (another user could read and break "
               "this process's accounting): remove it",
               path, (unsigned)st.st_uid);
      return -1;
    }
  }
  /* Ours: group members of a shared directory must be able to write it
   * whatever our umask. */
  if (st.st_uid == geteuid() && (st.st_mode & 0660) != 0660) {
    if (fchmod(fd, 0660)) {
    }
  }
  return 0;
}

int vs_plat_file_not_public(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && !(st.st_mode & S_IWOTH);
}

/* Made at install time (packaging/tmpfiles.d/vramshim.conf). */
const char *vs_plat_system_ledger_dir(void) { return "/run/vramshim"; }

const char *vs_plat_system_dump_dir(void) { return "/var/tmp/vramshim"; }

const char *vs_plat_system_config_path(void) { return "/etc/vramshim.conf"; }

/* path (followed) is a directory of ours that others may not write;
 * group-writable allowed when group_ok (a home folder may be 0775). */
static int own_private(const char *path, int group_ok) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
         !(st.st_mode & (group_ok ? S_IWOTH : (S_IWGRP | S_IWOTH)));
}

int vs_plat_default_ledger_dir(char *out, size_t len, int *fallback) {
  const char *d = vs_plat_system_ledger_dir();
  struct stat st;
  *fallback = 0;
  int there = lstat(d, &st) == 0 || (mkdir(d, 0700) == 0 && lstat(d, &st) == 0);
  if (there) {
    /* There but not trustworthy: refuse, never fall back silently past a takeover. */
    if (!S_ISDIR(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & S_IWOTH)) return -1;
    if (faccessat(AT_FDCWD, d, R_OK | W_OK | X_OK, AT_EACCESS) == 0) {
      snprintf(out, len, "%s", d);
      return 0;
    }
  }
  *fallback = 1;
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  if (xdg && xdg[0] == '/' && strlen(xdg) < len - 16 && own_private(xdg, 0)) {
    snprintf(out, len, "%s/vramshim", xdg);
    return 0;
  }
  /* Issue 23: another local user may make /tmp/vramshim-<uid> first; used
   * only when it is missing (made 0700 by the ledger) or ours and private,
   * else $HOME/.cache/vramshim, which nobody else can make. All of this
   * user's processes make the same choice. */
  snprintf(out, len, "/tmp/vramshim-%u", (unsigned)geteuid());
  struct stat ts;
  if (lstat(out, &ts) != 0 || (S_ISDIR(ts.st_mode) && ts.st_uid == geteuid() && !(ts.st_mode & 022))) return 0;
  const char *home = getenv("HOME");
  char cache[4096];
  if (home && home[0] == '/' && strlen(home) < len - 32 && own_private(home, 1)) {
    snprintf(cache, sizeof cache, "%s/.cache", home);
    if (mkdir(cache, 0700) == 0 || errno == EEXIST) {
      if (own_private(cache, 1)) {
        snprintf(out, len, "%s/vramshim", cache);
        return 0;
      }
    }
  }
  /* Nowhere better: the taken name, which the ledger refuses saying why. */
  return 0;
}

int vs_plat_openat(int dfd, const char *name, int flags, mode_t mode) {
  return openat(dfd, name, flags | O_NONBLOCK | O_CLOEXEC, mode);
}

int vs_plat_renameat(int dfd, const char *from, const char *to) { return renameat(dfd, from, dfd, to); }

int vs_plat_path_is_file(const char *path, int fd) {
  struct stat st, ps;
  if (lstat(path, &ps) != 0) return errno == ENOENT ? -1 : -2;
  if (fstat(fd, &st) != 0) return -2;
  return ps.st_dev == st.st_dev && ps.st_ino == st.st_ino;
}

int vs_plat_dir_each(int dfd, int (*fn)(const char *name, void *arg), void *arg) {
  DIR *d = fdopendir(dfd);
  if (!d) {
    int e = errno;
    close(dfd);
    errno = e;
    return -1;
  }
  struct dirent *e;
  while ((e = readdir(d)))
    if (fn(e->d_name, arg)) break;
  closedir(d);
  return 0;
}

/* ---- Dump folders (was src/explain/dump_file.c) ---- */
/* A directory is acceptable as it is when it is ours and private enough:
 * a world- or group-writable one would let another user swap files. */
static int check_own_dir(int fd, const char *dir, char *err, size_t errlen) {
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

/* Issue 23: a shared dump folder never becomes one user's. dir (open as
 * fd) is not ours-and-private: when it is shared (sticky: only an entry's
 * owner may remove or rename it), or we are root and it is another user's
 * private folder (the default folder made 0700 by an older version run by
 * that user), this user's dumps go to <dir>/<uid>, made 0700 and checked
 * like a private dump_dir (files are made through its descriptor, so a
 * rename of the name changes nothing). A folder anyone may write and
 * rename in (world-writable, not sticky) stays refused. fd is closed; the
 * subfolder's descriptor, -1, or -2 when dir is not shared. */
static int per_user_dir(int fd, const char *dir, char *used, size_t usedlen, char *err, size_t errlen) {
  struct stat st;
  if (fstat(fd, &st) || !S_ISDIR(st.st_mode) ||
      !((st.st_mode & S_ISVTX) || (geteuid() == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH))))) {
    close(fd);
    return -2;   /* not shared: the caller reports why dir itself is refused */
  }
  char name[24];
  snprintf(name, sizeof name, "%u", (unsigned)geteuid());
  if (snprintf(used, usedlen, "%s/%s", dir, name) >= (int)usedlen) {
    close(fd);
    snprintf(err, errlen, "dump_dir path too long");
    return -1;
  }
  if (mkdirat(fd, name, 0700) && errno != EEXIST) {
    snprintf(err, errlen, "cannot create dump_dir %s: %s", used, strerror(errno));
    close(fd);
    return -1;
  }
  int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int e = errno;
  close(fd);
  if (sub < 0) {
    snprintf(err, errlen, "dump_dir %s: %s%s", used, strerror(e),
             e == ELOOP || e == ENOTDIR ? " (a symlink or not a directory)" : "");
    return -1;
  }
  if (check_own_dir(sub, used, err, errlen)) {
    close(sub);
    return -1;
  }
  return sub;
}

int vs_plat_own_dir_open(const char *dir, char *used, size_t usedlen, char *err, size_t errlen) {
  if (!dir || !*dir) {
    snprintf(err, errlen, "dump_dir is empty");
    return -1;
  }
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp || snprintf(used, usedlen, "%s", dir) >= (int)usedlen) {
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
  /* The system's default folder is everybody's: made sticky and
   * world-writable (as /tmp), each user then writes in a folder of its own
   * (per_user_dir). The package makes it so too (tmpfiles.d). */
  int shared = !strcmp(dir, vs_plat_system_dump_dir());
  if (mkdir(dir, 0700) == 0) {
    if (shared && chmod(dir, 01777)) {
    }
  } else if (errno != EEXIST) {
    snprintf(err, errlen, "cannot create dump_dir %s: %s", dir, strerror(errno));
    return -1;
  }
  int fd = open_dir(dir);
  if (fd < 0) {
    snprintf(err, errlen, "dump_dir %s: %s%s", dir, strerror(errno),
             errno == ELOOP || errno == ENOTDIR ? " (a symlink or not a directory)" : "");
    return -1;
  }
  /* Root puts the default folder back to what the package makes it (as
   * systemd-tmpfiles does at boot): an older version made it 0700 for its
   * first user, locking every other user out. */
  struct stat st;
  if (shared && geteuid() == 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) != 01777) {
    if (fchown(fd, 0, 0) == 0 && fchmod(fd, 01777) == 0) {
    }
  }
  if (check_own_dir(fd, dir, err, errlen) == 0) return fd;
  char why[600];
  snprintf(why, sizeof why, "%s", err);
  int sub = per_user_dir(fd, dir, used, usedlen, err, errlen);
  if (sub == -2) {
    snprintf(err, errlen, "%s (and it is not a shared sticky folder, where each user writes in a folder of its own)",
             why);
    snprintf(used, usedlen, "%s", dir);
    return -1;
  }
  return sub;
}

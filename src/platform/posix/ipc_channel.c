/* ipc_channel.h on POSIX: a Unix socket per exporting process. */
#include "ipc_channel.h"

#include "random.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/file.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The pid namespace's inode when /proc says it (below 2^32 on Linux);
 * else a random tag with the top bit set, drawn once per process: its low
 * 32 bits hold the pid it was drawn in, so a forked child draws its own. */
static _Atomic uint64_t g_rand_tag;

uint64_t vs_plat_chan_tag(void) {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) == 0 && st.st_ino) return (uint64_t)st.st_ino;
  uint32_t pid = (uint32_t)getpid();
  for (;;) {
    uint64_t cur = atomic_load(&g_rand_tag);
    if (cur && (uint32_t)cur == pid) return cur;
    uint64_t r = 0;
    if (vs_plat_random(&r, sizeof r) != 0) r = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)&r << 16);
    r = (r << 32) | pid | (1ull << 63);
    if (atomic_compare_exchange_strong(&g_rand_tag, &cur, r)) return r;
  }
}

static void chan_name(char *buf, size_t n, int pid, uint64_t tag, const char *ext) {
  snprintf(buf, n, "ipc-%d-%llx.%s", pid, (unsigned long long)tag, ext);
}

/* A socket address naming <dir>/<name> through the folder's open
 * descriptor, so a long ledger_dir still fits sun_path. */
static void sock_addr(struct sockaddr_un *sa, int dfd, int pid, uint64_t tag, char *name, size_t n) {
  chan_name(name, n, pid, tag, "sock");
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  snprintf(sa->sun_path, sizeof sa->sun_path, "/proc/self/fd/%d/%s", dfd, name);
}

/* The folder may hold our IPC names: ours or root's (a root-owned one may
 * be shared with a group: the packaged root:vramshim 2770), never
 * world-writable; the ledger's own rule (dir.h). */
static int folder_ok(int dfd) {
  struct stat st;
  return fstat(dfd, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_uid == geteuid() || st.st_uid == 0) &&
         !(st.st_mode & S_IWOTH);
}

static void timeouts(int fd, long s) {
  struct timeval tv = {s, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Makes the socket just bound as name 0600 without following a link put
 * in its place (glibc's fchmodat(AT_SYMLINK_NOFOLLOW) needs 2.32; this is
 * what it does): the name opened O_PATH|O_NOFOLLOW, checked to be our
 * socket, its mode set through /proc/self/fd. 0 or -1 with errno. */
static int private_socket(int dfd, const char *name) {
  int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  int rc = -1;
  if (fstat(fd, &st) != 0) {
  } else if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
    errno = EPERM;
  } else {
    rc = chmod(proc, 0600);
  }
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

/* ---- Stale names (issue 23) ----
 * A killed exporter leaves its socket and record; the next process with
 * its pid in its pid namespace replaces them, but a container that
 * restarts has a new namespace. So the first export of a process removes
 * this user's names of dead exporters: a socket nobody listens on
 * (ECONNREFUSED), a record nobody holds locked (an exporter holds a lock
 * on its record for its life). Names appear only complete (made under a
 * hidden name, renamed when listening / locked), and a name is removed only
 * while it is still the file found stale. */
static int same_file(int dfd, const char *name, const struct stat *was) {
  struct stat now;
  return fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == was->st_dev && now.st_ino == was->st_ino;
}

/* 1 when the socket name (ours) has no listener. */
static int socket_dead(int dfd, const char *name) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  if (snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dfd, name) >= (int)sizeof sa.sun_path) return 0;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return 0;
  int dead = connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno == ECONNREFUSED;
  close(fd);
  return dead;
}

/* 1 when the record name (ours) is locked by nobody. */
static int record_dead(int dfd, const char *name) {
  int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  int dead = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return dead;
}

/* Removes this user's ipc-*.<ext> names of dead exporters from the folder
 * open as dfd (at most 256 a call: the rest go at a later first export). */
static void sweep(int dfd, const char *ext) {
  int d2 = dup(dfd);
  DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
  if (!d) {
    if (d2 >= 0) close(d2);
    return;
  }
  size_t el = strlen(ext);
  int removed = 0;
  for (struct dirent *e; removed < 256 && (e = readdir(d));) {
    const char *n = e->d_name;
    size_t nl = strlen(n);
    if (strncmp(n, "ipc-", 4) || nl < el + 6 || n[nl - el - 1] != '.' || strcmp(n + nl - el, ext)) continue;
    struct stat st;
    if (fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid()) continue;
    int dead = S_ISSOCK(st.st_mode) ? socket_dead(dfd, n) : S_ISREG(st.st_mode) ? record_dead(dfd, n) : 0;
    if (dead && same_file(dfd, n, &st) && unlinkat(dfd, n, 0) == 0) removed++;
  }
  closedir(d);
}

int vs_plat_chan_listen(int dfd, int pid) {
  if (!folder_ok(dfd)) {
    errno = EPERM;
    return -1;
  }
  sweep(dfd, "sock");
  struct sockaddr_un sa;
  char name[64], hidden[72];
  uint64_t tag = vs_plat_chan_tag();
  chan_name(name, sizeof name, pid, tag, "sock");
  /* Bound and listening under a hidden name first: the name importers (and
   * sweeps) see is always a live server's. */
  snprintf(hidden, sizeof hidden, ".%s.new", name);
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dfd, hidden);
  (void)unlinkat(dfd, hidden, 0);   /* left by a dead process with this name */
  errno = 0;
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int ok = lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0;
  /* Private before it listens: nobody can connect in between. In a
   * group-shared folder another member could swap the name for a link
   * meanwhile: the mode is set without following one, and the name must
   * still be our socket. */
  ok = ok && private_socket(dfd, hidden) == 0;
  ok = ok && listen(lfd, 64) == 0;
  ok = ok && renameat(dfd, hidden, dfd, name) == 0;   /* replaces a dead process's */
  if (!ok) {
    int saved = errno ? errno : EPERM;
    if (lfd >= 0) close(lfd);
    (void)unlinkat(dfd, hidden, 0);
    errno = saved;
    return -1;
  }
  return lfd;
}

int vs_plat_chan_accept(int lfd) {
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
      /* A peer that sends nothing must not stall every other open. */
      timeouts(fd, 5);
      return fd;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
      continue;
    }
    return -1;
  }
}

int vs_plat_chan_peer_ok(int fd) {
  struct ucred cred;
  socklen_t cl = sizeof cred;
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && (cred.uid == geteuid() || cred.uid == 0);
}

int vs_plat_chan_connect(int dfd, int pid, uint64_t tag, const char **why) {
  struct sockaddr_un sa;
  char name[64];
  sock_addr(&sa, dfd, pid, tag, name, sizeof name);
  struct stat st;
  struct ucred cred;
  socklen_t cl = sizeof cred;
  int fd = -1;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    *why = "the exporting process has no IPC socket (it has exited, or it does not run the shim with the same "
           "ledger_dir)";
  else if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
    *why = "its IPC socket is not this user's private socket";
  else if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
    *why = "no socket";
  else if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    *why = errno == ECONNREFUSED ? "the exporting process has exited" : "cannot connect to the exporting process";
    close(fd);
    fd = -1;
  } else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != geteuid()) {
    /* The name was swapped between the check and the connect (a group
     * member of a shared folder): not this user's server. */
    *why = "its IPC socket is not this user's private socket";
    close(fd);
    fd = -1;
  }
  if (fd >= 0) timeouts(fd, 10);
  return fd;
}

int vs_plat_chan_send(int fd, const void *buf, size_t n, int pass_fd) {
  struct iovec iov = {(void *)buf, n};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  if (pass_fd >= 0) {
    memset(&u, 0, sizeof u);
    m.msg_control = u.buf;
    m.msg_controllen = sizeof u.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  ssize_t w;
  do w = sendmsg(fd, &m, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  return w == (ssize_t)n ? 0 : -1;
}

int vs_plat_chan_recv(int fd, void *buf, size_t n, int *got_fd) {
  struct iovec iov = {buf, n};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = u.buf;
  m.msg_controllen = sizeof u.buf;
  if (got_fd) *got_fd = -1;
  ssize_t r;
  do r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  while (r < 0 && errno == EINTR);
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
      int f;
      memcpy(&f, CMSG_DATA(c), sizeof f);
      if (got_fd && *got_fd < 0) *got_fd = f;
      else close(f);
    }
  if (r != (ssize_t)n) {
    if (got_fd && *got_fd >= 0) close(*got_fd);
    if (got_fd) *got_fd = -1;
    return -1;
  }
  return 0;
}

void vs_plat_chan_close(int fd) {
  if (fd >= 0) close(fd);
}

void vs_plat_chan_unlink(int dfd, int pid) {
  char name[64];
  chan_name(name, sizeof name, pid, vs_plat_chan_tag(), "sock");
  (void)unlinkat(dfd, name, 0);
}

int vs_plat_rec_create(int dfd, int pid) {
  if (!folder_ok(dfd)) {
    errno = EPERM;
    return -1;
  }
  sweep(dfd, "rec");
  char name[64], hidden[72];
  chan_name(name, sizeof name, pid, vs_plat_chan_tag(), "rec");
  snprintf(hidden, sizeof hidden, ".%s.new", name);
  /* Exclusive: a file planted under the name (by a group member, between
   * the unlink and the open too) is never one we write our handles into.
   * Locked for this process's life (a sweep tells a live exporter's by the
   * lock), then given its name. */
  for (int tries = 0; tries < 4; tries++) {
    (void)unlinkat(dfd, hidden, 0);   /* left by a dead process with this name */
    int fd = openat(dfd, hidden, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || renameat(dfd, hidden, dfd, name) != 0) {
      int e = errno;
      close(fd);
      (void)unlinkat(dfd, hidden, 0);
      errno = e;
      return -1;
    }
    return fd;
  }
  errno = EEXIST;
  return -1;
}

int vs_plat_rec_open(int dfd, int pid, uint64_t tag, const char **why) {
  char name[64];
  chan_name(name, sizeof name, pid, tag, "rec");
  int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0) {
    *why = "no record of the exporting process (is it running the shim with the same ledger_dir?)";
  } else if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)) {
    *why = "its record file is not this user's private file";
    close(fd);
    fd = -1;
  }
  return fd;
}

int vs_plat_rec_write(int fd, const void *buf, size_t n, unsigned long long off) {
  return pwrite(fd, buf, n, (off_t)off) == (ssize_t)n ? 0 : -1;
}

int vs_plat_rec_read(int fd, void *buf, size_t n, unsigned long long off) {
  return pread(fd, buf, n, (off_t)off) == (ssize_t)n ? 0 : -1;
}

void vs_plat_rec_close(int fd) {
  if (fd >= 0) close(fd);
}

void vs_plat_rec_unlink(int dfd, int pid) {
  char name[64];
  chan_name(name, sizeof name, pid, vs_plat_chan_tag(), "rec");
  (void)unlinkat(dfd, name, 0);
}

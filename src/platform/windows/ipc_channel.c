/* ipc_channel.h on Windows: not available (see the header). */
#include "ipc_channel.h"

#include <errno.h>

uint64_t vs_plat_chan_tag(void) { return 0; }

int vs_plat_chan_listen(int dfd, int pid) {
  (void)dfd, (void)pid;
  errno = ENOSYS;
  return -1;
}
int vs_plat_chan_accept(int lfd) {
  (void)lfd;
  errno = ENOSYS;
  return -1;
}
int vs_plat_chan_peer_ok(int fd) {
  (void)fd;
  return 0;
}
int vs_plat_chan_connect(int dfd, int pid, uint64_t tag, const char **why) {
  (void)dfd, (void)pid, (void)tag;
  *why = "IPC of VMM blocks is not available on Windows";
  errno = ENOSYS;
  return -1;
}
int vs_plat_chan_send(int fd, const void *buf, size_t n, int pass_fd) {
  (void)fd, (void)buf, (void)n, (void)pass_fd;
  return -1;
}
int vs_plat_chan_recv(int fd, void *buf, size_t n, int *got_fd) {
  (void)fd, (void)buf, (void)n;
  if (got_fd) *got_fd = -1;
  return -1;
}
void vs_plat_chan_close(int fd) { (void)fd; }
void vs_plat_chan_unlink(int dfd, int pid) { (void)dfd, (void)pid; }

int vs_plat_rec_create(int dfd, int pid) {
  (void)dfd, (void)pid;
  errno = ENOSYS;
  return -1;
}
int vs_plat_rec_open(int dfd, int pid, uint64_t tag, const char **why) {
  (void)dfd, (void)pid, (void)tag;
  *why = "IPC records are not available on Windows";
  return -1;
}
int vs_plat_rec_write(int fd, const void *buf, size_t n, unsigned long long off) {
  (void)fd, (void)buf, (void)n, (void)off;
  errno = ENOSYS;
  return -1;
}
int vs_plat_rec_read(int fd, void *buf, size_t n, unsigned long long off) {
  (void)fd, (void)buf, (void)n, (void)off;
  errno = ENOSYS;
  return -1;
}
void vs_plat_rec_close(int fd) { (void)fd; }
void vs_plat_rec_unlink(int dfd, int pid) { (void)dfd, (void)pid; }

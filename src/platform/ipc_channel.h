/* A private channel between processes of one user that carries bytes and
 * descriptors: how the shim hands the physical memory of a VMM arena block
 * to an importing process (src/interpose/ipc_vmm.c).
 *
 * POSIX: the Unix socket <ledger_dir>/ipc-<pid>-<tag>.sock (tag: see
 * vs_plat_chan_tag), made 0600 before it listens, in the ledger folder the
 * caller opened (dfd): ours, or root's and shared with a group (the
 * packaged /run/vramshim, root:vramshim 2770), never world-writable. A
 * peer must be this user or root (SO_PEERCRED), and an importer checks
 * that the server is this user's, so a name swapped by another member of
 * the folder's group reaches nobody's memory; descriptors travel as
 * SCM_RIGHTS. Windows: not available (every call fails with ENOSYS): the
 * CUDA handle type it carries (POSIX file descriptors) does not exist
 * there, and drivers under WDDM support no CUDA IPC at all, so the shim's
 * IPC hooks pass the driver's answer through. */
#ifndef VS_PLAT_IPC_CHANNEL_H
#define VS_PLAT_IPC_CHANNEL_H
#include <stddef.h>
#include <stdint.h>

/* What tells this process's files apart from those of a process with the
 * same pid number in another pid namespace sharing the folder (containers
 * that share the host's ledger_dir): POSIX, the inode of /proc/self/ns/pid
 * (one per live namespace on the host), else a random number drawn once
 * per process; never 0. Handles carry it beside the pid. Windows: 0. */
uint64_t vs_plat_chan_tag(void);

/* The server of this process (getpid() == pid, its tag): a listening
 * channel, or -1 with errno (EPERM when the folder open as dfd is neither
 * ours nor root's, or is world-writable). The name appears only once the
 * server listens (bound under a hidden name, then renamed), and this
 * user's sockets nobody listens on any more (killed exporters) are
 * removed first. */
int vs_plat_chan_listen(int dfd, int pid);
/* The next connection, with 5 s send/receive timeouts; retries transient
 * failures itself. -1 with errno when the server cannot go on. */
int vs_plat_chan_accept(int lfd);
/* 1 when the peer of connection fd runs as this user or as root. */
int vs_plat_chan_peer_ok(int fd);
/* Connects to the server of process pid with that tag after checking it
 * is this user's private channel, before and after connecting (10 s
 * timeouts). -1 with *why, a sentence. */
int vs_plat_chan_connect(int dfd, int pid, uint64_t tag, const char **why);
/* Sends exactly n bytes, with descriptor pass_fd when >= 0. 0 or -1. */
int vs_plat_chan_send(int fd, const void *buf, size_t n, int pass_fd);
/* Receives exactly n bytes, and the descriptor sent with them into *got_fd
 * (-1 when none; got_fd may be NULL: any descriptor is closed). 0 or -1. */
int vs_plat_chan_recv(int fd, void *buf, size_t n, int *got_fd);
/* Closes a connection, a listening channel, or a received descriptor. */
void vs_plat_chan_close(int fd);
/* Removes the server name of this process (pid, its tag) from the folder
 * (at exit). */
void vs_plat_chan_unlink(int dfd, int pid);

/* The record file of an exporting process, <dir>/ipc-<pid>-<tag>.rec, which
 * names blocks inside driver chunks (src/interpose/ipc_record.c). Same
 * availability as the channel (Windows: ENOSYS; a WDDM driver refuses the
 * chunk's own cuIpcGetMemHandle before a record would be needed). */
/* This process's (pid, its tag), made fresh: one left by a dead process
 * with this name is stale and replaced, and the file is created
 * exclusively (0600) under a hidden name, so a name planted by another
 * member of the folder's group is never written into. It stays locked
 * (flock) while the descriptor is open, and gets its name only then; this
 * user's records nobody holds locked (killed exporters) are removed first.
 * Read-write. A descriptor, or -1 with errno. */
int vs_plat_rec_create(int dfd, int pid);
/* The record file of process pid with that tag, read-only, after checking
 * it is a regular file of this user that nobody else may write. -1 with
 * *why. */
int vs_plat_rec_open(int dfd, int pid, uint64_t tag, const char **why);
/* Exactly n bytes at offset off; 0 or -1 with errno. */
int vs_plat_rec_write(int fd, const void *buf, size_t n, unsigned long long off);
int vs_plat_rec_read(int fd, void *buf, size_t n, unsigned long long off);
void vs_plat_rec_close(int fd);
/* Removes this process's (pid, its tag) record file (at exit). */
void vs_plat_rec_unlink(int dfd, int pid);

#endif

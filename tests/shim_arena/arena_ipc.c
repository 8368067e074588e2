/* IPC of arena blocks between real processes, both under the shim (every
 * mode: vmm, chunks, off).
 *
 * The parent exports three blocks (two medium ones, which share a driver
 * chunk in chunks mode, and one small one in a slab) and runs children:
 *   child   opens each handle, reads the parent's bytes, writes its own,
 *           opens one twice (same pointer, reference counted), closes them;
 *           the parent then reads the child's bytes. Forged handles and a
 *           record file others could write are refused.
 *   hold    holds block 1 open while the parent frees it: its bytes stay
 *           mapped and intact; a new open of the freed block fails with the
 *           driver's word for freed memory (CUDA_ERROR_INVALID_HANDLE).
 *   hang    holds block 2 open and is killed (-9): the parent's block is
 *           unharmed and frees normally.
 *   noshim  a process without the shim: a shim handle is a clear error
 *           (never the wrong bytes), a driver handle opens.
 *   resetter  opens block 0, resets its context without closing: the
 *           opening ends with the context; it opens again afterwards.
 *   exporter  the roles reversed: the parent opens the child's block, bytes
 *           go both ways, then the exporter is killed (-9): the parent's
 *           mapping stays readable and writable until it closes it, and a
 *           new open fails.
 * The parent opening its own handle gets CUDA_ERROR_INVALID_CONTEXT (the
 * driver's answer in the exporting process). Argument: the mode. */
#include "shim_test.h"

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define NB 3
static const size_t k_size[NB] = {100 << 10, 100 << 10, 1000};
#define HEX_LEN (2 * CU_IPC_HANDLE_SIZE + 1)

static void pattern(unsigned char *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 13 + seed);
}

static int is_shim_handle(const CUipcMemHandle *h) { return !memcmp(h->reserved, "vramshim-ipc", 12); }

/* The ledger folder, from the config. */
static int ledger_dir(char *out, size_t n) {
  const char *conf = getenv("VRAMSHIM_CONFIG");
  FILE *f = conf ? fopen(conf, "r") : NULL;
  char line[512], dir[400] = "";
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, " ledger_dir = %399s", dir) == 1) break;
  if (f) fclose(f);
  if (!*dir) return -1;
  snprintf(out, n, "%s", dir);
  return 0;
}

/* The file a shim handle's exporter keeps in the ledger folder: its record
 * (chunks) or its socket (vmm). */
static int exporter_file(const CUipcMemHandle *h, int pid, char *out, size_t n) {
  char dir[400];
  if (ledger_dir(dir, sizeof dir) != 0) return -1;
  int vmm = !memcmp(h->reserved, "vramshim-ipc-v2", 15);
  /* ipc-<pid>-<tag>: the tag (the handle's last 8 bytes of its token, at
   * 40) tells pid namespaces apart (ipc_channel.h). */
  uint64_t tag;
  memcpy(&tag, h->reserved + 40, sizeof tag);
  snprintf(out, n, "%s/ipc-%d-%llx.%s", dir, pid, (unsigned long long)tag, vmm ? "sock" : "rec");
  return 0;
}

/* Checks that bytes at p are pattern(seed). */
static int bytes_are(CUdeviceptr p, size_t n, unsigned seed) {
  static unsigned char want[100 << 10], got[100 << 10];
  pattern(want, n, seed);
  if (cuMemcpyDtoH(got, p, n) != CUDA_SUCCESS) return 0;
  return memcmp(want, got, n) == 0;
}

static void fill(CUdeviceptr p, size_t n, unsigned seed) {
  static unsigned char b[100 << 10];
  pattern(b, n, seed);
  T_CU(cuMemcpyHtoD(p, b, n));
}

static int child(char **hex) {
  shim_api shim = t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  /* A record file or socket others could write is not trusted. */
  CUipcMemHandle hs;
  t_ipc_from_hex(hex[1], &hs);
  if (is_shim_handle(&hs)) {
    char f[512];
    T_CHECK(exporter_file(&hs, (int)getppid(), f, sizeof f) == 0, "the config names ledger_dir");
    T_CHECK(chmod(f, 0622) == 0, "chmod %s", f);
    CUdeviceptr q;
    CUresult r = cuIpcOpenMemHandle(&q, hs, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    T_CHECK(chmod(f, 0600) == 0, "chmod back");
    T_CHECK(r != CUDA_SUCCESS, "a group/world-writable %s is refused (%d)", f, (int)r);
  }
  CUdeviceptr p[NB];
  for (int i = 0; i < NB; i++) {
    CUipcMemHandle h;
    t_ipc_from_hex(hex[i], &h);
    T_CU(cuIpcOpenMemHandle(&p[i], h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    T_CHECK(bytes_are(p[i], k_size[i], (unsigned)i + 1), "the child reads the parent's bytes of block %d", i);
    fill(p[i], k_size[i], (unsigned)i + 101);
  }
  /* Opened twice: the same pointer, and it stays open until closed twice. */
  CUipcMemHandle h0;
  t_ipc_from_hex(hex[0], &h0);
  CUdeviceptr again = 0;
  T_CU(cuIpcOpenMemHandle(&again, h0, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  T_CHECK(again == p[0], "opening a handle twice gives the same pointer");
  T_CU(cuIpcCloseMemHandle(again));
  T_CHECK(bytes_are(p[0], k_size[0], 101), "still open after one of two closes");
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 0, "peer memory is not this process's device memory");
  for (int i = 0; i < NB; i++) T_CU(cuIpcCloseMemHandle(p[i]));
  T_CHECK(cuIpcCloseMemHandle(p[1]) != CUDA_SUCCESS, "closing twice is an error");
  st = t_stats(&shim, 0);
  T_EQ_U64(st.ipc_open_count, 0, "all closed");
  T_EQ_U64(st.ipc_open_bytes, 0, "all closed: no bytes");

  /* Forged shim handles: right magic, wrong nonce; a bad flag. */
  for (int i = 0; i < NB; i++) {
    CUipcMemHandle h;
    t_ipc_from_hex(hex[i], &h);
    if (!is_shim_handle(&h)) continue;
    h.reserved[35] ^= 0x5a;   /* in the nonce */
    CUdeviceptr q;
    CUresult r = cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    T_CHECK(r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_HANDLE, "a forged handle is refused (%d)",
            (int)r);
    t_ipc_from_hex(hex[i], &h);
    T_CHECK(cuIpcOpenMemHandle(&q, h, 0x80) == CUDA_ERROR_INVALID_VALUE, "an unknown flag is refused");
  }
  T_SAY("child: PASS");
  return 0;
}

static void say_line(const char *s) {
  fputs(s, stdout);
  fputc('\n', stdout);
  fflush(stdout);
}

static int read_line(FILE *f, char *buf, size_t n) {
  if (!fgets(buf, (int)n, f)) return -1;
  buf[strcspn(buf, "\n")] = 0;
  return 0;
}

/* Holds block 1 open while the parent frees it. */
static int hold(const char *hex) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUipcMemHandle h;
  t_ipc_from_hex(hex, &h);
  CUdeviceptr p;
  T_CU(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  fill(p, k_size[1], 201);
  say_line("ready");
  char line[64];
  T_CHECK(read_line(stdin, line, sizeof line) == 0 && !strcmp(line, "freed"), "the parent freed it");
  T_CHECK(bytes_are(p, k_size[1], 201), "memory freed by its exporter stays mapped, with its bytes");
  fill(p, k_size[1], 202);
  T_CHECK(bytes_are(p, k_size[1], 202), "and writable");
  T_CU(cuIpcCloseMemHandle(p));
  T_SAY("hold: PASS");
  return 0;
}

/* Opens and waits to be killed. */
static int hang(const char *hex) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUipcMemHandle h;
  t_ipc_from_hex(hex, &h);
  CUdeviceptr p;
  T_CU(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  fill(p, k_size[2], 55);
  say_line("ready");
  for (;;) pause();
}

/* Opens block 0, then ends its own context (a reset) without closing it:
 * the opening ends with the context, as the driver unmaps a context's
 * openings; after a new retain the handle opens again, with the bytes. */
static int resetter(const char *hex) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUipcMemHandle h;
  t_ipc_from_hex(hex, &h);
  CUdeviceptr p;
  T_CU(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  T_CHECK(bytes_are(p, k_size[0], 101), "the opened block's bytes");
  CUdevice d;
  T_CU(cuDeviceGet(&d, 0));
  T_CU(cuDevicePrimaryCtxReset(d));
  CUcontext c;
  T_CU(cuDevicePrimaryCtxRetain(&c, d));
  T_CU(cuCtxSetCurrent(c));
  CUresult r = cuIpcCloseMemHandle(p);
  T_SAY("resetter: closing an opening of the reset context: %d", (int)r);
  T_CHECK(r != CUDA_SUCCESS, "an opening ended with its context: closing it is an error (%d)", (int)r);
  CUdeviceptr q;
  T_CU(cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  T_CHECK(bytes_are(q, k_size[0], 101), "opened again in the new context, with the bytes");
  T_CU(cuIpcCloseMemHandle(q));
  T_SAY("resetter: PASS");
  return 0;
}

/* Opens a handle once; prints the result (a second process's view). */
static int open_once(const char *hex) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUipcMemHandle h;
  t_ipc_from_hex(hex, &h);
  CUdeviceptr p = 0;
  CUresult r = cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  printf("%d\n", (int)r);
  if (r == CUDA_SUCCESS) T_CU(cuIpcCloseMemHandle(p));
  return 0;
}

/* Exports a medium block (the second of a chunk, so a shim handle in
 * chunks mode too), prints its handle, then serves checks until killed. */
static int exporter(void) {
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUdeviceptr p[2];
  for (int i = 0; i < 2; i++) T_CU(cuMemAlloc(&p[i], k_size[0]));
  fill(p[1], k_size[0], 77);
  CUipcMemHandle h;
  T_CU(cuIpcGetMemHandle(&h, p[1]));
  char hex[HEX_LEN];
  t_ipc_to_hex(&h, hex);
  say_line(hex);
  char line[64];
  while (read_line(stdin, line, sizeof line) == 0)
    if (!strcmp(line, "check")) say_line(bytes_are(p[1], k_size[0], 78) ? "ok" : "bad");
  for (;;) pause();
}

typedef struct kid {
  pid_t pid;
  FILE *in, *out;   /* its stdin (we write), its stdout (we read) */
} kid;

/* Starts this program with args (NULL-terminated after argv[0]); env NULL
 * = ours. Its stdin and stdout are pipes to us. */
static kid spawn(char **args, char **env) {
  int to[2], from[2];
  T_CHECK(pipe(to) == 0 && pipe(from) == 0, "pipes");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from[1], 1);
  posix_spawn_file_actions_addclose(&fa, to[1]);
  posix_spawn_file_actions_addclose(&fa, from[0]);
  kid k;
  T_CHECK(posix_spawn(&k.pid, "/proc/self/exe", &fa, NULL, args, env ? env : environ) == 0, "spawn %s", args[1]);
  posix_spawn_file_actions_destroy(&fa);
  close(to[0]);
  close(from[1]);
  k.in = fdopen(to[1], "w");
  k.out = fdopen(from[0], "r");
  return k;
}

/* Relays a child's lines until it exits; its exit status. */
static int finish(kid *k) {
  char line[1024];
  while (fgets(line, sizeof line, k->out)) fputs(line, stdout);
  fclose(k->out);
  fclose(k->in);
  int status = 0;
  waitpid(k->pid, &status, 0);
  return status;
}

static int passed(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

/* The result another process (under the shim, or without it) gets opening hex. */
static int open_elsewhere(char *self, const char *hex, int without_shim) {
  char *args[] = {self, "open", (char *)hex, NULL};
  char **env = environ;
  static char *clean[256];
  if (without_shim) {
    int n = 0;
    for (char **e = environ; *e && n < 255; e++)
      if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "VRAMSHIM_", 9)) clean[n++] = *e;
    clean[n] = NULL;
    env = clean;
  }
  kid k = spawn(args, env);
  char line[1024];
  int r = -1;
  while (fgets(line, sizeof line, k.out))
    if (sscanf(line, "%d", &r) != 1) fputs(line, stdout);
  fclose(k.out);
  fclose(k.in);
  int status = 0;
  waitpid(k.pid, &status, 0);
  T_CHECK(passed(status), "the opening process ran (status %d)", status);
  return r;
}

int main(int argc, char **argv) {
  if (argc == 2 + NB && !strcmp(argv[1], "child")) return child(argv + 2);
  if (argc == 3 && !strcmp(argv[1], "hold")) return hold(argv[2]);
  if (argc == 3 && !strcmp(argv[1], "hang")) return hang(argv[2]);
  if (argc == 3 && !strcmp(argv[1], "open")) return open_once(argv[2]);
  if (argc == 3 && !strcmp(argv[1], "resetter")) return resetter(argv[2]);
  if (argc == 2 && !strcmp(argv[1], "exporter")) return exporter();
  T_CHECK(argc == 2, "usage: arena_ipc vmm|chunks|off");
  const char *mode = argv[1];
  signal(SIGPIPE, SIG_IGN);
  shim_api shim = t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUdeviceptr p[NB];
  for (int i = 0; i < NB; i++) {
    T_CU(cuMemAlloc(&p[i], k_size[i]));
    fill(p[i], k_size[i], (unsigned)i + 1);
  }
  CUipcMemHandle h[NB];
  char hex[NB][HEX_LEN];
  int shim_handles = 0;
  for (int i = 0; i < NB; i++) {
    T_CU(cuIpcGetMemHandle(&h[i], p[i]));
    t_ipc_to_hex(&h[i], hex[i]);
    shim_handles += is_shim_handle(&h[i]);
  }
  T_SAY("%s: %d of %d handles are shim handles", mode, shim_handles, NB);
  if (!strcmp(mode, "vmm")) T_EQ_U64(shim_handles, NB, "every VMM block gets a shim handle");
  else if (!strcmp(mode, "chunks")) T_CHECK(shim_handles >= 2, "blocks inside a chunk get shim handles");
  else T_EQ_U64(shim_handles, 0, "arena off: the driver's handles");

  /* The exporting process itself: the driver's answer. */
  for (int i = 0; i < NB; i++) {
    CUdeviceptr q;
    CUresult r = cuIpcOpenMemHandle(&q, h[i], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    T_CHECK(r == CUDA_ERROR_INVALID_CONTEXT, "opening block %d in its exporter: %d", i, (int)r);
  }

  /* Round trip: bytes both ways. */
  char *cargs[3 + NB] = {argv[0], "child", hex[0], hex[1], hex[2], NULL};
  kid k = spawn(cargs, NULL);
  int status = finish(&k);
  T_CHECK(passed(status), "the child passed (status %d)", status);
  for (int i = 0; i < NB; i++)
    T_CHECK(bytes_are(p[i], k_size[i], (unsigned)i + 101), "the parent reads the child's bytes of block %d", i);

  /* An importer whose context ends while it holds an opening. */
  char *rargs[] = {argv[0], "resetter", hex[0], NULL};
  k = spawn(rargs, NULL);
  status = finish(&k);
  T_CHECK(passed(status), "the resetter passed (status %d)", status);

  /* A process without the shim. */
  for (int i = 0; i < NB; i++) {
    int r = open_elsewhere(argv[0], hex[i], 1);
    if (is_shim_handle(&h[i]))
      T_CHECK(r != CUDA_SUCCESS, "without the shim, a shim handle is an error (%d)", r);
    else
      T_CHECK(r == CUDA_SUCCESS, "without the shim, a driver handle opens (%d)", r);
  }

  /* kill -9 of an importer holding block 2. */
  char *hargs[] = {argv[0], "hang", hex[2], NULL};
  k = spawn(hargs, NULL);
  char line[1024];
  T_CHECK(read_line(k.out, line, sizeof line) == 0 && !strcmp(line, "ready"), "the importer opened (%s)", line);
  kill(k.pid, SIGKILL);
  status = finish(&k);
  T_CHECK(WIFSIGNALED(status), "the importer was killed");
  T_CHECK(bytes_are(p[2], k_size[2], 55), "the killed importer's bytes are there");
  fill(p[2], k_size[2], 56);
  T_CHECK(bytes_are(p[2], k_size[2], 56), "the block is still the parent's");

  /* Freed while open elsewhere. */
  char *oargs[] = {argv[0], "hold", hex[1], NULL};
  k = spawn(oargs, NULL);
  T_CHECK(read_line(k.out, line, sizeof line) == 0 && !strcmp(line, "ready"), "the holder opened (%s)", line);
  T_CU(cuMemFree(p[1]));
  int r = open_elsewhere(argv[0], hex[1], 0);
  /* With the shim off the handle is the driver's, and so is the answer: the
   * real driver (an H200, driver 580.159.04) still opens a freed block that
   * another process holds open, where the sim refuses. The shim's own
   * handles (arena modes) refuse it either way. */
  if (!strcmp(mode, "off") && t_real_driver())
    T_SAY("off over the real driver: a freed block's handle, still open elsewhere, opens with %d (the driver's answer)",
          r);
  else
    T_CHECK(r == CUDA_ERROR_INVALID_HANDLE, "a freed block's handle no longer opens (%d)", r);
  fputs("freed\n", k.in);
  fflush(k.in);
  status = finish(&k);
  T_CHECK(passed(status), "the holder passed (status %d)", status);
  T_CU(cuMemFree(p[0]));
  T_CU(cuMemFree(p[2]));
  T_EQ_U64(t_stats(&shim, 0).live_bytes, 0, "zero live bytes");

  /* Roles reversed: the child exports, and is killed while we hold it. */
  char *eargs[] = {argv[0], "exporter", NULL};
  k = spawn(eargs, NULL);
  char ehex[1024];
  T_CHECK(read_line(k.out, ehex, sizeof ehex) == 0 && strlen(ehex) == HEX_LEN - 1, "the exporter's handle");
  CUipcMemHandle eh;
  t_ipc_from_hex(ehex, &eh);
  if (strcmp(mode, "off")) T_CHECK(is_shim_handle(&eh), "a shim handle from the exporter");
  CUdeviceptr q;
  T_CU(cuIpcOpenMemHandle(&q, eh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  T_CHECK(bytes_are(q, k_size[0], 77), "the importer reads the exporter's bytes");
  fill(q, k_size[0], 78);
  fputs("check\n", k.in);
  fflush(k.in);
  T_CHECK(read_line(k.out, line, sizeof line) == 0 && !strcmp(line, "ok"), "the exporter reads ours (%s)", line);
  kill(k.pid, SIGKILL);
  status = finish(&k);
  T_CHECK(WIFSIGNALED(status), "the exporter was killed");
  T_CHECK(bytes_are(q, k_size[0], 78), "memory of a killed exporter stays mapped with its bytes");
  fill(q, k_size[0], 79);
  T_CHECK(bytes_are(q, k_size[0], 79), "and writable");
  CUdeviceptr q2;
  r = (int)cuIpcOpenMemHandle(&q2, eh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  T_CHECK(r == CUDA_SUCCESS && q2 == q, "opened again while open: the same pointer (%d)", r);
  T_CU(cuIpcCloseMemHandle(q2));
  T_CU(cuIpcCloseMemHandle(q));
  r = (int)cuIpcOpenMemHandle(&q2, eh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  T_CHECK(r != CUDA_SUCCESS, "a dead exporter's handle no longer opens (%d)", r);
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.ipc_open_count, 0, "nothing open at the end");
  T_EQ_U64(st.live_bytes, 0, "zero at the end");
  T_SAY("PASS");
  return 0;
}

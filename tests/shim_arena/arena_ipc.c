/* IPC of arena blocks between two processes, both under the shim.
 *
 * chunks (and off): the parent exports three blocks (two medium ones that
 * share a driver chunk, one small one in a slab); a child process opens
 * each handle, reads the parent's bytes, writes its own, and closes them;
 * the parent then reads the child's bytes. A forged shim handle is refused.
 * vmm: cuIpcGetMemHandle fails with the driver's error for VMM memory and
 * the log says to set `arena = chunks`. Argument: the mode. */
#include "shim_test.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define NB 3
static const size_t k_size[NB] = {100 << 10, 100 << 10, 1000};

static void pattern(unsigned char *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 13 + seed);
}

/* The exporter's record file, from the config's ledger_dir. */
static int record_path(char *out, size_t n) {
  const char *conf = getenv("VRAMSHIM_CONFIG");
  FILE *f = conf ? fopen(conf, "r") : NULL;
  char line[512], dir[400] = "";
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, " ledger_dir = %399s", dir) == 1) break;
  if (f) fclose(f);
  if (!*dir) return -1;
  snprintf(out, n, "%s/ipc-%d.rec", dir, (int)getppid());
  return 0;
}

static int child(char **hex) {
  shim_api shim = t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  /* A record file others could write is not trusted. */
  char rec[512];
  CUipcMemHandle hs;
  t_ipc_from_hex(hex[1], &hs);
  if (!memcmp(hs.reserved, "vramshim-ipc", 12)) {
    T_CHECK(record_path(rec, sizeof rec) == 0, "the config names ledger_dir");
    T_CHECK(chmod(rec, 0622) == 0, "chmod %s", rec);
    CUdeviceptr q;
    CUresult r = cuIpcOpenMemHandle(&q, hs, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    T_CHECK(chmod(rec, 0600) == 0, "chmod back");
    T_CHECK(r == CUDA_ERROR_INVALID_VALUE, "a group/world-writable record is refused (%d)", (int)r);
  }
  CUdeviceptr p[NB];
  static unsigned char want[100 << 10], got[100 << 10];
  for (int i = 0; i < NB; i++) {
    CUipcMemHandle h;
    t_ipc_from_hex(hex[i], &h);
    T_CU(cuIpcOpenMemHandle(&p[i], h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    pattern(want, k_size[i], (unsigned)i + 1);
    T_CU(cuMemcpyDtoH(got, p[i], k_size[i]));
    T_CHECK(memcmp(want, got, k_size[i]) == 0, "the child reads the parent's bytes of block %d", i);
    pattern(want, k_size[i], (unsigned)i + 101);
    T_CU(cuMemcpyHtoD(p[i], want, k_size[i]));
  }
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.ipc_open_count, NB, "peer blocks open");
  T_EQ_U64(st.live_bytes, 0, "peer memory is not this process's device memory");
  for (int i = 0; i < NB; i++) T_CU(cuIpcCloseMemHandle(p[i]));
  T_CHECK(cuIpcCloseMemHandle(p[1]) != CUDA_SUCCESS, "closing twice is an error");
  st = t_stats(&shim, 0);
  T_EQ_U64(st.ipc_open_count, 0, "all closed");
  T_EQ_U64(st.ipc_open_bytes, 0, "all closed: no bytes");

  /* A forged shim handle: right magic, wrong nonce. */
  CUipcMemHandle h;
  t_ipc_from_hex(hex[1], &h);
  if (!memcmp(h.reserved, "vramshim-ipc", 12)) {
    h.reserved[35] ^= 0x5a;   /* in the nonce */
    CUdeviceptr q;
    T_CHECK(cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_ERROR_INVALID_VALUE,
            "a forged handle is refused");
  }
  T_SAY("child: PASS");
  return 0;
}

/* Bytes the shim logged since `from` (VRAMSHIM_LOG=...,file:PATH). */
static int log_says(long from, const char *what) {
  const char *spec = getenv("VRAMSHIM_LOG");
  const char *f = spec ? strstr(spec, "file:") : NULL;
  if (!f) return 0;
  FILE *fp = fopen(f + 5, "r");
  if (!fp) return 0;
  fseek(fp, from, SEEK_SET);
  char line[1024];
  int found = 0;
  while (!found && fgets(line, sizeof line, fp)) found = strstr(line, what) != NULL;
  fclose(fp);
  return found;
}

static long log_size(void) {
  const char *spec = getenv("VRAMSHIM_LOG");
  const char *f = spec ? strstr(spec, "file:") : NULL;
  FILE *fp = f ? fopen(f + 5, "r") : NULL;
  if (!fp) return 0;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fclose(fp);
  return n;
}

int main(int argc, char **argv) {
  if (argc == 2 + NB && !strcmp(argv[1], "child")) return child(argv + 2);
  int vmm = argc > 1 && !strcmp(argv[1], "vmm");
  shim_api shim = t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  long log_from = log_size();
  CUdeviceptr p[NB];
  static unsigned char buf[100 << 10];
  for (int i = 0; i < NB; i++) {
    T_CU(cuMemAlloc(&p[i], k_size[i]));
    pattern(buf, k_size[i], (unsigned)i + 1);
    T_CU(cuMemcpyHtoD(p[i], buf, k_size[i]));
  }
  CUipcMemHandle h[NB];
  if (vmm) {
    CUresult r = cuIpcGetMemHandle(&h[0], p[0]);
    T_CHECK(r != CUDA_SUCCESS, "a VMM-backed block cannot be exported");
    T_CHECK(r == CUDA_ERROR_INVALID_VALUE, "the driver's error for VMM memory (the sim says INVALID_VALUE): %d", (int)r);
    T_CHECK(log_says(log_from, "set `arena = chunks` for tenant"), "the log says what to do");
    for (int i = 0; i < NB; i++) T_CU(cuMemFree(p[i]));
    T_SAY("vmm: the clear failure: PASS");
    return 0;
  }
  char hex[NB][2 * sizeof h[0].reserved + 1];
  int shim_handles = 0;
  for (int i = 0; i < NB; i++) {
    T_CU(cuIpcGetMemHandle(&h[i], p[i]));
    t_ipc_to_hex(&h[i], hex[i]);
    shim_handles += !memcmp(h[i].reserved, "vramshim-ipc", 12);
  }
  T_SAY("%d of %d handles carry an offset (shim handles)", shim_handles, NB);
  if (!strcmp(argv[1], "chunks")) T_CHECK(shim_handles >= 2, "blocks inside a chunk get shim handles");
  else T_EQ_U64(shim_handles, 0, "arena off: the driver's handles");
  char *args[3 + NB] = {argv[0], "child", hex[0], hex[1], hex[2], NULL};
  pid_t pid;
  T_CHECK(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) == 0, "spawn the child");
  int status = 0;
  waitpid(pid, &status, 0);
  T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child passed (status %d)", status);
  static unsigned char want[100 << 10];
  for (int i = 0; i < NB; i++) {
    pattern(want, k_size[i], (unsigned)i + 101);
    T_CU(cuMemcpyDtoH(buf, p[i], k_size[i]));
    T_CHECK(memcmp(want, buf, k_size[i]) == 0, "the parent reads the child's bytes of block %d", i);
  }
  for (int i = 0; i < NB; i++) T_CU(cuMemFree(p[i]));
  T_EQ_U64(t_stats(&shim, 0).live_bytes, 0, "zero at the end");
  T_SAY("PASS");
  return 0;
}

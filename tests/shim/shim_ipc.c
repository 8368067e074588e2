/* Inter-process memory through the shim: a parent allocates and exports a
 * handle, a child process (a fresh exec, as CUDA requires) opens it, reads
 * the parent's bytes and closes it. The child's shim records the peer
 * memory as opened (ipc_open_*), not as its own device memory, and both
 * processes end at zero. Linked with -lcuda. */
#include "shim_test.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define SIZE (64 << 10)

static void pattern(unsigned char *b, size_t n) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 13 + 7);
}

static int child(const char *hex) {
  shim_api shim = t_shim();
  sim_api sim = t_sim(RTLD_DEFAULT);
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUipcMemHandle h;
  t_ipc_from_hex(hex, &h);
  CUdeviceptr p;
  T_CU(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  unsigned char want[SIZE], got[SIZE];
  pattern(want, SIZE);
  T_CU(cuMemcpyDtoH(got, p, SIZE));
  T_CHECK(memcmp(want, got, SIZE) == 0, "the child reads the parent's bytes");
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.ipc_open_count, 1, "one peer allocation open");
  T_CHECK(st.ipc_open_bytes >= SIZE, "its size recorded (%llu)", (unsigned long long)st.ipc_open_bytes);
  T_EQ_U64(st.live_bytes, 0, "peer memory is not this process's device memory");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_IPC_OPEN], 1, "the open counted");
  t_match_live(&shim, &sim, 0, "child, handle open");
  T_CU(cuIpcCloseMemHandle(p));
  st = t_stats(&shim, 0);
  T_EQ_U64(st.ipc_open_count, 0, "closed");
  T_EQ_U64(st.ipc_open_bytes, 0, "closed: no bytes");
  T_EQ_U64(st.driver_calls[VRAMSHIM_CALL_IPC_CLOSE], 1, "the close counted");
  T_CHECK(cuIpcCloseMemHandle(p) != CUDA_SUCCESS, "closing twice is the driver's error");
  T_EQ_U64(t_stats(&shim, 0).driver_calls[VRAMSHIM_CALL_IPC_CLOSE], 1, "a second close of an unknown pointer is not counted");
  T_SAY("child: PASS");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "child")) return child(argv[2]);
  shim_api shim = t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUdeviceptr p;
  T_CU(cuMemAlloc(&p, SIZE));
  unsigned char buf[SIZE];
  pattern(buf, SIZE);
  T_CU(cuMemcpyHtoD(p, buf, SIZE));
  CUipcMemHandle h;
  CUresult r = cuIpcGetMemHandle(&h, p);
  if (r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_NOT_SUPPORTED) {
    T_SAY("SKIP the driver has no IPC (%d)", (int)r);
    return 77;
  }
  T_CHECK(r == CUDA_SUCCESS, "cuIpcGetMemHandle: %d", (int)r);
  char hex[2 * sizeof h.reserved + 1];
  t_ipc_to_hex(&h, hex);
  char *args[] = {argv[0], "child", hex, NULL};
  pid_t pid;
  T_CHECK(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) == 0, "spawn the child");
  int status = 0;
  waitpid(pid, &status, 0);
  T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child passed (status %d)", status);
  T_EQ_U64(t_stats(&shim, 0).live_bytes, SIZE, "the parent still holds its allocation");
  T_CU(cuMemFree(p));
  T_EQ_U64(t_stats(&shim, 0).live_bytes, 0, "zero at the end");
  T_SAY("PASS");
  return 0;
}

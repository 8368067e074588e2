/* The Windows tool (cmake/windows.cmake) is built without run.c and
 * replay_shim.c: both start a program under the shim, which on Windows is
 * the injecting launcher of issue 12's interposer part (a suspended
 * CreateProcess + the shim DLL injected), not LD_PRELOAD + exec. Until that
 * launcher is in the build, these say so and fail; they are replaced by
 * the launcher's versions, never shipped as done. */
#include <stdio.h>

#include "commands.h"
#include "replay.h"

int cmd_run(int argc, char **argv) {
  (void)argc, (void)argv;
  fprintf(stderr, "vramshim: run: this Windows build has no launcher yet (it injects the shim DLL; see "
                  "docs/windows.md)\n");
  return 2;
}

static int shim_run(const vs_policy *self, const char *path, const vs_trace *t, const vs_replay_opts *o,
                    uint64_t resolution, struct vs_progress *pr, const char *label, struct vs_replay_result *out,
                    char *err, size_t errlen) {
  (void)path, (void)t, (void)o, (void)resolution, (void)pr, (void)label, (void)out;
  snprintf(err, errlen, "policy %s needs the shim under a child process, which this Windows build cannot start yet",
           self->name);
  return -1;
}

#define SHIM_POLICY(id, nm, text) const vs_policy id = {.name = nm, .summary = text, .run = shim_run}
SHIM_POLICY(vs_policy_shim_off, "shim-off", "the real shim, arena = off (not in this Windows build yet)");
SHIM_POLICY(vs_policy_shim_vmm, "shim-vmm", "the real shim, arena = vmm (not in this Windows build yet)");
SHIM_POLICY(vs_policy_shim_chunks, "shim-chunks", "the real shim, arena = chunks (not in this Windows build yet)");

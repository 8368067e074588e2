/* The Windows tool (cmake/windows.cmake) is built without replay_shim.c:
 * its policies run the replay child under LD_PRELOAD, and nobody has yet
 * made it start that child through the injecting launcher (launch.h).
 * Until then these say so and fail; never shipped as done. (`run` is
 * run.c on both systems.) */
#include <stdio.h>

#include "commands.h"
#include "replay.h"

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

/* Threshold actions on Windows: not yet. The recorder (`vramshim record`)
 * is a Linux service first (systemd unit, Kubernetes DaemonSet); starting
 * an action here says so instead of failing silently. The checks of
 * `vramshim check` and the default database path work. */
#include "action.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

vs_plat_action *vs_plat_action_start(const char *program, const char *const *env, char *err, size_t errlen) {
  (void)env;
  snprintf(err, errlen, "cannot start %s: threshold actions are not supported on Windows yet", program);
  return NULL;
}

long vs_plat_action_read(vs_plat_action *a, char *buf, size_t len) {
  (void)a, (void)buf, (void)len;
  return -1;
}

int vs_plat_action_done(vs_plat_action *a, int *status) {
  (void)a;
  *status = -1;
  return 1;
}

void vs_plat_action_kill(vs_plat_action *a) { (void)a; }
void vs_plat_action_free(vs_plat_action *a) { (void)a; }

int vs_plat_program_check(const char *program, char *err, size_t errlen) {
  struct _stat64 st;
  if (_stat64(program, &st)) {
    snprintf(err, errlen, "%s: not found", program);
    return -1;
  }
  if (!(st.st_mode & _S_IFREG)) {
    snprintf(err, errlen, "%s: not a regular file", program);
    return -1;
  }
  return 0;
}

const char *vs_plat_system_state_dir(void) {
  static char dir[512];
  const char *pd = getenv("ProgramData");
  snprintf(dir, sizeof dir, "%s\\vramshim", pd && *pd && strlen(pd) < 400 ? pd : "C:\\ProgramData");
  return dir;
}

void vs_plat_default_state_file(const char *name, int for_writing, char *out, size_t len, int *fallback) {
  (void)for_writing;
  const char *la = getenv("LOCALAPPDATA");
  *fallback = la && *la;
  if (*fallback) snprintf(out, len, "%s\\vramshim\\%s", la, name);
  else snprintf(out, len, "%s\\%s", vs_plat_system_state_dir(), name);
}

/* Which tenant a process belongs to, and what happens with the config at
 * program start. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"

#include "config.h"
#include "log.h"
#include "text_escape.h"
#include "procenv.h"

/* Never cut: a name longer than VS_NAME_MAX - 1 bytes becomes "" (two
 * long names would otherwise become one). */
static void copy_name(char out[VS_NAME_MAX], const char *s) {
  size_t n = strnlen(s, VS_NAME_MAX);
  if (n >= VS_NAME_MAX) n = 0;
  memcpy(out, s, n);
  out[n] = 0;
}

static const char *base_name(const char *path) { return vs_plat_base_name(path); }

const char *vs_config_select_tenant(const vs_config *cfg, const char *env_tenant, const char *exe,
                                    char name[VS_NAME_MAX]) {
  if (env_tenant && *env_tenant) {
    if (!vs_tenant_name_ok(env_tenant)) {
      snprintf(name, VS_NAME_MAX, "%s", VS_DEFAULT_TENANT);
      return NULL;
    }
    copy_name(name, env_tenant);
    return "VRAMSHIM_TENANT";
  }
  if (exe && *exe) {
    const char *b = base_name(exe);
    for (int i = 0; i < cfg->ntenants; i++)
      for (int j = 0; j < cfg->tenants[i].nexes; j++)
        if (!strcmp(cfg->tenants[i].exes[j], b)) {
          snprintf(name, VS_NAME_MAX, "%s", cfg->tenants[i].name);
          return "match_exe";
        }
  }
  snprintf(name, VS_NAME_MAX, "%s", VS_DEFAULT_TENANT);
  return "default";
}

void vs_config_bad_tenant(const char *env_tenant, char *err, size_t errlen) {
  char shown[4 * VS_NAME_MAX];
  size_t n = strlen(env_tenant);
  vs_text_escape_n(env_tenant, n < VS_NAME_MAX ? n : VS_NAME_MAX, shown, sizeof shown);
  snprintf(err, errlen, "VRAMSHIM_TENANT='%s%s' (%zu bytes): %s", shown, n < VS_NAME_MAX ? "" : "...", n,
           VS_TENANT_NAME_RULE);
}

void vs_self_exe(const char *argv0, char out[VS_NAME_MAX]) {
  char path[4096];
  if (vs_plat_self_exe(path, sizeof path) == 0) {
    copy_name(out, base_name(path));
    return;
  }
  copy_name(out, argv0 ? base_name(argv0) : "");
}

int vs_config_load_env(vs_config *cfg, char *err, size_t errlen) {
  const char *path = vs_plat_getenv("VRAMSHIM_CONFIG");
  if (!path || !*path) {
    if (access(VS_DEFAULT_CONFIG, F_OK) != 0 && errno == ENOENT) {
      vs_config_defaults(cfg);
      return 1;
    }
    path = VS_DEFAULT_CONFIG;
  }
  return vs_config_parse_file(path, cfg, err, errlen) ? -1 : 0;
}

int vs_config_on_error(const char *err) {
  const char *mode = vs_plat_getenv("VRAMSHIM_ON_ERROR");
  if (mode && !strcmp(mode, "passthrough")) {
    vs_log(VS_LOG_ERROR, "%s", err);
    vs_log(VS_LOG_ERROR, "config error: VRAMSHIM_ON_ERROR=passthrough, running WITHOUT quota enforcement");
    return 0;
  }
  vs_log(VS_LOG_ERROR, "%s", err);
  vs_log(VS_LOG_ERROR,
         "config error: stopping (exit status %d); fix the file, or set VRAMSHIM_ON_ERROR=passthrough to run "
         "without enforcement",
         VS_EXIT_CONFIG);
  /* _exit: this runs at load, before the program; its atexit handlers and
   * stdio buffers are not ours to run. */
  _exit(VS_EXIT_CONFIG);
}

#include "settings.h"

#include "dir.h"
#include "hami_env.h"
#include "log.h"
#include "procenv.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

static vs_settings g_settings;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load(void) {
  vs_settings *s = &g_settings;
  char err[VS_ERR_MAX];
  s->enforce = 1;
  int r = vs_config_load_env(&s->config, err, sizeof err);
  if (r >= 0 && vs_config_resolve_ledger_dir(&s->config, 1, err, sizeof err)) r = -1;
  if (r < 0) {
    vs_config_on_error(err);  /* exits 78 unless VRAMSHIM_ON_ERROR=passthrough */
    vs_config_defaults(&s->config);
    s->enforce = 0;
  }
  s->from_file = r == 0;
  char exe[VS_NAME_MAX];
  vs_self_exe(NULL, exe);
  s->tenant_how = vs_config_select_tenant(&s->config, vs_plat_getenv("VRAMSHIM_TENANT"), exe, s->tenant);
  if (!s->tenant_how) {   /* a bad name is a config error: never cut, never merged with another */
    vs_config_bad_tenant(vs_plat_getenv("VRAMSHIM_TENANT"), err, sizeof err);
    vs_config_on_error(err);  /* exits 78 unless VRAMSHIM_ON_ERROR=passthrough */
    s->enforce = 0;
    s->tenant_how = "default";
  }
  /* HAMi-core's CUDA_DEVICE_MEMORY_LIMIT[_<i>]: the config when there is no file. */
  int hami = vs_hami_apply_env(environ, &s->config, r != 1, s->tenant, err, sizeof err);
  if (hami < 0) {
    vs_config_on_error(err);  /* exits 78 unless VRAMSHIM_ON_ERROR=passthrough */
    s->enforce = 0;
  }
  VS_INFO("tenant %s (by %s), config %s", s->tenant, s->tenant_how,
          s->from_file || hami > 0 ? s->config.file : "built-in defaults");
  /* A name without a section (a typo, say) never escapes the default's
   * limit: it follows [tenant default] under its own name. */
  if (s->from_file && s->enforce && !vs_config_tenant(&s->config, s->tenant)) {
    const vs_tenant_cfg *d = vs_config_tenant(&s->config, VS_DEFAULT_TENANT);
    char l[32];
    if (d && strcmp(s->tenant, VS_DEFAULT_TENANT))
      VS_WARN("tenant '%s' has no section in %s: it follows [tenant default]'s rules (limit %s) under its own name",
              s->tenant, s->config.file, d->has_limit ? vs_size_str(d->limit, l, sizeof l) : "none");
  }
}

const vs_settings *vs_settings_get(void) {
  pthread_once(&g_once, load);
  return &g_settings;
}

vs_cfg_arena vs_settings_arena(int card_has_vmm) {
  vs_cfg_arena m = vs_settings_get()->config.arena;
  if (m == VS_CFG_ARENA_AUTO || (m == VS_CFG_ARENA_VMM && !card_has_vmm))
    return card_has_vmm ? VS_CFG_ARENA_VMM : VS_CFG_ARENA_CHUNKS;
  return m;
}

int vs_settings_env_off(const char *name) {
  const char *e = vs_plat_getenv(name);
  return e && (!strcmp(e, "off") || !strcmp(e, "0"));
}

int vs_settings_env_off_once(_Atomic int *cache, const char *name) {
  int v = atomic_load_explicit(cache, memory_order_relaxed);
  if (__builtin_expect(v >= 0, 1)) return v;
  v = vs_settings_env_off(name);
  atomic_store(cache, v);
  return v;
}

int vs_settings_ledger_dir_open(int create) {
  /* The ledger's own rules (dir.h): made owner-only, links refused, a
   * folder another user could take over refused (the ledger itself opens
   * it the same way, so IPC files never land where the ledger would not). */
  char err[512];
  errno = 0;
  int dfd = vs_plat_private_dir_open(vs_settings_get()->config.ledger_dir, "ledger dir", create, err, sizeof err);
  if (dfd < 0 && !errno) errno = EACCES;   /* refused by its checks: the callers say strerror(errno) */
  return dfd;
}

void vs_settings_ledger_dir_unlink(void (*unlink_in)(int dfd, int pid)) {
  int dfd = vs_settings_ledger_dir_open(0);
  if (dfd < 0) return;
  unlink_in(dfd, (int)getpid());
  close(dfd);
}

/* What this process runs under: the config file (loaded once, at start-up)
 * and the tenant chosen for it. Everything that depends on configuration
 * (the arena mode, quotas, dumps, the timeline) reads it from here.
 *
 * Loading follows BRIEF: $VRAMSHIM_CONFIG, else /etc/vramshim.conf, else
 * built-in defaults. A config error ends the process with exit status 78
 * and the file:line message, unless VRAMSHIM_ON_ERROR=passthrough, in
 * which case the process runs with defaults and `enforce` is 0. */
#ifndef VS_SETTINGS_H
#define VS_SETTINGS_H

#include "config.h"

#include <stdatomic.h>

typedef struct vs_settings {
  vs_config config;          /* the parsed file, or defaults */
  int from_file;             /* 1 when a file was loaded */
  int enforce;               /* 0 after a config error under passthrough: no quotas */
  char tenant[VS_NAME_MAX];  /* this process's tenant */
  const char *tenant_how;    /* "VRAMSHIM_TENANT", "match_exe" or "default" */
} vs_settings;

/* Loads on first call (thread-safe, at most once per process; a forked
 * child keeps its parent's settings). Never NULL. */
const vs_settings *vs_settings_get(void);
/* The ledger folder (where the IPC records and sockets live too), opened
 * as a directory descriptor without following a symlink; made 0700 first
 * when create is set. -1 with errno on failure. */
int vs_settings_ledger_dir_open(int create);
/* Exit-time cleanup of this process's own files there: calls
 * unlink_in(folder, this pid); nothing when the folder cannot be opened. */
void vs_settings_ledger_dir_unlink(void (*unlink_in)(int dfd, int pid));

/* 1 when the environment variable `name` turns a mechanism off ("off" or
 * "0"), for the switches read outside the config (VRAMSHIM_STREAM_ORDER,
 * VRAMSHIM_PROGRAM_SYNCS, VRAMSHIM_ARENA_ASYNC). */
int vs_settings_env_off(const char *name);
/* The same, read once: *cache starts at -1 and keeps the answer (a hot
 * path pays one relaxed load). */
int vs_settings_env_off_once(_Atomic int *cache, const char *name);

/* The arena this process uses on a card that does (or does not) support
 * VMM: VS_CFG_ARENA_OFF, _VMM or _CHUNKS; `auto`, or `vmm` on a card
 * without VMM, resolves to what the card can do. */
vs_cfg_arena vs_settings_arena(int card_has_vmm);

#endif

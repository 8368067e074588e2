/* The config file: [global], [card N|GPU-UUID], [tenant NAME] (see docs/config.md).
 *
 * Parsing checks everything that does not depend on a card: syntax, known
 * sections and keys, duplicates, sizes, durations, values, and reserve above
 * limit when both are in the same unit. vs_config_check_cards() adds what
 * needs a capacity (percentages, overcommitted reservations). Every error is
 * one line "FILE:LINE: reason" (LINE omitted when no line is involved). */
#ifndef VS_TENANT_CONFIG_H
#define VS_TENANT_CONFIG_H
#include <stddef.h>
#include <stdint.h>

#include "dir.h" /* vs_plat_system_ledger_dir */
#include "units.h"

#define VS_CFG_MAX_TENANTS 32
#define VS_CFG_MAX_CARDS 16     /* [card] sections */
#define VS_CFG_MAX_CARD_INDEX 64 /* card indexes 0..63 */
#define VS_CFG_MAX_CARD_UUIDS 8  /* UUIDs in one tenant's `cards` */
#define VS_CFG_MAX_EXES 8       /* match_exe names per tenant */
#define VS_NAME_MAX 64          /* tenant names, exe names, UUIDs (with NUL) */
#define VS_PATH_MAX 256
#define VS_ERR_MAX 512          /* a good size for error buffers */
/* VS_NO_LIMIT (no limit): units.h */
#define VS_DEFAULT_TENANT "default"
/* /run/vramshim (root:vramshim 2770, packaging/tmpfiles.d), or
 * %ProgramData%\vramshim on Windows: src/platform/dir.h. */
#define VS_DEFAULT_LEDGER_DIR vs_plat_system_ledger_dir()
#define VS_DEFAULT_DUMP_DIR vs_plat_system_dump_dir()
#define VS_DEFAULT_CONFIG vs_plat_system_config_path() /* /etc/vramshim.conf, %ProgramData%\vramshim\vramshim.conf */
#define VS_CFG_MAX_WAIT_MS (24ull * 3600 * 1000) /* on_limit = wait:D at most 24 h */
#define VS_EXIT_CONFIG 78       /* EX_CONFIG of sysexits.h */

/* The [global] arena key. Its own names: the arena library has vs_arena_mode. */
typedef enum { VS_CFG_ARENA_AUTO = 0, VS_CFG_ARENA_VMM, VS_CFG_ARENA_CHUNKS, VS_CFG_ARENA_OFF } vs_cfg_arena;

/* Threshold actions of a tenant or of a whole card: the programs
 * `vramshim record` runs (absolute paths; "" when none) and their lines. */
typedef struct vs_actions {
  char on_warn[VS_PATH_MAX];
  char on_refuse[VS_PATH_MAX];
  int on_warn_line, on_refuse_line;
} vs_actions;

typedef struct vs_tenant_cfg {
  char name[VS_NAME_MAX];
  int line;                     /* of the [tenant] header */
  vs_size reserve;              /* 0 B when not set */
  int reserve_line;
  vs_size limit;
  int has_limit, limit_line;
  uint32_t warn_ppm;            /* of the limit; 0 = no warning */
  uint64_t wait_ms;             /* on_limit: 0 = fail, else wait:DURATION */
  /* on_limit = spill:MAX (issue 13): a refused cuMemAlloc is served from
   * host memory the device can address, up to MAX spilled bytes for the
   * tenant on each card (all its processes). has_spill = 0 otherwise. */
  int has_spill;
  vs_size spill_max;
  uint64_t cards_mask;          /* bit i = card i (physical index, docs/config.md); all ones when not set */
  /* `cards` entries naming a card by UUID (issue 22): the card is the
   * tenant's when its UUID is listed here or its index in cards_mask. */
  char cards_uuid[VS_CFG_MAX_CARD_UUIDS][VS_NAME_MAX];
  int ncards_uuid;
  char exes[VS_CFG_MAX_EXES][VS_NAME_MAX];
  int nexes;
  /* A limit of its own on card i, in bytes, when card_limit[i] != 0; it
   * replaces `limit` on that card. No config key sets it: only HAMi-core's
   * CUDA_DEVICE_MEMORY_LIMIT_<i> does (hami_env.h). */
  uint64_t card_limit[VS_CFG_MAX_CARD_INDEX];
  /* Threshold actions (issue 26): on_warn = run:PROGRAM, on_refuse =
   * run:PROGRAM; an absolute path, "" when not set. Run by `vramshim
   * record`, never by the shim (docs/history.md). */
  vs_actions actions;
} vs_tenant_cfg;

/* Whether a tenant's `cards` take the card of physical index `index` (-1:
 * not known to this process) and UUID `uuid` (may be NULL): every card when
 * the key is not set. */
int vs_tenant_on_card(const vs_tenant_cfg *t, int index, const char *uuid);

typedef struct vs_card_cfg {
  int index;                    /* -1 for a [card GPU-...] section */
  char uuid[VS_NAME_MAX];       /* "" for a card by index */
  int line;
  vs_size headroom;             /* 0 B when not set */
  int headroom_line;
  vs_actions actions;           /* for every tenant on the card without an action of its own */
} vs_card_cfg;

#define VS_CFG_RELEASE_DECAY_DEFAULT_MS 10000ull
#define VS_CFG_RELEASE_DECAY_MAX_MS 86400000ull

typedef struct vs_config {
  char file[VS_PATH_MAX];       /* as named in messages */
  uint64_t generation;          /* FNV-1a of the file's bytes: which config a process runs */
  vs_cfg_arena arena;
  vs_size release_threshold;
  int has_release_threshold;
  char ledger_dir[VS_PATH_MAX];
  int has_ledger_dir;           /* set in the file (else the default, resolved by vs_config_resolve_ledger_dir) */
  char dump_dir[VS_PATH_MAX];
  int dump_signal;              /* 0 = none, else SIGUSR1 / SIGUSR2 */
  uint64_t timeline_interval_ms;
  /* Issue 23: how long cached memory beyond release_threshold stays after
   * it was last needed (the arena's decay); the background thread applies
   * it to idle processes too. */
  uint64_t release_decay_ms;
  vs_card_cfg cards[VS_CFG_MAX_CARDS];
  int ncards;
  vs_tenant_cfg tenants[VS_CFG_MAX_TENANTS];
  int ntenants;
} vs_config;

/* The built-in config when there is no file: defaults, no cards, no tenants. */
void vs_config_defaults(vs_config *cfg);

/* 0 on success; -1 with "FILE:LINE: reason" in err. name is what messages
 * call the text (e.g. a file name or "<string>"). */
int vs_config_parse_file(const char *path, vs_config *cfg, char *err, size_t errlen);
int vs_config_parse_string(const char *text, const char *name, vs_config *cfg, char *err, size_t errlen);
/* Same as vs_config_parse_file, but goes on after an error: errs holds
 * every error found, one "FILE:LINE: reason" per line (as many as fit);
 * for `vramshim check` (issue 10). */
int vs_config_parse_file_all(const char *path, vs_config *cfg, char *errs, size_t errlen);

/* Checks the config against cards of these capacities (card i has caps[i]):
 * percentages resolved, reserve <= limit, reservations + headroom <= capacity.
 * [card GPU-...] sections are checked against every capacity given. */
int vs_config_check_cards(const vs_config *cfg, const uint64_t *caps, int ncaps, char *err, size_t errlen);

/* FNV-1a of a text: the generation of a config made from it. */
uint64_t vs_config_hash(const char *text, size_t len);

/* Lookups; NULL / -1 when absent. */
const vs_tenant_cfg *vs_config_tenant(const vs_config *cfg, const char *name);
/* The section whose rules (limit, warn_at, on_limit) the tenant follows:
 * its own, else [tenant default]'s (BRIEF: a tenant without a section
 * follows default's rules under its own name), else NULL. */
const vs_tenant_cfg *vs_config_rules(const vs_config *cfg, const char *name);
/* The [card] section for a card: by UUID first (uuid may be NULL), then by index. */
const vs_card_cfg *vs_config_card(const vs_config *cfg, int index, const char *uuid);

/* ---- Tenant selection ---------------------------------------------------- */
/* A tenant name (a section, $VRAMSHIM_TENANT, a match_exe result): 1 to 63
 * bytes of letters, digits, '_', '-' and '.' (docs/config.md), so that every
 * output (the ledger's fixed-size entries, log lines, status, Prometheus
 * labels, file names) holds it whole. A name outside is an error, never cut. */
#define VS_TENANT_NAME_RULE "a tenant name is 1 to 63 bytes of letters, digits, '_', '-' and '.'"
int vs_tenant_name_ok(const char *s);
/* $VRAMSHIM_TENANT (env_tenant, may be NULL or ""), else the tenant whose
 * match_exe names exe (a basename or a path; may be NULL), else "default".
 * Writes the name (which need not have a section) and returns how it was
 * chosen: "VRAMSHIM_TENANT", "match_exe" or "default". NULL when
 * $VRAMSHIM_TENANT is no valid name (vs_tenant_name_ok): a config error
 * (name is then "default"; vs_config_bad_tenant says why). */
const char *vs_config_select_tenant(const vs_config *cfg, const char *env_tenant, const char *exe,
                                    char name[VS_NAME_MAX]);
/* The error line of a $VRAMSHIM_TENANT that is no valid name (escaped). */
void vs_config_bad_tenant(const char *env_tenant, char *err, size_t errlen);
/* The basename of /proc/self/exe, else of argv0 (may be NULL); "" when it
 * is longer than a name can be (it then matches no match_exe). */
void vs_self_exe(const char *argv0, char out[VS_NAME_MAX]);

/* ---- Loading at program start -------------------------------------------- */
/* Loads $VRAMSHIM_CONFIG, else /etc/vramshim.conf. Returns 1 when neither is
 * set nor present (cfg holds the defaults), 0 when loaded, -1 on error. */
int vs_config_load_env(vs_config *cfg, char *err, size_t errlen);
/* The ledger dir the shim would use (for the tools): ledger_dir of the
 * config vs_config_load_env() loads, else VS_DEFAULT_LEDGER_DIR. -1 when
 * that config cannot be loaded (err says why; out holds the default), else 0. */
int vs_config_ledger_dir(char *out, size_t len, char *err, size_t errlen);
/* What a config error at load does: with VRAMSHIM_ON_ERROR=passthrough it
 * logs the error and a line saying enforcement is off, and returns 0 (the
 * caller then runs without enforcement); otherwise it logs the error and
 * ends the process with exit status 78. */
int vs_config_on_error(const char *err);
/* When the file sets no ledger_dir: the default dir, or the per-user
 * fallback (one log line says that other users' processes are then not
 * counted, when log is set). 0, or -1 with err (the default dir exists but
 * belongs to another user or is world-writable). */
int vs_config_resolve_ledger_dir(vs_config *cfg, int log, char *err, size_t errlen);
#endif

/* Writing dump files safely, and rate-limiting automatic dumps.
 *
 * dump_dir is created 0700 when missing; an existing one must be a real
 * directory (not a symlink) owned by this user and not writable by group
 * or others, or a shared sticky one (the default /var/tmp/vramshim, 1777),
 * where this user writes in <dump_dir>/<uid> (0700; dir.h). The file is
 * written under a hidden name (.NAME.part, O_CREAT|O_EXCL|O_NOFOLLOW,
 * 0600) and renamed when complete, so no empty or partial dump is left by
 * a killed writer or a full disk; NAME is vramshim-<pid>-<card>-<UTC
 * time>.json (card "all" for a dump of every card), with a -1, -2...
 * suffix when taken. After each dump the folder keeps its
 * VS_DUMP_FOLDER_KEEP newest dumps (every dump there is this user's), and
 * parts older than a minute are removed. */
#ifndef VS_DUMP_FILE_H
#define VS_DUMP_FILE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dump_model.h"

/* Creates dir (and missing parents, each 0700) or checks the existing one.
 * 0, or -1 with the reason in err. */
int vs_dump_dir_prepare(const char *dir, char *err, size_t errlen);

/* The whole thing: prepares dir, opens the file, writes the dump's JSON.
 * card: the card the dump is about, or -1 for all. 0 with the path in
 * path (to log), or -1 with the reason in err (no partial file is left). */
int vs_dump_write_file(const vs_dump *d, const char *dir, int card, char *path, size_t pathlen, char *err,
                       size_t errlen);

/* vs_dump_write_file, then one log line (warn level) saying why and where:
 *   "vramshim: card 0: <what>; dump written to <path>"
 * or why it could not be written. For automatic dumps (refused allocation,
 * signal). card < 0: all cards. 0 or -1. */
int vs_dump_write_logged(const vs_dump *d, const char *dir, int card, const char *what, char *path, size_t pathlen);

/* At most one event per interval: automatic dumps on a refused allocation
 * (VS_DUMP_AUTO_INTERVAL_MS per process). Lock-free; safe from any thread. */
#define VS_DUMP_AUTO_INTERVAL_MS 10000
/* Dumps a folder keeps (all processes of its user together). */
#define VS_DUMP_FOLDER_KEEP 64
typedef struct vs_ratelimit { _Atomic uint64_t next_ms; } vs_ratelimit;
/* 1 when the caller may go ahead now (and the next one is due interval_ms
 * later), 0 when it is too soon. */
int vs_ratelimit_allow(vs_ratelimit *rl, uint64_t now_ms, uint64_t interval_ms);

#endif

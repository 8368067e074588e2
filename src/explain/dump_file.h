/* Writing dump files safely, and rate-limiting automatic dumps.
 *
 * dump_dir is created 0700 when missing; an existing one must be a real
 * directory (not a symlink) owned by this user and not writable by group
 * or others. The file is created with O_CREAT|O_EXCL|O_NOFOLLOW, mode
 * 0600, named vramshim-<pid>-<card>-<UTC time>.json (card "all" for a
 * dump of every card); a name already taken gets a -1, -2... suffix. */
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
typedef struct vs_ratelimit { _Atomic uint64_t next_ms; } vs_ratelimit;
/* 1 when the caller may go ahead now (and the next one is due interval_ms
 * later), 0 when it is too soon. */
int vs_ratelimit_allow(vs_ratelimit *rl, uint64_t now_ms, uint64_t interval_ms);

#endif

/* Threshold actions of the recorder (issue 26): on_warn and on_refuse of
 * each tenant (its section, else [tenant default]'s) or of its card
 * ([card N]), run once per crossing.
 *
 * on_warn runs when the tenant's usage reaches warn_at (seen in a sample)
 * or the ledger has a new warn event; it is re-armed when a sample sees
 * the usage below warn_at again. on_refuse runs on a new refusal (ledger
 * event "limit"); it is re-armed when a sample without a new refusal sees
 * the usage below warn_at (90% of the limit without warn_at; at once for
 * a tenant without a limit). A recorder that starts while a tenant is
 * above warn_at runs on_warn once.
 *
 * The program gets the event in VRAMSHIM_* variables, runs at most
 * timeout_ms (then it is killed with its process group); its output is
 * logged line by line and kept (the last 2 KiB) with its result in the
 * history database's actions table. */
#ifndef VS_HISTORY_ACTIONS_H
#define VS_HISTORY_ACTIONS_H
#include <stdint.h>

#include "config.h"
#include "ledger_read.h"
#include "store.h"

typedef struct vs_actions_state vs_actions_state;

vs_actions_state *vs_actions_new(uint64_t timeout_ms, const char *db_path);
void vs_actions_free(vs_actions_state *a); /* kills what still runs */
/* One sampling pass of a card: s the snapshot, new_events its events the
 * store had not seen (pointers into s). cfg may be NULL (no actions). */
void vs_actions_pass(vs_actions_state *a, vs_store *st, const vs_config *cfg, const vs_ledger_snapshot *s,
                     const vs_snap_event *const *new_events, int nnew, int64_t now_ms);
/* Reads the running actions' output, reaps the ended, kills the late;
 * results go to the store (its own transaction). */
void vs_actions_poll(vs_actions_state *a, vs_store *st);
int vs_actions_running(const vs_actions_state *a);
#endif

/* Fresh dumps from live processes, through the tenant ledger
 * (src/tenant/ledger_mailbox.h): the request is posted in every ledger
 * slot of each chosen process and answered by the shim's background
 * thread, which writes the dump to its dump_dir and posts the path back.
 * All requests are posted before any answer is awaited, so several
 * processes (and several tools) are served in parallel. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "config.h"
#include "dump_json.h"
#include "dump_views.h"
#include "ledger_mailbox.h"
#include "ledger_read.h"

#define MAX_LEDGERS 64
#define MAX_TARGETS 1024

typedef struct target {
  int32_t pid;
  int map, slot;      /* where it is awaited: its first slot found */
  uint32_t seq;
} target;

static int matches(const dump_target *t, const vs_mailbox_map *m, int slot) {
  if (t->pid > 0) return vs_mailbox_slot_pid(m, slot) == (int32_t)t->pid;
  if (t->tenant) return !strcmp(vs_mailbox_slot_tenant(m, slot), t->tenant);
  return 1;
}

int dump_request_live(const dump_target *t, vs_dump **dumps, size_t *n, char *err, size_t errlen) {
  *dumps = NULL;
  *n = 0;
  char dir[VS_PATH_MAX], cfg_err[VS_ERR_MAX];
  if (t->ledger_dir) snprintf(dir, sizeof dir, "%s", t->ledger_dir);
  else vs_config_ledger_dir(dir, sizeof dir, cfg_err, sizeof cfg_err); /* a bad config: the default, silently */
  static char ids[MAX_LEDGERS][VS_NAME_MAX];
  int nids = vs_ledger_list(dir, ids, MAX_LEDGERS, err, errlen);
  struct stat st;
  if (nids < 0 && stat(dir, &st) != 0 && errno == ENOENT) nids = 0;   /* no process has used a card yet */
  if (nids < 0) return -1;

  static vs_mailbox_map maps[MAX_LEDGERS];
  static target tg[MAX_TARGETS];
  int nmaps = 0, nt = 0;
  char why[1024];
  for (int i = 0; i < nids; i++) {
    if (vs_mailbox_map_open(dir, ids[i], &maps[nmaps], why, sizeof why)) {
      fprintf(stderr, "vramshim: dump: skipping %s\n", why);
      continue;
    }
    vs_mailbox_map *m = &maps[nmaps++];
    for (int s = 0; s < 256; s++) {
      int32_t pid = vs_mailbox_slot_pid(m, s);
      if (pid <= 0 || !matches(t, m, s) || vs_mailbox_find(m, pid, 0, s) != s) continue;
      /* Every slot of the process gets the request: its thread sleeps on one. */
      uint32_t seq = vs_mailbox_post(m, s);
      int k = 0;
      while (k < nt && tg[k].pid != pid) k++;
      if (k == nt && nt < MAX_TARGETS) tg[nt++] = (target){pid, nmaps - 1, s, seq};
    }
  }
  int rc = 0;
  if (!nt) {
    if (t->pid > 0)
      snprintf(err, errlen,
               "process %ld has no slot in the ledgers under %s: it is not running under the shim, has not used a "
               "card yet, or uses another ledger_dir (--ledger-dir DIR)",
               t->pid, dir);
    else if (t->tenant)
      snprintf(err, errlen, "no process of tenant '%s' in the ledgers under %s", t->tenant, dir);
    rc = t->all ? 0 : -1;
    goto out;
  }
  *dumps = calloc((size_t)nt, sizeof **dumps);
  if (!*dumps) {
    snprintf(err, errlen, "out of memory");
    rc = -1;
    goto out;
  }
  uint64_t deadline = vs_mono_ns() + (uint64_t)(t->timeout_s * 1e9);
  int failed = 0;
  for (int k = 0; k < nt; k++) {
    char path[VS_PATH_MAX + 128];
    int r = vs_mailbox_await(&maps[tg[k].map], tg[k].slot, tg[k].pid, tg[k].seq, deadline, path, sizeof path);
    if (r == 1) {
      snprintf(why, sizeof why, "process %d did not answer the dump request within %.3g s (stopped, or a shim without dump requests?)",
               (int)tg[k].pid, t->timeout_s);
    } else if (r < 0) {
      snprintf(why, sizeof why, "process %d ended before answering the dump request", (int)tg[k].pid);
    } else if (!strncmp(path, "error: ", 7)) {
      snprintf(why, sizeof why, "process %d could not write its dump: %s", (int)tg[k].pid, path + 7);
      r = -1;
    } else {
      char rerr[512];
      vs_dump *d = &(*dumps)[*n];
      if (vs_dump_read_file(path, d, rerr, sizeof rerr) == 0) {
        if (d->pid == tg[k].pid) {
          (*n)++;
          continue;
        }
        snprintf(why, sizeof why, "process %d's slot was answered with a dump of process %lld (%s)", (int)tg[k].pid,
                 (long long)d->pid, path);
        vs_dump_free(d);
      } else {
        snprintf(why, sizeof why, "process %d wrote %s, which cannot be read: %s", (int)tg[k].pid, path, rerr);
      }
      r = -1;
    }
    failed++;
    if (nt == 1) {
      snprintf(err, errlen, "%s", why);
    } else {
      fprintf(stderr, "vramshim: dump: %s\n", why);
      snprintf(err, errlen, "%d of %d processes gave no dump", failed, nt);
    }
  }
  /* Several processes: what arrived is shown, the rest was said above. */
  if (failed && (nt == 1 || *n == 0)) {
    rc = -1;
    for (size_t i = 0; i < *n; i++) vs_dump_free(&(*dumps)[i]);
    free(*dumps);
    *dumps = NULL;
    *n = 0;
  }
out:
  for (int i = 0; i < nmaps; i++) vs_mailbox_map_close(&maps[i]);
  return rc;
}

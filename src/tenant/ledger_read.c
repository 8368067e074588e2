#include "ledger_read.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "dir.h"
#include "file.h"
#include "proc.h"
#include "ledger_shm.h"
#include "log.h"

int vs_ledger_file_name(const char *card_id, char *out, size_t len) {
  char id[VS_NAME_MAX];
  size_t n = strlen(card_id);
  if (n == 0 || n >= sizeof id) return -1;
  for (size_t i = 0; i <= n; i++) {
    char c = card_id[i];
    id[i] = (c == 0 || isalnum((unsigned char)c) || c == '-' || c == '_') ? c : '_';
  }
  int w = snprintf(out, len, "card-%s.ledger", id);
  return w < 0 || (size_t)w >= len ? -1 : 0;
}

/* Issue 10, the takeover of a ledger dir: the checks are the platform's
 * (src/platform/dir.h). */
int vs_ledger_open_dir(const char *dir, int create, char *err, size_t errlen) {
  return vs_plat_private_dir_open(dir, "ledger dir", create, err, errlen);
}

int vs_ledger_check_owner(int fd, const char *path, char *err, size_t errlen) {
  return vs_plat_shared_file_check(fd, path, err, errlen);
}

/* The default dir (issue 10): the system's (/run/vramshim, made at install
 * time by packaging/tmpfiles.d/vramshim.conf; %ProgramData%ramshim on
 * Windows), else a per-user one (src/platform/dir.h). */
int vs_ledger_default_dir(char *out, size_t len, int *fallback) { return vs_plat_default_ledger_dir(out, len, fallback); }

/* Where the ledgers are, for the shim and the tools (declared in config.h;
 * here, not in select.c, so that the config parser needs no ledger code). */
int vs_config_resolve_ledger_dir(vs_config *cfg, int log, char *err, size_t errlen) {
  if (cfg->has_ledger_dir) return 0;
  int fallback = 0;
  if (vs_ledger_default_dir(cfg->ledger_dir, sizeof cfg->ledger_dir, &fallback)) {
    snprintf(err, errlen,
             "ledger dir %s exists but may not be trusted (another user's, world-writable, or a symbolic link); "
             "refusing to use it: remove it, or set ledger_dir in the config",
             VS_DEFAULT_LEDGER_DIR);
    return -1;
  }
  if (fallback && log) {
    char who[64];
    vs_plat_user_desc(who, sizeof who);
    VS_WARN("ledger dir %s does not exist and cannot be made by %s (install the package's tmpfiles.d entry); "
            "using %s: processes of other users are not counted on the cards",
            VS_DEFAULT_LEDGER_DIR, who, cfg->ledger_dir);
  }
  return 0;
}

int vs_config_ledger_dir(char *out, size_t len, char *err, size_t errlen) {
  snprintf(out, len, "%s", VS_DEFAULT_LEDGER_DIR);
  vs_config *cfg = malloc(sizeof *cfg);
  if (!cfg) return 0;
  int r = vs_config_load_env(cfg, err, errlen);
  if (r >= 0 && vs_config_resolve_ledger_dir(cfg, 0, err, errlen)) r = -1;
  else if (r >= 0) snprintf(out, len, "%s", cfg->ledger_dir);
  free(cfg);
  return r < 0 ? -1 : 0;
}

static int cmp_ids(const void *a, const void *b) {
  const char *x = a, *y = b;
  /* Numeric ids in numeric order, then UUIDs. */
  int dx = isdigit((unsigned char)x[0]), dy = isdigit((unsigned char)y[0]);
  if (dx && dy) return atoi(x) - atoi(y);
  if (dx != dy) return dy - dx;
  return strcmp(x, y);
}

struct list_ctx {
  char (*ids)[VS_NAME_MAX];
  int max, n;
};
static int list_one(const char *name, void *arg) {
  struct list_ctx *c = arg;
  if (c->n >= c->max) return 1;
  size_t len = strlen(name);
  if (len <= 12 || strncmp(name, "card-", 5) || strcmp(name + len - 7, ".ledger")) return 0;
  if (len - 12 >= VS_NAME_MAX) return 0;
  memcpy(c->ids[c->n], name + 5, len - 12);
  c->ids[c->n][len - 12] = 0;
  return ++c->n >= c->max;
}

int vs_ledger_list(const char *dir, char ids[][VS_NAME_MAX], int max, char *err, size_t errlen) {
  int dfd = vs_ledger_open_dir(dir, 0, err, errlen);
  if (dfd < 0) return -1;
  struct list_ctx c = {ids, max, 0};
  if (vs_plat_dir_each(dfd, list_one, &c)) {
    snprintf(err, errlen, "ledger dir %s: %s", dir, strerror(errno));
    return -1;
  }
  int n = c.n;
  qsort(ids, (size_t)n, VS_NAME_MAX, cmp_ids);
  return n;
}

/* A consistent copy: retry while a writer is inside; give up after ~200 ms
 * (a writer that died mid-write leaves seq odd until the next locker).
 * Read with pread, never through a mapping: a file truncated meanwhile
 * gives a short read (-1), not SIGBUS (issue 10). */
static int pread_all(int fd, void *buf, size_t n, int64_t off) {
  size_t got = 0;
  while (got < n) {
    long r = vs_plat_pread(fd, (char *)buf + got, n - got, off + (int64_t)got);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return -1;
    }
    got += (size_t)r;
  }
  return 0;
}

static int copy_consistent(int fd, vs_ledger_shm *copy) {
  uint64_t t0 = vs_mono_ns();
  const int64_t seq_at = (int64_t)offsetof(vs_ledger_shm, seq);
  for (unsigned tries = 0;; tries++) {
    uint32_t a, b;
    if (pread_all(fd, &a, sizeof a, seq_at) || pread_all(fd, copy, sizeof *copy, 0) ||
        pread_all(fd, &b, sizeof b, seq_at))
      return -1;
    if (a == b && !(a & 1)) return 1;
    if (vs_mono_ns() - t0 > 200000000ull) return 0;
    if (tries > 100) sched_yield();
  }
}

/* In the order of the VS_EVENT_ numbers, from 1. */
const char *const vs_snap_event_kinds[VS_SNAP_EVENT_KINDS] = {"warn", "limit", "reclaim", "spill", "unanswered"};
_Static_assert(VS_EVENT_WARN == 1 && VS_EVENT_UNANSWERED == VS_SNAP_EVENT_KINDS, "one name per event kind");

static const char *event_kind(int k) { return k >= 1 && k <= VS_SNAP_EVENT_KINDS ? vs_snap_event_kinds[k - 1] : NULL; }

int vs_ledger_snapshot_read(const char *dir, const char *card_id, vs_ledger_snapshot *out, char *err, size_t errlen) {
  char name[VS_NAME_MAX + 16];
  if (vs_ledger_file_name(card_id, name, sizeof name)) {
    snprintf(err, errlen, "ledger: bad card id '%s'", card_id);
    return -1;
  }
  int dfd = vs_ledger_open_dir(dir, 0, err, errlen);
  if (dfd < 0) return -1;
  int fd = vs_plat_openat(dfd, name, O_RDONLY | O_NOFOLLOW, 0);
  int e = errno;
  close(dfd);
  if (fd < 0 || vs_plat_file_size(fd) != (int64_t)sizeof(vs_ledger_shm)) {
    snprintf(err, errlen, "ledger %s/%s: %s", dir, name,
             fd < 0 ? strerror(e) : "another layout (older or newer vramshim) or not initialised");
    if (fd >= 0) close(fd);
    return -1;
  }
  vs_ledger_shm *c = malloc(sizeof *c);
  if (!c) {
    close(fd);
    snprintf(err, errlen, "ledger %s/%s: out of memory", dir, name);
    return -1;
  }
  memset(out, 0, sizeof *out);
  out->consistent = copy_consistent(fd, c);
  if (out->consistent < 0) {
    free(c);
    close(fd);
    snprintf(err, errlen, "ledger %s/%s: it shrank while read (truncated?)", dir, name);
    return -1;
  }
  if (c->magic != VS_LEDGER_MAGIC || c->version != VS_LEDGER_VERSION) {
    free(c);
    close(fd);
    snprintf(err, errlen, "ledger %s/%s: not a ledger of this vramshim version", dir, name);
    return -1;
  }
  snprintf(out->card_id, sizeof out->card_id, "%s", c->card_id);
  out->card_index = c->card_index;
  out->capacity = c->capacity;
  out->headroom = c->headroom;
  out->generation = c->plan_generation;
  uint32_t nt = c->ntenants < VS_LEDGER_TENANTS ? c->ntenants : VS_LEDGER_TENANTS;
  out->ntenants = (int)nt;
  for (uint32_t t = 0; t < nt; t++) {
    vs_snap_tenant *o = &out->tenants[t];
    memcpy(o->name, c->tenants[t].name, VS_NAME_MAX);
    o->name[VS_NAME_MAX - 1] = 0;
    o->reserve = c->tenants[t].reserve;
    o->limit = c->tenants[t].limit;
    o->peak = c->tenants[t].peak;
    o->recorded = c->tenants[t].used;
    o->spill_peak = c->tenants[t].spill_peak;
    o->spill_max = c->tenants[t].spill_max;
  }
  uint64_t gens[VS_LEDGER_SLOTS];
  for (int i = 0; i < VS_LEDGER_SLOTS; i++) {
    const vs_ledger_slot *sl = &c->slots[i];
    if (sl->state != VS_SLOT_ACTIVE) continue;
    vs_snap_proc *p = &out->procs[out->nprocs++];
    p->pid = sl->pid;
    p->start_time = sl->start_time;
    p->held = sl->held;
    p->live = sl->live;
    p->peak = sl->peak;
    p->generation = sl->generation;
    p->attach_ns = sl->attach_ns;
    p->spilled = sl->spilled;
    p->overhead = sl->overhead;
    p->cached = sl->cache;
    p->spill_peak = sl->spill_peak;
    p->alive = vs_ledger_slot_alive(fd, i);
    uint32_t t = sl->tenant < nt ? sl->tenant : 0;
    if (nt) memcpy(p->tenant, out->tenants[t].name, VS_NAME_MAX);
    if (!p->alive) {
      out->dead_bytes += sl->held;
      out->dead_spilled += sl->spilled;
      continue;
    }
    if (nt) {
      out->tenants[t].used += sl->held;
      out->tenants[t].spilled += sl->spilled;
      out->tenants[t].overhead += sl->overhead;
      out->tenants[t].cached += sl->cache;
      out->tenants[t].nprocs++;
    }
    for (uint32_t r = 0; r < nt; r++) {
      vs_snap_tenant *o = &out->tenants[r];
      if (!(sl->reserve_mask >> r & 1)) continue;
      if (o->reserve_procs < VS_SNAP_RESERVE_PIDS) o->reserve_pids[o->reserve_procs] = sl->pid;
      o->reserve_procs++;
    }
    int seen = 0;
    for (int g = 0; g < out->generations; g++) seen |= gens[g] == sl->generation;
    if (!seen) gens[out->generations++] = sl->generation;
  }
  /* A reservation no live process's config holds has ended (issue 10). */
  for (uint32_t t = 0; t < nt; t++)
    if (!out->tenants[t].reserve_procs) out->tenants[t].reserve = 0;
  uint64_t head = c->event_head, first = head > VS_LEDGER_EVENTS ? head - VS_LEDGER_EVENTS : 0;
  for (uint64_t k = first; k < head; k++) {
    const vs_ledger_event *ev = &c->events[k % VS_LEDGER_EVENTS];
    /* A kind this build does not know is bytes written over the ring (the
     * file's version names every kind it may hold): not an event. */
    if (!event_kind(ev->kind)) continue;
    vs_snap_event *o = &out->events[out->nevents++];
    o->time_ns = ev->time_ns;
    o->pid = ev->pid;
    /* VS_EVENT_NO_TENANT (its entry went to another tenant since): no name. */
    if (ev->tenant < nt) memcpy(o->tenant, out->tenants[ev->tenant].name, VS_NAME_MAX);
    o->kind = event_kind(ev->kind);
    o->bytes = ev->bytes;
    o->used = ev->used;
    o->limit = ev->limit;
  }
  free(c);
  close(fd);
  return 0;
}

/* Dump request mailboxes in ledger slots (see ledger_mailbox.h). */
#include "ledger_mailbox.h"


#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "dir.h"
#include "file.h"
#include "map_guard.h"
#include "shm.h"
#include "wake.h"
#include "xlock.h"
#include "ledger_shm.h"

#define ALOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ASTORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

/* The word lives in a file mapped by several processes (wake.h). Without
 * a key (these two) a Windows wait is a plain sleep of the slice and a
 * wake reaches nobody: callers with the map use the keyed ones below. */
void vs_mailbox_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns) {
  int e = errno;
  vs_plat_wait(word, expected, timeout_ns, NULL, NULL);
  errno = e;
}

void vs_mailbox_futex_wake(uint32_t *word) {
  int e = errno;   /* also called from a signal handler */
  vs_plat_wake(word, NULL, NULL);
  errno = e;
}

static void slot_tag(int slot, const char *what, char *out, size_t len) { snprintf(out, len, "%s%d", what, slot); }

static void keyed_wait(vs_mailbox_map *m, int slot, const char *what, uint32_t *word, uint32_t expected,
                       uint64_t timeout_ns) {
  char key[40], tag[24];
  vs_plat_xlock_key(&m->shm->lock, key, sizeof key);
  slot_tag(slot, what, tag, sizeof tag);
  int e = errno;
  vs_plat_wait(word, expected, timeout_ns, key, tag);
  errno = e;
}

static void keyed_wake(vs_mailbox_map *m, int slot, const char *what, uint32_t *word) {
  char key[40], tag[24];
  vs_plat_xlock_key(&m->shm->lock, key, sizeof key);
  slot_tag(slot, what, tag, sizeof tag);
  int e = errno;
  vs_plat_wake(word, key, tag);
  errno = e;
}

void vs_mailbox_nudge(struct vs_ledger_shm *shm, int slot) {
  vs_mailbox_map m = {.shm = shm, .fd = -1};
  keyed_wake(&m, slot, "req", &shm->slots[slot].dump_req);
}

void vs_mailbox_req_wait(vs_mailbox_map *m, int slot, uint32_t expected, uint64_t timeout_ns) {
  keyed_wait(m, slot, "req", &m->shm->slots[slot].dump_req, expected, timeout_ns);
}

int vs_mailbox_map_open(const char *dir, const char *card_id, vs_mailbox_map *m, char *err, size_t errlen) {
  char name[VS_NAME_MAX + 16];
  memset(m, 0, sizeof *m);
  m->fd = -1;
  if (vs_ledger_file_name(card_id, name, sizeof name)) {
    snprintf(err, errlen, "ledger of card %s: bad card id", card_id);
    return -1;
  }
  int dfd = vs_ledger_open_dir(dir, 0, err, errlen);
  if (dfd < 0) return -1;
  int fd = vs_plat_openat(dfd, name, O_RDWR | O_NOFOLLOW, 0);
  int e = errno;
  close(dfd);
  if (fd < 0) {
    snprintf(err, errlen, "ledger %s/%s: %s", dir, name, strerror(e));
    return -1;
  }
  if (!vs_plat_file_not_public(fd) || vs_plat_file_size(fd) != (int64_t)sizeof(vs_ledger_shm)) {
    snprintf(err, errlen, "ledger %s/%s: not a ledger of this vramshim (layout version %u)", dir, name,
             VS_LEDGER_VERSION);
    close(fd);
    return -1;
  }
  vs_ledger_shm *s = vs_plat_map_shared(fd, sizeof *s);
  if (!s) {
    snprintf(err, errlen, "ledger %s/%s: cannot map it: %s", dir, name, strerror(errno));
    close(fd);
    return -1;
  }
  vs_plat_guard_add(s, sizeof *s); /* a truncation must not fault this process (map_guard.h) */
  if (ALOAD(&s->magic) != VS_LEDGER_MAGIC || s->version != VS_LEDGER_VERSION || s->size != sizeof *s) {
    snprintf(err, errlen, "ledger %s/%s: not a ledger of this vramshim (layout version %u)", dir, name,
             VS_LEDGER_VERSION);
    vs_plat_guard_remove(s);
    vs_plat_unmap(s, sizeof *s);
    close(fd);
    return -1;
  }
  m->shm = s;
  m->fd = fd;
  m->card_index = VS_LOAD(&s->card_index);
  snprintf(m->card_id, sizeof m->card_id, "%s", card_id);
  return 0;
}

void vs_mailbox_map_close(vs_mailbox_map *m) {
  if (m->shm) {
    vs_plat_guard_remove(m->shm);
    vs_plat_unmap(m->shm, sizeof *m->shm);
  }
  if (m->fd >= 0) close(m->fd);
  m->shm = NULL;
  m->fd = -1;
}

int vs_mailbox_find(const vs_mailbox_map *m, int32_t pid, uint64_t start_time, int from) {
  for (int i = from < 0 ? 0 : from; i < VS_LEDGER_SLOTS; i++) {
    const vs_ledger_slot *sl = &m->shm->slots[i];
    if (VS_LOAD(&sl->state) != VS_SLOT_ACTIVE || VS_LOAD(&sl->pid) != pid) continue;
    if (start_time && VS_LOAD(&sl->start_time) != start_time) continue;
    if (vs_ledger_slot_alive(m->fd, i)) return i;
  }
  return -1;
}

int32_t vs_mailbox_slot_pid(const vs_mailbox_map *m, int slot) {
  const vs_ledger_slot *sl = &m->shm->slots[slot];
  return VS_LOAD(&sl->state) == VS_SLOT_ACTIVE ? VS_LOAD(&sl->pid) : 0;
}

const char *vs_mailbox_slot_tenant(const vs_mailbox_map *m, int slot) {
  uint32_t t = VS_LOAD(&m->shm->slots[slot].tenant);
  if (t >= VS_LEDGER_TENANTS) return "";
  const char *name = m->shm->tenants[t].name;
  /* Names are written once, NUL-terminated, before any slot points at them. */
  return memchr(name, 0, VS_NAME_MAX) ? name : "";
}

void vs_mailbox_tenant_use(const vs_mailbox_map *m, int slot, uint64_t *reserve, uint64_t *limit, uint64_t *used) {
  uint32_t t = VS_LOAD(&m->shm->slots[slot].tenant);
  if (t >= VS_LEDGER_TENANTS) t = 0;
  const vs_ledger_tenant *lt = &m->shm->tenants[t];
  *reserve = VS_LOAD(&lt->reserve);
  *limit = VS_LOAD(&lt->limit);
  *used = VS_LOAD(&lt->used);
}

void vs_mailbox_tenant_spill(const vs_mailbox_map *m, int slot, uint64_t *spilled, uint64_t *spill_max) {
  uint32_t t = VS_LOAD(&m->shm->slots[slot].tenant);
  if (t >= VS_LEDGER_TENANTS) t = 0;
  *spilled = VS_LOAD(&m->shm->tenants[t].spilled);
  *spill_max = VS_LOAD(&m->shm->tenants[t].spill_max);
}


void vs_mailbox_tenant_overhead(const vs_mailbox_map *m, int slot, uint64_t *overhead) {
  uint32_t t = VS_LOAD(&m->shm->slots[slot].tenant);
  uint64_t sum = 0;
  for (int i = 0; i < VS_LEDGER_SLOTS; i++) {
    const vs_ledger_slot *sl = &m->shm->slots[i];
    if (VS_LOAD(&sl->state) == VS_SLOT_ACTIVE && VS_LOAD(&sl->tenant) == t) sum += VS_LOAD(&sl->overhead);
  }
  *overhead = sum;
}

/* ---- Tool ------------------------------------------------------------------ */
uint32_t vs_mailbox_post(vs_mailbox_map *m, int slot) {
  uint32_t *w = &m->shm->slots[slot].dump_req;
  uint32_t seq = __atomic_add_fetch(w, 1, __ATOMIC_SEQ_CST);
  keyed_wake(m, slot, "req", w);
  return seq;
}

/* seq answered when done is at or past it (wrapping arithmetic). */
static int answered(uint32_t done, uint32_t seq) { return (int32_t)(done - seq) >= 0; }

int vs_mailbox_await(vs_mailbox_map *m, int slot, int32_t pid, uint32_t seq, uint64_t deadline_ns, char *path,
                     size_t pathlen) {
  vs_ledger_slot *sl = &m->shm->slots[slot];
  for (;;) {
    uint32_t p1 = ALOAD(&sl->dump_pub);
    uint32_t done = ALOAD(&sl->dump_done);
    if (!(p1 & 1) && answered(done, seq)) {
      char tmp[sizeof sl->dump_path];
      memcpy(tmp, sl->dump_path, sizeof tmp);
      tmp[sizeof tmp - 1] = 0;
      if (ALOAD(&sl->dump_pub) == p1) {
        snprintf(path, pathlen, "%s", tmp);
        return 0;
      }
      continue;   /* a newer answer is being written: also after our request */
    }
    if (VS_LOAD(&sl->state) != VS_SLOT_ACTIVE || VS_LOAD(&sl->pid) != pid || !vs_ledger_slot_alive(m->fd, slot))
      return -1;
    uint64_t now = vs_mono_ns();
    if (now >= deadline_ns) return 1;
    uint64_t left = deadline_ns - now;
    /* Short slices: the owner may die without answering. */
    keyed_wait(m, slot, "done", &sl->dump_done, done, left < 50000000ull ? left : 50000000ull);
  }
}

/* ---- Process ----------------------------------------------------------------- */
int vs_mailbox_owned(const vs_mailbox_map *m, int slot, int32_t pid, uint64_t start_time) {
  const vs_ledger_slot *sl = &m->shm->slots[slot];
  return VS_LOAD(&sl->state) == VS_SLOT_ACTIVE && VS_LOAD(&sl->pid) == pid &&
         (!start_time || VS_LOAD(&sl->start_time) == start_time);
}

uint32_t *vs_mailbox_req_word(vs_mailbox_map *m, int slot) { return &m->shm->slots[slot].dump_req; }

int vs_mailbox_pending(vs_mailbox_map *m, int slot, uint32_t *req) {
  vs_ledger_slot *sl = &m->shm->slots[slot];
  uint32_t r = ALOAD(&sl->dump_req);
  *req = r;
  return r != ALOAD(&sl->dump_done);
}

void vs_mailbox_answer(vs_mailbox_map *m, int slot, uint32_t req, const char *path) {
  vs_ledger_slot *sl = &m->shm->slots[slot];
  __atomic_add_fetch(&sl->dump_pub, 1, __ATOMIC_SEQ_CST);
  snprintf(sl->dump_path, sizeof sl->dump_path, "%s", path);
  __atomic_add_fetch(&sl->dump_pub, 1, __ATOMIC_SEQ_CST);
  ASTORE(&sl->dump_done, req);
  keyed_wake(m, slot, "done", &sl->dump_done);
}

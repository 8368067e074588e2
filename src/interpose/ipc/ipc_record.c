/* Shim IPC handles and their records (see ipc_record.h). */
#include "ipc_record.h"

#include "ipc_channel.h"
#include "ipc_token.h"
#include "ipc_vmm.h"

#include "interpose.h"
#include "log.h"
#include "random.h"
#include "settings.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

static const char k_magic[16] = "vramshim-ipc-v1";

/* One record of the exporter's file, at seq * sizeof(record). */
typedef struct record {
  char magic[16];
  uint64_t nonce, offset, size;
  int32_t card;
  uint32_t pad;
  CUipcMemHandle driver;
} record;

/* Exporter: blocks already exported, so re-exporting one reuses its record. */
typedef struct exported {
  uint64_t block;
  record rec;
  uint64_t seq;
  UT_hash_handle hh;
} exported;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_fd = -1;
static uint64_t g_next_seq;
static exported *g_exported;
static _Atomic int g_any_export;   /* lets a free skip the lock when nothing was exported */
/* Importer: ptr -> driver pointer, with references. */
typedef struct opened {
  uint64_t ptr, driver_ptr;
  uint64_t refs;
  UT_hash_handle hh;
} opened;
static opened *g_opened;
static void *g_orphans[2];   /* a forked child's inheritance, kept reachable */


/* Under g_lock. The first export of this process starts a fresh file: one
 * left by a dead process with the same pid is stale. */
static int export_fd(void) {
  if (g_fd >= 0) return g_fd;
  int dfd = vs_settings_ledger_dir_open(1);
  if (dfd < 0) return -1;
  g_fd = vs_plat_rec_create(dfd, (int)getpid());
  int e = errno;
  close(dfd);
  errno = e;
  return g_fd;
}

int vs_ipc_export(const CUipcMemHandle *drv, uint64_t block, uint64_t offset, uint64_t size, int card,
                  CUipcMemHandle *out) {
  pthread_mutex_lock(&g_lock);
  exported *e;
  HASH_FIND(hh, g_exported, &block, sizeof block, e);
  if (!e || e->rec.offset != offset || e->rec.size != size || e->rec.card != card ||
      memcmp(&e->rec.driver, drv, sizeof *drv) != 0) {
    int fd = export_fd();
    if (fd < 0) {
      pthread_mutex_unlock(&g_lock);
      VS_ERROR("card %d: cannot write the IPC record in %s (%s); cuIpcGetMemHandle fails", card,
               vs_settings_get()->config.ledger_dir, strerror(errno));
      return -1;
    }
    if (!e) {
      e = calloc(1, sizeof *e);
      if (!e) {
        pthread_mutex_unlock(&g_lock);
        return -1;
      }
      e->block = block;
      HASH_ADD(hh, g_exported, block, sizeof e->block, e);
      atomic_store(&g_any_export, 1);
    }
    memset(&e->rec, 0, sizeof e->rec);
    memcpy(e->rec.magic, k_magic, sizeof k_magic);
    if (vs_plat_random(&e->rec.nonce, sizeof e->rec.nonce) != 0)
      e->rec.nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)e ^ g_next_seq;
    e->rec.offset = offset;
    e->rec.size = size;
    e->rec.card = card;
    e->rec.driver = *drv;
    e->seq = g_next_seq++;
    if (vs_plat_rec_write(fd, &e->rec, sizeof e->rec, (unsigned long long)(e->seq * sizeof e->rec)) != 0) {
      HASH_DEL(g_exported, e);
      free(e);
      pthread_mutex_unlock(&g_lock);
      VS_ERROR("card %d: cannot write the IPC record (%s); cuIpcGetMemHandle fails", card, strerror(errno));
      return -1;
    }
  }
  vs_ipc_token t;
  memset(&t, 0, sizeof t);
  memcpy(t.magic, k_magic, sizeof k_magic);
  t.pid = (int32_t)getpid();
  t.tag = vs_plat_chan_tag();
  t.seq = e->seq;
  t.nonce = e->rec.nonce;
  pthread_mutex_unlock(&g_lock);
  memset(out, 0, sizeof *out);
  memcpy(out->reserved, &t, sizeof t);
  return 0;
}

int vs_ipc_resolve(const CUipcMemHandle *h, CUipcMemHandle *drv, uint64_t *offset, uint64_t *size) {
  vs_ipc_token t;
  memcpy(&t, h->reserved, sizeof t);
  if (memcmp(t.magic, k_magic, sizeof k_magic) != 0) return 0;
  int dfd = vs_settings_ledger_dir_open(0);
  int fd = -1;
  const char *why = NULL;
  if (dfd >= 0) {
    fd = vs_plat_rec_open(dfd, t.pid, t.tag, &why);
    close(dfd);
  } else {
    why = "no record of the exporting process (is it running the shim with the same ledger_dir?)";
  }
  record rec;
  int freed = 0;
  if (why) {
    /* said by vs_plat_rec_open, or no folder */
  } else if (vs_plat_rec_read(fd, &rec, sizeof rec, (unsigned long long)(t.seq * sizeof rec)) != 0 ||
           memcmp(rec.magic, k_magic, sizeof k_magic) != 0)
    why = "the exporter has no such record (a forged handle)";
  else if ((freed = rec.nonce == 0))
    why = "the exporter has freed the block";
  else if (rec.nonce != t.nonce)
    why = "the exporter's record does not match (a stale or forged handle)";
  vs_plat_rec_close(fd);
  if (why) {
    VS_WARN("cuIpcOpenMemHandle: a vramshim handle from process %d cannot be opened: %s", (int)t.pid, why);
    return freed ? -2 : -1;
  }
  *drv = rec.driver;
  *offset = rec.offset;
  *size = rec.size;
  return 1;
}

void vs_ipc_opened_add(uint64_t ptr, uint64_t driver_ptr) {
  pthread_mutex_lock(&g_lock);
  opened *o;
  HASH_FIND(hh, g_opened, &ptr, sizeof ptr, o);
  if (o) {
    o->refs++;
  } else if ((o = calloc(1, sizeof *o))) {
    o->ptr = ptr;
    o->driver_ptr = driver_ptr;
    o->refs = 1;
    HASH_ADD(hh, g_opened, ptr, sizeof o->ptr, o);
  }
  pthread_mutex_unlock(&g_lock);
}

int vs_ipc_opened_find(uint64_t ptr, uint64_t *driver_ptr, int drop) {
  pthread_mutex_lock(&g_lock);
  opened *o;
  HASH_FIND(hh, g_opened, &ptr, sizeof ptr, o);
  if (o) {
    *driver_ptr = o->driver_ptr;
    if (drop && --o->refs == 0) {
      HASH_DEL(g_opened, o);
      free(o);
    }
  }
  pthread_mutex_unlock(&g_lock);
  return o ? 0 : -1;
}

void vs_ipc_opened_forget(uint64_t ptr) {
  pthread_mutex_lock(&g_lock);
  opened *o;
  HASH_FIND(hh, g_opened, &ptr, sizeof ptr, o);
  if (o) {
    HASH_DEL(g_opened, o);
    free(o);
  }
  pthread_mutex_unlock(&g_lock);
}

void vs_ipc_block_freed(uint64_t base) {
  vs_ipc_vmm_block_freed(base);
  if (!atomic_load_explicit(&g_any_export, memory_order_relaxed)) return;
  pthread_mutex_lock(&g_lock);
  exported *e;
  HASH_FIND(hh, g_exported, &base, sizeof base, e);
  if (e) {
    /* The record's nonce no longer matches any handle: a stale handle
     * fails instead of opening whatever the chunk holds there next. */
    static const uint64_t zero = 0;
    if (g_fd >= 0)
      (void)vs_plat_rec_write(g_fd, &zero, sizeof zero, (unsigned long long)(e->seq * sizeof e->rec + offsetof(record, nonce)));
    HASH_DEL(g_exported, e);
    free(e);
  }
  pthread_mutex_unlock(&g_lock);
}

void vs_ipc_atfork_child(void) {
  atomic_store(&g_any_export, 0);
  /* The parent's exports and openings are not the child's. */
  if (g_exported) g_orphans[0] = g_exported;
  if (g_opened) g_orphans[1] = g_opened;
  g_exported = NULL;
  g_opened = NULL;
  vs_plat_rec_close(g_fd);
  g_fd = -1;
  g_next_seq = 0;
  pthread_mutex_init(&g_lock, NULL);
}

/* The records die with their exporter (so does the memory they name). */
__attribute__((destructor)) static void remove_records(void) {
  if (g_fd < 0 || !vs_plat_exit_work_ok()) return;
  vs_settings_ledger_dir_unlink(vs_plat_rec_unlink);
}

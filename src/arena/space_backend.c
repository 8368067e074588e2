/* Simulated address space: see space_backend.h. Bookkeeping only; every
 * table is a uthash keyed by address or handle id. */
#include "space_backend.h"

#include <pthread.h>
#include <stdlib.h>
#include <uthash.h>

typedef struct sb_item {      /* a chunk, a VA reservation, a handle or a mapping */
  uint64_t key, size, extra;  /* extra: mapping -> handle */
  UT_hash_handle hh;
} sb_item;

struct vs_space_backend {
  pthread_mutex_t mu;
  uint64_t capacity, granule;
  uint64_t next_va, next_handle;
  sb_item *chunks, *ranges, *handles, *maps;
  vs_space_counters c;
  void (*hook)(void *);
  void *hook_user;
};

/* Far from zero and from host heap addresses, like a device VA. */
#define SB_VA_BASE 0x7f0000000000ull

static sb_item *item_new(uint64_t key, uint64_t size, uint64_t extra) {
  sb_item *it = calloc(1, sizeof *it);
  if (it) { it->key = key; it->size = size; it->extra = extra; }
  return it;
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

/* Caller holds mu. 1 when `size` more physical bytes fit. */
static int phys_fits(vs_space_backend *sb, uint64_t size) {
  return sb->c.held <= sb->capacity && size <= sb->capacity - sb->c.held;
}
static void phys_take(vs_space_backend *sb, uint64_t size) {
  sb->c.held += size;
  if (sb->c.held > sb->c.peak_held) sb->c.peak_held = sb->c.held;
}

static int sb_chunk_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  vs_space_backend *sb = ctx;
  int rc = VS_BACKEND_OK;
  pthread_mutex_lock(&sb->mu);
  sb->c.chunk_alloc++;
  if (size == 0 || !addr) { sb->c.errors++; rc = VS_BACKEND_ERROR; goto out; }
  if (!phys_fits(sb, size)) { sb->c.oom++; rc = VS_BACKEND_OOM; goto out; }
  /* 2 MiB and more on 2 MiB, as the driver places them (docs/sim.md): the
   * arena's slabs are 2 MiB aligned, so a chunk's alignment decides where
   * in it they can lie. */
  uint64_t at = size >= (2ull << 20) ? align_up(sb->next_va, 2ull << 20) : sb->next_va;
  sb_item *it = item_new(at, size, 0);
  if (!it) { rc = VS_BACKEND_ERROR; goto out; }
  *addr = at;
  sb->next_va = align_up(at + size, 512);
  HASH_ADD(hh, sb->chunks, key, sizeof(uint64_t), it);
  phys_take(sb, size);
out:
  pthread_mutex_unlock(&sb->mu);
  return rc;
}

static int sb_chunk_free(void *ctx, uint64_t addr, uint64_t size) {
  vs_space_backend *sb = ctx;
  int rc = VS_BACKEND_OK;
  pthread_mutex_lock(&sb->mu);
  sb->c.chunk_free++;
  sb_item *it;
  HASH_FIND(hh, sb->chunks, &addr, sizeof(uint64_t), it);
  if (!it || it->size != size) { sb->c.errors++; rc = VS_BACKEND_ERROR; goto out; }
  HASH_DELETE(hh, sb->chunks, it);
  sb->c.held -= it->size;
  free(it);
out:
  pthread_mutex_unlock(&sb->mu);
  return rc;
}

static int sb_va_reserve(void *ctx, uint64_t size, uint64_t *va) {
  vs_space_backend *sb = ctx;
  int rc = VS_BACKEND_OK;
  pthread_mutex_lock(&sb->mu);
  sb->c.va_reserve++;
  if (size == 0 || size % sb->granule || !va) { sb->c.errors++; rc = VS_BACKEND_ERROR; goto out; }
  uint64_t base = align_up(sb->next_va, sb->granule);
  sb_item *it = item_new(base, size, 0);
  if (!it) { rc = VS_BACKEND_ERROR; goto out; }
  HASH_ADD(hh, sb->ranges, key, sizeof(uint64_t), it);
  sb->next_va = base + size;
  sb->c.va_held += size;
  *va = base;
out:
  pthread_mutex_unlock(&sb->mu);
  return rc;
}

/* Caller holds mu: the reservation that contains [va, va+size), or NULL. */
static sb_item *range_of(vs_space_backend *sb, uint64_t va, uint64_t size) {
  sb_item *r, *tmp;
  HASH_ITER(hh, sb->ranges, r, tmp) {
    if (va >= r->key && va + size <= r->key + r->size) return r;
  }
  return NULL;
}

static int sb_va_free(void *ctx, uint64_t va, uint64_t size) {
  vs_space_backend *sb = ctx;
  int rc = VS_BACKEND_OK;
  pthread_mutex_lock(&sb->mu);
  sb->c.va_free++;
  sb_item *it;
  HASH_FIND(hh, sb->ranges, &va, sizeof(uint64_t), it);
  if (!it || it->size != size) { sb->c.errors++; rc = VS_BACKEND_ERROR; goto out; }
  /* Freeing a reservation that still has mappings is a misuse. */
  for (uint64_t p = va; p < va + size; p += sb->granule) {
    sb_item *m;
    HASH_FIND(hh, sb->maps, &p, sizeof(uint64_t), m);
    if (m) { sb->c.errors++; rc = VS_BACKEND_ERROR; goto out; }
  }
  HASH_DELETE(hh, sb->ranges, it);
  sb->c.va_held -= size;
  free(it);
out:
  pthread_mutex_unlock(&sb->mu);
  return rc;
}

static int sb_phys_create(void *ctx, uint64_t size, uint64_t *handle) {
  vs_space_backend *sb = ctx;
  int rc = VS_BACKEND_OK;
  pthread_mutex_lock(&sb->mu);
  sb->c.phys_create++;
  if (size == 0 || size % sb->granule || !handle) { sb->c.errors++; rc = VS_BACKEND_ERROR; goto out; }
  if (!phys_fits(sb, size)) { sb->c.oom++; rc = VS_BACKEND_OOM; goto out; }
  sb_item *it = item_new(++sb->next_handle, size, 0);
  if (!it) { rc = VS_BACKEND_ERROR; goto out; }
  HASH_ADD(hh, sb->handles, key, sizeof(uint64_t), it);
  phys_take(sb, size);
  *handle = it->key;
out:
  pthread_mutex_unlock(&sb->mu);
  return rc;
}

static int sb_phys_release(void *ctx, uint64_t handle, uint64_t size) {
  vs_space_backend *sb = ctx;
  int rc = VS_BACKEND_OK;
  pthread_mutex_lock(&sb->mu);
  sb->c.phys_release++;
  sb_item *it;
  HASH_FIND(hh, sb->handles, &handle, sizeof(uint64_t), it);
  /* extra counts live mappings of the handle; CUDA defers the release until
   * unmapped, but the arena must never rely on that. */
  if (!it || it->size != size || it->extra) { sb->c.errors++; rc = VS_BACKEND_ERROR; goto out; }
  HASH_DELETE(hh, sb->handles, it);
  sb->c.held -= size;
  free(it);
out:
  pthread_mutex_unlock(&sb->mu);
  return rc;
}

static int sb_map(void *ctx, uint64_t va, uint64_t size, uint64_t handle) {
  vs_space_backend *sb = ctx;
  int rc = VS_BACKEND_OK;
  pthread_mutex_lock(&sb->mu);
  sb->c.map++;
  sb_item *h;
  HASH_FIND(hh, sb->handles, &handle, sizeof(uint64_t), h);
  if (!h || h->size != size || va % sb->granule || !range_of(sb, va, size)) {
    sb->c.errors++; rc = VS_BACKEND_ERROR; goto out;
  }
  for (uint64_t p = va; p < va + size; p += sb->granule) {
    sb_item *m;
    HASH_FIND(hh, sb->maps, &p, sizeof(uint64_t), m);
    if (m) { sb->c.errors++; rc = VS_BACKEND_ERROR; goto out; }
  }
  for (uint64_t p = va; p < va + size; p += sb->granule) {
    /* One entry per granule so that unmap may cover several mappings. */
    sb_item *m = item_new(p, sb->granule, handle);
    if (!m) { rc = VS_BACKEND_ERROR; goto out; }
    HASH_ADD(hh, sb->maps, key, sizeof(uint64_t), m);
  }
  h->extra += size / sb->granule;
  sb->c.mapped += size;
out:
  pthread_mutex_unlock(&sb->mu);
  return rc;
}

static int sb_unmap(void *ctx, uint64_t va, uint64_t size) {
  vs_space_backend *sb = ctx;
  int rc = VS_BACKEND_OK;
  pthread_mutex_lock(&sb->mu);
  sb->c.unmap++;
  if (va % sb->granule || size % sb->granule || size == 0) { sb->c.errors++; rc = VS_BACKEND_ERROR; goto out; }
  for (uint64_t p = va; p < va + size; p += sb->granule) {
    sb_item *m;
    HASH_FIND(hh, sb->maps, &p, sizeof(uint64_t), m);
    if (!m) { sb->c.errors++; rc = VS_BACKEND_ERROR; goto out; }
  }
  for (uint64_t p = va; p < va + size; p += sb->granule) {
    sb_item *m, *h;
    HASH_FIND(hh, sb->maps, &p, sizeof(uint64_t), m);
    HASH_FIND(hh, sb->handles, &m->extra, sizeof(uint64_t), h);
    if (h) h->extra--;
    HASH_DELETE(hh, sb->maps, m);
    free(m);
  }
  sb->c.mapped -= size;
out:
  pthread_mutex_unlock(&sb->mu);
  return rc;
}

static int sb_sync(void *ctx) {
  vs_space_backend *sb = ctx;
  void (*hook)(void *);
  void *user;
  pthread_mutex_lock(&sb->mu);
  sb->c.sync++;
  hook = sb->hook;
  user = sb->hook_user;
  pthread_mutex_unlock(&sb->mu);
  if (hook) hook(user);
  return VS_BACKEND_OK;
}

static uint64_t sb_room(void *ctx) {
  vs_space_backend *sb = ctx;
  pthread_mutex_lock(&sb->mu);
  uint64_t r = sb->capacity == UINT64_MAX ? UINT64_MAX : sb->c.held < sb->capacity ? sb->capacity - sb->c.held : 0;
  pthread_mutex_unlock(&sb->mu);
  return r;
}

vs_space_backend *vs_space_backend_create(uint64_t capacity, uint64_t granule) {
  if (granule == 0) granule = 2ull << 20;
  if (granule < 512 || (granule & (granule - 1))) return NULL;
  vs_space_backend *sb = calloc(1, sizeof *sb);
  if (!sb) return NULL;
  pthread_mutex_init(&sb->mu, NULL);
  sb->capacity = capacity;
  sb->granule = granule;
  sb->next_va = SB_VA_BASE;
  return sb;
}

static void free_table(sb_item **t) {
  sb_item *it, *tmp;
  HASH_ITER(hh, *t, it, tmp) { HASH_DELETE(hh, *t, it); free(it); }
}

void vs_space_backend_destroy(vs_space_backend *sb) {
  if (!sb) return;
  free_table(&sb->chunks);
  free_table(&sb->ranges);
  free_table(&sb->handles);
  free_table(&sb->maps);
  pthread_mutex_destroy(&sb->mu);
  free(sb);
}

vs_arena_backend vs_space_backend_get_mode(vs_space_backend *sb, int vmm) {
  vs_arena_backend b = {0};
  b.ctx = sb;
  b.chunk_alloc = sb_chunk_alloc;
  b.chunk_free = sb_chunk_free;
  b.sync = sb_sync;
  b.room = sb_room;
  if (vmm) {
    b.granule = sb->granule;
    b.va_reserve = sb_va_reserve;
    b.va_free = sb_va_free;
    b.phys_create = sb_phys_create;
    b.phys_release = sb_phys_release;
    b.map = sb_map;
    b.unmap = sb_unmap;
  }
  return b;
}

vs_arena_backend vs_space_backend_get(vs_space_backend *sb) { return vs_space_backend_get_mode(sb, 1); }

void vs_space_backend_counters(vs_space_backend *sb, vs_space_counters *out) {
  pthread_mutex_lock(&sb->mu);
  *out = sb->c;
  pthread_mutex_unlock(&sb->mu);
}

uint64_t vs_space_backend_calls(const vs_space_counters *c) {
  return c->chunk_alloc + c->chunk_free + c->va_reserve + c->va_free + c->phys_create +
         c->phys_release + c->map + c->unmap + c->sync;
}

void vs_space_backend_set_capacity(vs_space_backend *sb, uint64_t capacity) {
  pthread_mutex_lock(&sb->mu);
  sb->capacity = capacity;
  pthread_mutex_unlock(&sb->mu);
}

void vs_space_backend_set_sync_hook(vs_space_backend *sb, void (*hook)(void *user), void *user) {
  pthread_mutex_lock(&sb->mu);
  sb->hook = hook;
  sb->hook_user = user;
  pthread_mutex_unlock(&sb->mu);
}

/* The program's VMM handles: references and mappings (vmm_life.h). Two
 * uthash tables under one lock: handles by value, mappings by start.
 * Invariant: a handle entry exists from its cuMemCreate until its memory
 * ends (no reference and no mapping left), and every mapping entry names
 * a handle entry whose `maps` counts it. */
#include "vmm_life.h"

#include <pthread.h>
#include <stdlib.h>
#include <uthash.h>

typedef struct life {
  uint64_t handle;
  uint64_t refs;   /* references the program holds (create, retains, less releases) */
  uint64_t maps;   /* live mappings */
  UT_hash_handle hh;
} life;

typedef struct mapping {
  uint64_t va, size, handle;
  UT_hash_handle hh;
} mapping;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static life *g_handles;
static mapping *g_maps;

/* g_lock held */
static life *find(uint64_t handle) {
  life *l = NULL;
  HASH_FIND(hh, g_handles, &handle, sizeof handle, l);
  return l;
}

static void drop(life *l) {
  HASH_DEL(g_handles, l);
  free(l);
}

/* g_lock held: the mappings of handle (every mapping: NULL) go. */
static void drop_mappings(const uint64_t *handle) {
  mapping *m, *t;
  HASH_ITER(hh, g_maps, m, t) {
    if (!handle || m->handle == *handle) {
      HASH_DEL(g_maps, m);
      free(m);
    }
  }
}

void vs_vmm_life_created(uint64_t handle) {
  pthread_mutex_lock(&g_lock);
  life *l = find(handle);
  if (l) {   /* a value the driver reused: the old memory ended unseen, and its mappings with it */
    drop_mappings(&handle);
    drop(l);
  }
  l = calloc(1, sizeof *l);
  if (l) {   /* out of memory: the handle is unknown here, and its release ends it (the old rule) */
    l->handle = handle;
    l->refs = 1;
    HASH_ADD(hh, g_handles, handle, sizeof l->handle, l);
  }
  pthread_mutex_unlock(&g_lock);
}

void vs_vmm_life_retained(uint64_t handle) {
  pthread_mutex_lock(&g_lock);
  life *l = find(handle);
  if (l) l->refs++;
  pthread_mutex_unlock(&g_lock);
}

int vs_vmm_life_release(uint64_t handle) {
  pthread_mutex_lock(&g_lock);
  life *l = find(handle);
  int ends = 1;
  if (l && l->refs) {
    ends = l->refs == 1 && l->maps == 0;
    if (ends) drop(l);
    else l->refs--;
  }
  pthread_mutex_unlock(&g_lock);
  return ends;
}

void vs_vmm_life_mapped(uint64_t handle, uint64_t va, uint64_t size) {
  pthread_mutex_lock(&g_lock);
  life *l = find(handle);
  mapping *m = NULL;
  if (l) HASH_FIND(hh, g_maps, &va, sizeof va, m);
  if (l && !m && (m = calloc(1, sizeof *m)) != NULL) {
    m->va = va;
    m->size = size;
    m->handle = handle;
    HASH_ADD(hh, g_maps, va, sizeof m->va, m);
    l->maps++;
  }
  pthread_mutex_unlock(&g_lock);
}

/* g_lock held: mapping m goes; its handle's memory ends when it was the
 * last mapping of a released handle (then appended to *ended). */
static void unmap_one(mapping *m, uint64_t **ended, size_t *n, size_t *cap) {
  life *l = find(m->handle);
  HASH_DEL(g_maps, m);
  free(m);
  if (!l) return;
  if (l->maps) l->maps--;
  if (l->maps || l->refs) return;
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 8;
    uint64_t *v = realloc(*ended, nc * sizeof *v);
    if (!v) return;   /* kept: its entry stays, without references or mappings */
    *ended = v;
    *cap = nc;
  }
  (*ended)[(*n)++] = l->handle;
  drop(l);
}

size_t vs_vmm_life_unmapped(uint64_t va, uint64_t size, uint64_t **ended) {
  size_t n = 0, cap = 0;
  *ended = NULL;
  uint64_t end = va + size < va ? UINT64_MAX : va + size;
  pthread_mutex_lock(&g_lock);
  /* The usual unmap is one mapping, or mappings laid end to end: found by
   * their starts; anything else by a walk of them all. */
  uint64_t at = va;
  mapping *m = NULL;
  while (at < end) {
    HASH_FIND(hh, g_maps, &at, sizeof at, m);
    if (!m) break;
    at = m->va + m->size;
    unmap_one(m, ended, &n, &cap);
  }
  if (at < end) {
    mapping *t;
    HASH_ITER(hh, g_maps, m, t) {
      if (m->va >= at && m->va < end) unmap_one(m, ended, &n, &cap);
    }
  }
  pthread_mutex_unlock(&g_lock);
  if (!n) {
    free(*ended);
    *ended = NULL;
  }
  return n;
}

/* A fork child holds none of the parent's VMM memory. */
void vs_vmm_life_atfork_child(void) {
  pthread_mutex_init(&g_lock, NULL);
  life *l, *lt;
  HASH_ITER(hh, g_handles, l, lt) drop(l);
  drop_mappings(NULL);
}

/* The set of live allocations the shim knows, keyed by (space, address or
 * VMM handle), striped by key hash with one lock per stripe so threads that
 * allocate and free different pointers rarely meet.
 *
 * Invariant: a key is in at most one record. A key is removed *before* the
 * driver frees it and put back if the driver refuses, so a concurrent
 * allocation that the driver gives the same address can never have its
 * fresh record removed by a stale free.
 * Statically initialised: usable before any constructor. */
#ifndef VS_TRACKER_H
#define VS_TRACKER_H

#include <stddef.h>
#include <stdint.h>

/* Key spaces: a VMM handle and a device address may hold the same number. */
typedef enum vs_space {
  VS_SPACE_DEVPTR = 0,  /* cuMemAlloc*, async, pool, managed, IPC-opened */
  VS_SPACE_HANDLE,      /* cuMemCreate handles                           */
  VS_SPACE_VA,          /* cuMemAddressReserve ranges                    */
  VS_SPACE_ARRAY,       /* CUDA arrays and mipmapped arrays, by handle   */
  VS_SPACES
} vs_space;

typedef struct vs_alloc_info {
  uint64_t key;     /* device address, or VMM handle */
  uint64_t size;    /* bytes as accounted */
  int32_t card;
  int32_t kind;     /* vs_mem_kind */
  int32_t owner;    /* VS_OWNER_DRIVER: the driver's own allocation; VS_OWNER_ARENA: a block of the arena */
  uint16_t charged; /* 1 when its bytes were charged to the tenant quota at allocation */
  uint16_t sync_memops; /* an arena block's CU_POINTER_ATTRIBUTE_SYNC_MEMOPS as the program last set it */
  uint64_t ctx_id;  /* the context it was allocated in (contexts.h), 0 for memory no context owns */
  uint64_t buffer_id; /* an arena block's CU_POINTER_ATTRIBUTE_BUFFER_ID; 0 for the driver's own */
  uint64_t pool;      /* a driver pool's block: its pool's entry (pool_charge.h), else 0 */
} vs_alloc_info;

enum { VS_OWNER_DRIVER = 0, VS_OWNER_ARENA = 1 };

/* 0 inserted; 1 inserted over a stale record of the same key (returned in
 * *stale: the driver reused an address the shim never saw freed); -1 out of
 * memory (nothing inserted). */
int vs_tracker_insert(vs_space space, const vs_alloc_info *info, vs_alloc_info *stale);
/* 0 removed (copied to *out), -1 unknown key. kind_mask: bit (1 << kind) of
 * the kinds this caller may remove; a record of another kind stays. */
int vs_tracker_remove(vs_space space, uint64_t key, unsigned kind_mask, vs_alloc_info *out);
/* 0 found (copied to *out), -1 unknown key. */
int vs_tracker_find(vs_space space, uint64_t key, vs_alloc_info *out);
/* The record's sync_memops becomes on (0 or 1); 0 found, -1 unknown key. */
int vs_tracker_set_sync_memops(vs_space space, uint64_t key, int on);
uint64_t vs_tracker_count(vs_space space);
/* Removes every record of space whose ctx_id is ctx_id and whose kind is
 * in kind_mask; returns how many, with their copies in *out (malloc'd, the
 * caller frees; NULL when none). Out of host memory it stops early: what
 * it could not return stays recorded. */
size_t vs_tracker_take_ctx(vs_space space, uint64_t ctx_id, unsigned kind_mask, vs_alloc_info **out);

/* fork: prepare takes every stripe lock (in order; few enough that a thread
 * may hold them all), parent releases them, child re-creates them and drops
 * every record: the child starts clean. */
void vs_tracker_atfork_prepare(void);
void vs_tracker_atfork_parent(void);
void vs_tracker_atfork_child(void);

#endif

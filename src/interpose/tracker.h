/* The set of live allocations the shim knows, keyed by address (or VMM
 * handle), striped by key hash with one lock per stripe so threads that
 * allocate and free different pointers rarely meet.
 *
 * Invariant: a key is in at most one record. A key is removed *before* the
 * driver frees it and put back if the driver refuses, so a concurrent
 * allocation that the driver gives the same address can never have its
 * fresh record removed by a stale free. */
#ifndef VS_TRACKER_H
#define VS_TRACKER_H

#include <stdint.h>

typedef struct vs_alloc_info {
  uint64_t key;     /* device address, or VMM handle */
  uint64_t size;    /* bytes as accounted */
  int32_t card;
  int32_t kind;     /* vs_mem_kind */
} vs_alloc_info;

typedef struct vs_tracker vs_tracker;

/* The trackers, one per key space (a VMM handle and a device address may
 * hold the same number). Statically initialised: usable before any
 * constructor. */
extern vs_tracker vs_track_devptr;  /* cuMemAlloc*, async, pool, managed, IPC-opened */
extern vs_tracker vs_track_handle;  /* cuMemCreate handles */
extern vs_tracker vs_track_va;      /* cuMemAddressReserve ranges */

/* 0 inserted; 1 inserted over a stale record of the same key (returned in
 * *stale: the driver reused an address the shim never saw freed); -1 out of
 * memory (nothing inserted). */
int vs_tracker_insert(vs_tracker *t, const vs_alloc_info *info, vs_alloc_info *stale);
/* 0 removed (copied to *out), -1 unknown key. kind_mask: bit (1 << kind) of
 * the kinds this caller may remove; a record of another kind stays. */
int vs_tracker_remove(vs_tracker *t, uint64_t key, unsigned kind_mask, vs_alloc_info *out);
/* 0 found (copied to *out), -1 unknown key. */
int vs_tracker_find(vs_tracker *t, uint64_t key, vs_alloc_info *out);
uint64_t vs_tracker_count(vs_tracker *t);

/* fork: prepare takes every stripe lock (in order), parent releases them,
 * child re-creates them and drops every record: the child starts clean. */
void vs_tracker_atfork_prepare(vs_tracker *t);
void vs_tracker_atfork_parent(vs_tracker *t);
void vs_tracker_atfork_child(vs_tracker *t);

#endif

/* The arena's types that its own core needs too (core.h): the handle, the
 * backend the arena asks for device memory, and its configuration. Part of
 * the contract of arena.h, which includes this file; kept apart so that the
 * arena's internals never include the header of the functions built on
 * them. */
#ifndef VS_ARENA_TYPES_H
#define VS_ARENA_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef struct vs_arena vs_arena;

/* ---- Backend ------------------------------------------------------------ */
enum { VS_BACKEND_OK = 0, VS_BACKEND_OOM = 1, VS_BACKEND_ERROR = 2 };

typedef struct vs_arena_backend {
  void *ctx;
  /* One contiguous device allocation (cuMemAlloc) and its release. */
  int (*chunk_alloc)(void *ctx, uint64_t size, uint64_t *addr);
  int (*chunk_free)(void *ctx, uint64_t addr, uint64_t size);

  /* Virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap +
   * cuMemSetAccess, ...). All NULL and granule 0 when the card lacks VMM.
   * Physical memory comes in granules of `granule` bytes. */
  uint64_t granule;
  int (*va_reserve)(void *ctx, uint64_t size, uint64_t *va);
  int (*va_free)(void *ctx, uint64_t va, uint64_t size);
  int (*phys_create)(void *ctx, uint64_t size, uint64_t *handle);
  int (*phys_release)(void *ctx, uint64_t handle, uint64_t size);
  int (*map)(void *ctx, uint64_t va, uint64_t size, uint64_t handle); /* maps and grants access */
  int (*unmap)(void *ctx, uint64_t va, uint64_t size);

  /* Stream safety: returns once all device work enqueued before the call
   * has finished (cuCtxSynchronize). Freed blocks are not handed out again
   * until a sync that started after their free has returned. */
  int (*sync)(void *ctx);

  /* Optional (NULL: no bound). Before the arena grows for a request of
   * `size` bytes: VS_BACKEND_OK when it could ever be served, else
   * VS_BACKEND_OOM (larger than the card, or than all the backend may ever
   * hold, e.g. a quota). The arena then fails the request at once, without
   * asking for a byte: a request that can never fit must not make it grow
   * (and keep) everything it can get first. */
  int (*could_fit)(void *ctx, uint64_t size);

  /* Optional (NULL: not known). Physical bytes the backend could still
   * grant now, as far as it knows without asking the driver (a tenant's
   * limit and the card's books: src/interpose/quota), UINT64_MAX when it
   * does not know. The arena reads it before it grows: a card nearly full
   * is treated as one that has refused (heap.c, "pressure"). */
  uint64_t (*room)(void *ctx);

  /* Optional (NULL: the arena syncs instead). Makes all work enqueued on
   * `stream` from now on wait for all work enqueued on the lane (arena.h,
   * "The lane") before the call, without blocking the host (an event
   * recorded on the lane, then cuStreamWaitEvent). VS_BACKEND_OK, or an
   * error (the arena then syncs). */
  int (*order_after_lane)(void *ctx, uint64_t stream);

  /* Optional (NULL: never). Nonzero while the backend must not be asked to
   * synchronise or to take memory back: the program is capturing a CUDA
   * graph, and a cuCtxSynchronize, cuMemFree or cuMemUnmap then would fail
   * and break its capture. Meanwhile the arena makes no sync (a freed
   * block not yet reusable stays so: a request grows instead), orders no
   * stream after the lane, and gives nothing back (trims, decay and the
   * moving of handles wait until the hold ends). */
  int (*hold)(void *ctx);
} vs_arena_backend;

/* ---- Configuration ------------------------------------------------------ */
typedef enum { VS_ARENA_CHUNKS = 1, VS_ARENA_VMM = 2 } vs_arena_mode;

typedef struct vs_arena_config {
  vs_arena_mode mode;          /* VMM needs backend->granule != 0 */
  uint64_t release_threshold;  /* free device bytes kept cached; beyond it memory goes back */
} vs_arena_config;

#define VS_ARENA_MAX_CLASSES 128   /* size classes of the slabs (vs_arena_stats) */

#endif

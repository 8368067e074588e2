/* A simulated device address space implementing vs_arena_backend, with no
 * device bytes behind it. The replay tool and the unit tests run the arena
 * over it.
 *
 * - Physical bytes: chunks plus physical handles. A call that would hold
 *   more than `capacity` returns VS_BACKEND_OOM (a refusal, as the driver
 *   or the tenant quota would); nothing changes then. room() answers
 *   capacity less what is held (UINT64_MAX when unlimited).
 * - Virtual addresses are bump-allocated and never reused, so a stale
 *   pointer can never alias a later allocation: chunks are 512-byte
 *   aligned, VA reservations are granule aligned.
 * - Every call is validated (unknown address, double free, mapping over a
 *   mapping, unmapping what is not mapped): a misuse returns
 *   VS_BACKEND_ERROR and is counted in `errors`, so tests can assert 0.
 * - sync() is a no-op that is counted; a test may install a hook to make
 *   it observable (stream-safety tests).
 *
 * Thread safe: one mutex; it models the driver, not the hot path. */
#ifndef VS_SPACE_BACKEND_H
#define VS_SPACE_BACKEND_H

#include <stdint.h>
#include "arena.h"

typedef struct vs_space_backend vs_space_backend;

typedef struct vs_space_counters {
  uint64_t chunk_alloc, chunk_free;
  uint64_t va_reserve, va_free;
  uint64_t phys_create, phys_release;
  uint64_t map, unmap;
  uint64_t sync;
  uint64_t oom;        /* refusals (VS_BACKEND_OOM returned) */
  uint64_t errors;     /* misuses (VS_BACKEND_ERROR returned) */
  uint64_t held, peak_held;       /* physical bytes: chunks + handles */
  uint64_t va_held, mapped;       /* reserved VA bytes, mapped bytes */
} vs_space_counters;

/* capacity: physical bytes (UINT64_MAX for unlimited). granule: VMM
 * granule in bytes (0 = 2 MiB default; a power of two >= 512). */
vs_space_backend *vs_space_backend_create(uint64_t capacity, uint64_t granule);
void vs_space_backend_destroy(vs_space_backend *sb);

/* The backend table. vmm = 0 leaves the VMM entries NULL and granule 0, as
 * on a card without VMM. */
vs_arena_backend vs_space_backend_get(vs_space_backend *sb);
vs_arena_backend vs_space_backend_get_mode(vs_space_backend *sb, int vmm);

void vs_space_backend_counters(vs_space_backend *sb, vs_space_counters *out);
/* Sum of every call counted above except oom/errors/held: driver calls. */
uint64_t vs_space_backend_calls(const vs_space_counters *c);
void vs_space_backend_set_capacity(vs_space_backend *sb, uint64_t capacity);
/* Called at the start of every sync(), outside the backend's lock. */
void vs_space_backend_set_sync_hook(vs_space_backend *sb, void (*hook)(void *user), void *user);

#endif

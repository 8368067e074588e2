/* The arena inside the shim (see arena_glue.h): one vs_arena per card,
 * created on the first cuMemAlloc on that card, with the mode the settings
 * choose for what the card supports and the backend of arena_backend.c. */
#include "arena_glue.h"

#include "arena_backend.h"
#include "driver_table.h"
#include "guard.h"
#include "ipc_record.h"
#include "ipc_vmm.h"
#include "log.h"
#include "memory_service.h"
#include "settings.h"

#include <pthread.h>
#include <stdatomic.h>

enum { CARD_UNKNOWN = 0, CARD_ARENA, CARD_OFF };

static _Atomic(vs_arena *) g_arena[VRAMSHIM_MAX_CARDS];
static _Atomic int g_state[VRAMSHIM_MAX_CARDS];
static _Atomic int g_any;   /* some card has an arena: range lookups need to look */
static pthread_mutex_t g_create_lock = PTHREAD_MUTEX_INITIALIZER;
/* A forked child's inheritance: kept reachable (never destroyed: its memory
 * was the parent's), never used. */
static vs_arena *g_orphans[VRAMSHIM_MAX_CARDS];
/* A VMM arena replaced by a chunks one (never destroyed: a thread may still
 * be inside it; it holds no memory). */
static vs_arena *g_retired[VRAMSHIM_MAX_CARDS];
static _Atomic int g_is_vmm[VRAMSHIM_MAX_CARDS];

#define DEFAULT_RELEASE_THRESHOLD (1ull << 30)

static const char *mode_name(vs_cfg_arena m) {
  return m == VS_CFG_ARENA_VMM ? "vmm" : m == VS_CFG_ARENA_CHUNKS ? "chunks" : "off";
}

/* The config's release_threshold against the card's capacity (default 1 GiB). */
static uint64_t release_threshold(int card, const vs_real_table *real, uint64_t *capacity_out) {
  size_t capacity = 0;
  if (real && real->cuDeviceTotalMem_v2) {
    vs_guard_enter();
    if (real->cuDeviceTotalMem_v2(&capacity, card) != CUDA_SUCCESS) capacity = 0;
    vs_guard_leave();
  }
  if (capacity_out) *capacity_out = capacity;
  const vs_config *cfg = &vs_settings_get()->config;
  return cfg->has_release_threshold ? vs_size_resolve(cfg->release_threshold, capacity) : DEFAULT_RELEASE_THRESHOLD;
}

/* Under g_create_lock. NULL with *res set when the driver cannot say
 * what the card is yet (no cuInit: the next request tries again); NULL
 * with the card marked OFF when the arena is off for it. */
static vs_arena *create(int card, CUresult *res) {
  const vs_real_table *real = vs_driver_if_loaded();
  if (!real) {
    *res = vs_driver_missing_error();
    return NULL;
  }
  int has_vmm = 0;
  if (real->cuDeviceGetAttribute) {
    CUresult r;
    vs_guard_enter();
    r = real->cuDeviceGetAttribute(&has_vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, card);
    vs_guard_leave();
    if (r != CUDA_SUCCESS) {
      *res = r;
      return NULL;
    }
  }
  vs_cfg_arena mode = vs_settings_arena(has_vmm);
  if (mode == VS_CFG_ARENA_OFF) {
    VS_INFO("card %d: arena off, every allocation goes to the driver", card);
    atomic_store(&g_state[card], CARD_OFF);
    return NULL;
  }
  uint64_t capacity = 0;
  vs_arena_config ac;
  ac.release_threshold = release_threshold(card, real, &capacity);
  vs_arena_backend be;
  vs_arena *a = NULL;
  CUresult r = vs_backend_init(card, mode == VS_CFG_ARENA_VMM, &be);
  if (mode == VS_CFG_ARENA_VMM) {
    ac.mode = VS_ARENA_VMM;
    if (r == CUDA_SUCCESS) a = vs_arena_create(&ac, &be);
    if (!a) {
      VS_INFO("card %d: the VMM arena cannot start (driver said %d, granule %llu); using chunks", card, (int)r,
              (unsigned long long)be.granule);
      mode = VS_CFG_ARENA_CHUNKS;
      vs_backend_chunks(card, &be);
    }
  }
  if (!a) {
    ac.mode = VS_ARENA_CHUNKS;
    a = vs_arena_create(&ac, &be);
  }
  if (!a) {
    VS_ERROR("card %d: the arena cannot start (out of host memory?); every allocation goes to the driver", card);
    atomic_store(&g_state[card], CARD_OFF);
    return NULL;
  }
  char b1[32], b2[32];
  VS_INFO("card %d: arena %s, release threshold %s (card %s)", card, mode_name(mode),
          vs_fmt_bytes(ac.release_threshold, b1, sizeof b1), vs_fmt_bytes(capacity, b2, sizeof b2));
  atomic_store(&g_is_vmm[card], mode == VS_CFG_ARENA_VMM);
  atomic_store(&g_arena[card], a);
  atomic_store(&g_state[card], CARD_ARENA);
  atomic_store(&g_any, 1);
  return a;
}

static vs_arena *arena_for(int card, CUresult *res) {
  vs_arena *a = atomic_load_explicit(&g_arena[card], memory_order_acquire);
  if (__builtin_expect(a != NULL, 1)) return a;
  if (atomic_load(&g_state[card]) == CARD_OFF) return NULL;
  pthread_mutex_lock(&g_create_lock);
  a = atomic_load(&g_arena[card]);
  if (!a && atomic_load(&g_state[card]) == CARD_UNKNOWN) a = create(card, res);
  pthread_mutex_unlock(&g_create_lock);
  return a;
}

/* A VMM arena whose address range the driver refused (a driver or a host
 * with little virtual address space) and that holds nothing yet becomes a
 * chunks arena, said once. Returns the card's arena now. */
static vs_arena *fall_back_to_chunks(int card, vs_arena *failed) {
  pthread_mutex_lock(&g_create_lock);
  if (atomic_load(&g_arena[card]) == failed) {
    vs_arena_stats st;
    vs_arena_get_stats(failed, &st);
    if (st.reserved_bytes == 0 && st.live_count == 0) {
      vs_arena_config ac = {VS_ARENA_CHUNKS, release_threshold(card, vs_driver_if_loaded(), NULL)};
      vs_arena_backend be;
      vs_backend_chunks(card, &be);
      vs_arena *a = vs_arena_create(&ac, &be);
      if (a) {
        VS_INFO("card %d: the driver refused the VMM arena its address range; using chunks", card);
        g_retired[card] = failed;
        atomic_store(&g_is_vmm[card], 0);
        atomic_store(&g_arena[card], a);
      }
    }
  }
  vs_arena *now = atomic_load(&g_arena[card]);
  pthread_mutex_unlock(&g_create_lock);
  return now;
}

int vs_arena_glue_alloc(int card, uint64_t size, uint64_t *addr, CUresult *res) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return VS_MEM_PASS;
  CUresult why = CUDA_SUCCESS;
  vs_arena *a = arena_for(card, &why);
  if (!a) {
    if (why == CUDA_SUCCESS) return VS_MEM_PASS;   /* off for this card */
    *res = why;                                    /* the driver is not ready: its own error */
    return VS_MEM_DONE;
  }
  if (size == 0) {   /* what the driver says to cuMemAlloc(0) */
    *res = CUDA_ERROR_INVALID_VALUE;
    return VS_MEM_DONE;
  }
  vs_backend_clear_error();
  int rc = vs_arena_alloc(a, size, addr);
  if (rc != VS_BACKEND_OK) {
    /* The VMM arena may have been refused its address range: by this
     * request (fall back now), or by another thread's, which already
     * replaced the card's arena while this one was failing (use it). */
    vs_arena *now = atomic_load(&g_arena[card]);
    if (now == a && atomic_load(&g_is_vmm[card]) && vs_backend_va_failed(card)) now = fall_back_to_chunks(card, a);
    if (now != a) {
      vs_backend_clear_error();
      rc = vs_arena_alloc(now, size, addr);
    }
  }
  if (rc == VS_BACKEND_OK) {
    *res = CUDA_SUCCESS;
  } else if (rc == VS_BACKEND_OOM) {
    *res = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    /* The driver's own error (no context, say); without one the arena
     * could not place the request at all, which the driver calls OOM. */
    CUresult e = vs_backend_last_error();
    *res = e != CUDA_SUCCESS ? e : CUDA_ERROR_OUT_OF_MEMORY;
  }
  return VS_MEM_DONE;
}

vs_arena *vs_arena_glue_get(int card) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return NULL;
  return atomic_load_explicit(&g_arena[card], memory_order_acquire);
}

int vs_arena_glue_free(int card, uint64_t addr) {
  vs_arena *a = vs_arena_glue_get(card);
  return a ? vs_arena_free(a, addr) : -1;
}

void vs_arena_glue_trim(int card) {
  vs_arena *a = vs_arena_glue_get(card);
  if (a) vs_arena_trim(a, 0);
}

/* The arena with a live block around ptr (its card in *card, the block's
 * start and size in *base, *size), or NULL. */
static vs_arena *find_block(uint64_t ptr, int *card, uint64_t *base, uint64_t *size) {
  if (!atomic_load_explicit(&g_any, memory_order_relaxed)) return NULL;
  for (int c = 0; c < VRAMSHIM_MAX_CARDS; c++) {
    vs_arena *a = atomic_load_explicit(&g_arena[c], memory_order_acquire);
    if (a && vs_arena_lookup(a, ptr, base, size) == 0) {
      *card = c;
      return a;
    }
  }
  return NULL;
}

int vs_arena_glue_range(uint64_t ptr, uint64_t *base, uint64_t *size) {
  int card;
  return find_block(ptr, &card, base, size) ? VS_MEM_DONE : VS_MEM_PASS;
}

int vs_arena_glue_placement(uint64_t ptr, int *card, uint64_t *base, uint64_t *size, uint64_t *chunk_base,
                            uint64_t *offset, int *vmm_backed) {
  int c;
  vs_arena *a = find_block(ptr, &c, base, size);
  if (!a || vs_arena_placement(a, *base, chunk_base, offset, vmm_backed) != 0) return -1;
  *card = c;
  return 0;
}

int vs_arena_glue_holds(uint64_t addr) {
  return atomic_load_explicit(&g_any, memory_order_relaxed) && vs_backend_holds(addr);
}

uint64_t vs_arena_glue_cached(int card) {
  vs_arena *a = vs_arena_glue_get(card);
  if (!a) return 0;
  vs_arena_stats st;
  vs_arena_get_stats(a, &st);
  return st.reserved_bytes > st.live_bytes ? st.reserved_bytes - st.live_bytes : 0;
}

int vs_arena_glue_is_vmm(int card) {
  if (card < 0 || card >= VRAMSHIM_MAX_CARDS) return 0;
  return atomic_load(&g_is_vmm[card]);
}

void vs_arena_glue_atfork_child(void) {
  /* A fresh, empty arena set: the parent's memory is not the child's (CUDA
   * does not survive fork). Another parent thread may have held an arena
   * lock at the fork: the old arenas are never touched again. */
  for (int c = 0; c < VRAMSHIM_MAX_CARDS; c++) {
    vs_arena *a = atomic_load(&g_arena[c]);
    if (a) g_orphans[c] = a;
    atomic_store(&g_is_vmm[c], 0);
    atomic_store(&g_arena[c], NULL);
    atomic_store(&g_state[c], CARD_UNKNOWN);
  }
  atomic_store(&g_any, 0);
  pthread_mutex_init(&g_create_lock, NULL);
  vs_backend_atfork_child();
  vs_ipc_atfork_child();
  vs_ipc_vmm_atfork_child();
}

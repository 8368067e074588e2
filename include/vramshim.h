/* vramshim: the optional in-process API of libvramshim.so.
 *
 * A program never needs this header: preloading the shim is enough. It is
 * for programs and tests that want to read the shim's own accounting.
 * Every function is safe to call from any thread, before or after the
 * first CUDA call, and never loads the CUDA driver by itself.
 *
 * A program that must also run without the shim finds these functions
 * with dlsym(RTLD_DEFAULT, "vramshim_stats") and treats NULL as "no shim". */
#ifndef VRAMSHIM_H
#define VRAMSHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VRAMSHIM_MAX_CARDS 16

/* ---- Driver call kinds counted per card --------------------------------- */
typedef enum vramshim_driver_call {
  VRAMSHIM_CALL_MEM_ALLOC = 0,     /* cuMemAlloc, cuMemAllocPitch, CUDA array creation */
  VRAMSHIM_CALL_MEM_ALLOC_MANAGED, /* cuMemAllocManaged                      */
  VRAMSHIM_CALL_MEM_FREE,          /* cuMemFree, CUDA array destruction      */
  VRAMSHIM_CALL_MEM_ALLOC_ASYNC,   /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
  VRAMSHIM_CALL_MEM_FREE_ASYNC,    /* cuMemFreeAsync                         */
  VRAMSHIM_CALL_MEM_CREATE,        /* cuMemCreate (VMM physical memory)      */
  VRAMSHIM_CALL_MEM_RELEASE,       /* cuMemRelease                           */
  VRAMSHIM_CALL_MEM_MAP,           /* cuMemMap                               */
  VRAMSHIM_CALL_MEM_UNMAP,         /* cuMemUnmap                             */
  VRAMSHIM_CALL_ADDRESS_RESERVE,   /* cuMemAddressReserve                    */
  VRAMSHIM_CALL_ADDRESS_FREE,      /* cuMemAddressFree                       */
  VRAMSHIM_CALL_IPC_OPEN,          /* cuIpcOpenMemHandle                     */
  VRAMSHIM_CALL_IPC_CLOSE,         /* cuIpcCloseMemHandle                    */
  VRAMSHIM_CALL_SET_ACCESS,        /* cuMemSetAccess (after each cuMemMap of the arena) */
  VRAMSHIM_CALL_SYNC,              /* cuCtxSynchronize (the arena settling freed blocks) */
  VRAMSHIM_CALL_OTHER,             /* queries: cuMemGetInfo, cuDeviceTotalMem, granularity */
  VRAMSHIM_CALL_KINDS
} vramshim_driver_call;

/* ---- Per-card accounting ------------------------------------------------ */
/* "Live" counts device memory the program holds: cuMemAlloc*, pitch,
 * managed, async and pool allocations, and VMM physical memory
 * (cuMemCreate until cuMemRelease), each at the size the program asked for
 * (pitch allocations at pitch x height). Memory opened from another
 * process over IPC and reserved virtual address ranges hold no device
 * memory of this process; they have their own fields. */
typedef struct vramshim_card_stats {
  int32_t card;                /* device ordinal                                  */
  uint64_t live_bytes;         /* bytes of allocations the program holds now     */
  uint64_t live_count;         /* number of those allocations                     */
  uint64_t peak_live_bytes;    /* highest live_bytes seen                         */
  uint64_t reserved_bytes;     /* device bytes the shim holds from the driver     */
  uint64_t peak_reserved_bytes;
  uint64_t alloc_requests;     /* allocations asked of the shim                   */
  uint64_t free_requests;      /* frees asked of the shim (of known allocations)  */
  uint64_t failed_requests;    /* allocations refused (driver or quota)            */
  uint64_t driver_calls[VRAMSHIM_CALL_KINDS]; /* calls the shim made to the driver */
  uint64_t va_reserved_bytes;  /* virtual ranges held (cuMemAddressReserve)       */
  uint64_t ipc_open_bytes;     /* peer memory mapped in (cuIpcOpenMemHandle)      */
  uint64_t ipc_open_count;
} vramshim_card_stats;

/* Fills *out for one card. Returns 0, or -1 when card is out of range or
 * out is NULL. A card never touched reads as all zeros (card set). */
int vramshim_stats(int card, vramshim_card_stats *out);

/* What the driver's memory pools (cuMemPoolCreate's and the device's
 * default pool, as cuMemAllocAsync uses them) and the card's graph memory
 * pool (CUDA graphs' allocation nodes) reserve for this process on one
 * card, as the shim last read it: the bytes its tenant is charged for them,
 * beside reserved_bytes above. Either pointer may be NULL. Returns 0, or -1
 * when card is out of range. */
int vramshim_driver_pools(int card, uint64_t *pool_reserved_bytes, uint64_t *graph_reserved_bytes);

/* Number of cards the shim has seen (highest ordinal touched + 1). */
int vramshim_card_count(void);

/* The shim's version string, e.g. "0.1.0". */
const char *vramshim_version(void);

/* ---- How the program reached the hooks ---------------------------------- */
typedef enum vramshim_path {
  VRAMSHIM_PATH_DLSYM = 0,     /* dlsym(handle, "cu...") answered with a hook          */
  VRAMSHIM_PATH_PROCADDRESS,   /* cuGetProcAddress(_v2) answered with a hook           */
  VRAMSHIM_PATH_CALLS,         /* calls that entered the hook, by any path             */
  VRAMSHIM_PATHS
} vramshim_path;

/* How often `fn`, an exact ABI variant ("cuMemAlloc_v2", "cuMemAllocAsync_ptsz",
 * "cuGetProcAddress_v2"), was handed out or entered on `path`; fn NULL sums
 * every hook. 0 for a name the shim does not hook. */
uint64_t vramshim_hook_count(const char *fn, vramshim_path path);

/* The driver the shim forwards to: the path it loaded, or NULL while none is
 * loaded (not needed yet, or missing). */
const char *vramshim_driver_path(void);

#ifdef __cplusplus
}
#endif
#endif

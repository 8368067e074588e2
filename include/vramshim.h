/* vramshim: the optional in-process API of libvramshim.so.
 *
 * A program never needs this header: preloading the shim is enough. It is
 * for programs and tests that want to read the shim's own accounting.
 * Every function is safe to call from any thread, before or after the
 * first CUDA call. */
#ifndef VRAMSHIM_H
#define VRAMSHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VRAMSHIM_MAX_CARDS 16

/* ---- Driver call kinds counted per card --------------------------------- */
typedef enum vramshim_driver_call {
  VRAMSHIM_CALL_MEM_ALLOC = 0,     /* cuMemAlloc, cuMemAllocPitch            */
  VRAMSHIM_CALL_MEM_ALLOC_MANAGED, /* cuMemAllocManaged                      */
  VRAMSHIM_CALL_MEM_FREE,          /* cuMemFree                              */
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
  VRAMSHIM_CALL_OTHER,             /* info queries and everything else hooked */
  VRAMSHIM_CALL_KINDS
} vramshim_driver_call;

/* ---- Per-card accounting ------------------------------------------------ */
typedef struct vramshim_card_stats {
  int32_t card;                /* device ordinal                                  */
  uint64_t live_bytes;         /* bytes of allocations the program holds now     */
  uint64_t live_count;         /* number of those allocations                     */
  uint64_t peak_live_bytes;    /* highest live_bytes seen                         */
  uint64_t reserved_bytes;     /* device bytes the shim holds from the driver     */
  uint64_t peak_reserved_bytes;
  uint64_t alloc_requests;     /* allocations asked of the shim                   */
  uint64_t free_requests;      /* frees asked of the shim                          */
  uint64_t failed_requests;    /* allocations refused (driver or quota)            */
  uint64_t driver_calls[VRAMSHIM_CALL_KINDS]; /* calls the shim made to the driver */
} vramshim_card_stats;

/* Fills *out for one card. Returns 0, or -1 when card is out of range or
 * out is NULL. A card never touched reads as all zeros. */
int vramshim_stats(int card, vramshim_card_stats *out);

/* Number of cards the shim has seen (highest ordinal touched + 1). */
int vramshim_card_count(void);

/* The shim's version string, e.g. "0.1.0". */
const char *vramshim_version(void);

#ifdef __cplusplus
}
#endif
#endif

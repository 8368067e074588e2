/* Exporting an arena block over legacy IPC (cuIpcGetMemHandle) when the
 * block sits inside a larger driver chunk.
 *
 * The driver can only export the chunk, and its handle is the same for
 * every block of that chunk, so the block's offset cannot be derived from
 * the driver's handle. The exporter therefore hands the program a handle
 * of its own: a 16-byte magic, its pid, a record number and a random
 * nonce. The record, in the per-user file <ledger_dir>/ipc-<pid>.rec
 * (directory 0700, file 0600, opened without following symlinks), holds
 * the driver's handle of the chunk, the block's offset and size. An
 * importing shim recognises the magic, reads the record (checking owner,
 * mode and nonce), opens the driver's handle and adds the offset. A block
 * at offset 0 is exported with the driver's own handle (no record), so a
 * plain driver handle always opens at offset 0.
 *
 * Consequence: a handle with a record opens only in a process that runs
 * the shim (a process without it gets CUDA_ERROR_INVALID_VALUE from the
 * driver, never the wrong bytes). */
#ifndef VS_IPC_RECORD_H
#define VS_IPC_RECORD_H

#include "cuda_api.h"

#include <stdint.h>

/* Makes the program's handle for a block at offset in the chunk the driver
 * exported as *drv. 0, or -1 when the record cannot be written (said). */
int vs_ipc_export(const CUipcMemHandle *drv, uint64_t block, uint64_t offset, uint64_t size, int card,
                  CUipcMemHandle *out);
/* 1: h is a shim handle, resolved to the driver's handle, offset and size;
 * 0: not a shim handle (a driver's own); -1: a shim handle without a valid
 * record, -2: one whose block was freed (both said). */
int vs_ipc_resolve(const CUipcMemHandle *h, CUipcMemHandle *drv, uint64_t *offset, uint64_t *size);

/* Importer: pointers handed out at an offset from what the driver opened. */
void vs_ipc_opened_add(uint64_t ptr, uint64_t driver_ptr);
/* The driver's pointer behind ptr (one reference dropped when drop), 0 found / -1. */
int vs_ipc_opened_find(uint64_t ptr, uint64_t *driver_ptr, int drop);
/* The context ptr was opened in ends (the driver unmaps its openings): the
 * entry goes whatever its reference count. */
void vs_ipc_opened_forget(uint64_t ptr);

/* Exporter: the arena block at base is being freed. Its handles (records
 * here, VMM exports in ipc_vmm.h) no longer open: a later open gets the
 * driver's error for freed memory. Cheap when nothing was exported. */
void vs_ipc_block_freed(uint64_t base);

void vs_ipc_atfork_child(void);

#endif

/* Exporting VMM arena blocks over legacy IPC (cuIpcGetMemHandle /
 * cuIpcOpenMemHandle).
 *
 * A block of the VMM arena lies in the arena's VA reservation, on physical
 * handles (cuMemCreate) that other blocks may share; the driver cannot
 * export it through cuIpcGetMemHandle. The shim exports the physical memory
 * instead: its handles are created shareable as POSIX file descriptors
 * (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, where the card supports it).
 *
 * - Handle: 64 bytes, a 16-byte magic ("vramshim-ipc-v2"), the exporter's
 *   pid, an export number and a random nonce. Nothing else: it names an
 *   export, never memory.
 * - Exporter: cuIpcGetMemHandle records the export (block, size, card);
 *   the first one starts a background thread that serves a Unix socket
 *   <ledger_dir>/ipc-<pid>.sock (mode 0600, in the 0700 ledger folder; the
 *   peer must be this user or root, SO_PEERCRED). For a request naming a
 *   live export it exports each physical handle under the block's granules
 *   (cuMemExportToShareableHandle) and sends the descriptors (SCM_RIGHTS)
 *   with where they lie and each handle's size. Freeing the block ends its
 *   exports (later opens fail); memory already opened stays the importer's.
 * - Importer: imports each descriptor (cuMemImportFromShareableHandle),
 *   maps each handle whole, from offset 0 (a driver may refuse any other
 *   offset: an H200 with driver 580.159.04 does), at a fresh VA reservation
 *   of its own laid out as the handles lie around the block, and returns
 *   the block's address in it.
 *   Opening the same handle again in one process returns the same pointer
 *   (reference counted, as the driver's handles in the sim); the last
 *   cuIpcCloseMemHandle unmaps and frees the reservation. The imported
 *   physical memory lives until then, whatever the exporter does (free,
 *   exit, kill -9).
 *
 * Why a socket and not pidfd_getfd(2): the socket lets the exporter check,
 * at open time, that the block is still live and the peer is allowed, and
 * it works where ptrace is restricted (Yama ptrace_scope >= 1 refuses
 * pidfd_getfd to unrelated non-root processes); pidfd_getfd would need the
 * exporter to keep a descriptor open per export, racing with its free. */
#ifndef VS_IPC_VMM_H
#define VS_IPC_VMM_H

#include "cuda_api.h"
#include "driver_table.h"

#include <stdint.h>

/* 1 when h is a handle of this kind (a VMM export of some shim). */
int vs_ipc_vmm_is_handle(const CUipcMemHandle *h);

/* Exporter: the handle for the VMM block [base, base+size) on card.
 * CUDA_SUCCESS, or the error to return (said in the log). */
CUresult vs_ipc_vmm_export(uint64_t base, uint64_t size, int card, CUipcMemHandle *out);
/* Exporter: the block at base is being freed; its exports end. Cheap when
 * nothing was ever exported. */
void vs_ipc_vmm_block_freed(uint64_t base);

/* Importer: opens handle h (vs_ipc_vmm_is_handle). CUDA_SUCCESS with *ptr
 * and the block's size in *size, or the driver-style error. */
CUresult vs_ipc_vmm_open(const vs_real_table *real, const CUipcMemHandle *h, unsigned flags, CUdeviceptr *ptr,
                         uint64_t *size);
/* Importer: 1 when ptr is an open import (then closed: *r is the result), 0 not one. */
int vs_ipc_vmm_close(const vs_real_table *real, uint64_t ptr, CUresult *r);
/* Importer: the context the import at ptr was opened in ends; as the
 * driver unmaps a context's IPC openings, the import goes whatever its
 * reference count (no-op when ptr is not one). */
void vs_ipc_vmm_drop(const vs_real_table *real, uint64_t ptr);

void vs_ipc_vmm_atfork_child(void);

#endif

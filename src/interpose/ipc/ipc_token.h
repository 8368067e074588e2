/* The handle both IPC paths give the program (ipc_record.c: chunks-mode
 * arena blocks; ipc_vmm.c: VMM arena blocks): a magic naming the path and
 * its layout, the exporter's pid, an export number and a random nonce, in
 * the 64 bytes of a CUipcMemHandle. It names an export, never memory. */
#ifndef VRAMSHIM_IPC_TOKEN_H
#define VRAMSHIM_IPC_TOKEN_H

#include "cuda_api.h"

#include <stdint.h>

/* tag tells the exporter's pid apart from the same pid in another pid
 * namespace sharing the folder (ipc_channel.h). */
typedef struct vs_ipc_token {
  char magic[16];
  int32_t pid;
  uint32_t pad;
  uint64_t seq;
  uint64_t nonce;
  uint64_t tag;
} vs_ipc_token;
_Static_assert(sizeof(vs_ipc_token) <= sizeof(((CUipcMemHandle *)0)->reserved), "a token fits a handle");

#endif

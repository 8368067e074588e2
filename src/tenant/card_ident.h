/* One identity per card (issue 22): every per-card rule ([card N], `cards =`,
 * the card's ledger) is the physical card's, whatever ordinal a process
 * gives it under CUDA_VISIBLE_DEVICES.
 *
 * A card's ledger is named by its UUID (cuDeviceGetUuid). Its physical index,
 * which `[card N]` and `cards = N` name (docs/config.md: the index CUDA gives
 * the card in a process without CUDA_VISIBLE_DEVICES, = nvidia-smi's with
 * CUDA_DEVICE_ORDER=PCI_BUS_ID), is resolved from the process's
 * CUDA_VISIBLE_DEVICES: unset, the ordinal itself; an index entry, that
 * index; a UUID entry, the index a process that knew it wrote into the
 * card's ledger header; else unknown (-1: only UUID rules match the card). */
#ifndef VS_TENANT_CARD_IDENT_H
#define VS_TENANT_CARD_IDENT_H

/* The physical index of the card this process calls `ordinal` (its UUID
 * names its ledger in ledger_dir; may be NULL or ""), under
 * CUDA_VISIBLE_DEVICES = cvd (NULL: unset); -1 when it cannot be told. */
int vs_card_index(int ordinal, const char *uuid, const char *cvd, const char *ledger_dir);
#endif

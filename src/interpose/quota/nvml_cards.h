/* NVML's cards as the shim's cards, and each process's true footprint
 * (docs/nvml.md).
 *
 * A card is known by its UUID on both sides: NVML indexes cards
 * physically, CUDA by the ordinals CUDA_VISIBLE_DEVICES leaves, so an NVML
 * device is the shim's card whose CUDA UUID is the same. A process that
 * reads NVML without ever calling cuInit is mapped the same way: the shim
 * initialises the driver for itself (cuInit creates no context and takes
 * no card memory). */
#ifndef VS_NVML_CARDS_H
#define VS_NVML_CARDS_H

#include <stdint.h>

/* The shim's card (CUDA ordinal) whose UUID is uuid ("GPU-..."), or -1
 * when no ordinal this process's CUDA sees has it. */
int vs_nvml_card_of_uuid(const char *uuid);
/* The UUID of the shim's card (CUDA ordinal); 0, or -1 when unknown. */
int vs_nvml_card_uuid(int card, char out[96]);

/* The true footprint of this process on card: the bytes the driver reports
 * it holding there (NVML's per-process used memory) less what the shim
 * counted (its charge without the overhead) becomes the overhead charged
 * to the tenant (vs_quota_set_overhead). Only cards whose ledger is open;
 * nothing when NVML is missing or does not list this process (then the
 * overhead stands as it was, 0 unless NVML said otherwise before). */
void vs_footprint_refresh(int card);
void vs_footprint_refresh_all(void);
/* A context began (handle, on card; primary: the device's primary
 * context) or ended (a regular one by its handle with card -1; the primary
 * one of card by card). Called from the program's thread, outside the
 * recursion guard: with NVML the footprint is measured again (NVML is
 * loaded here if at all, never on the background thread); without it, the
 * context's own cost is measured against the card's reading in the ledger
 * (docs/nvml.md, "Without NVML"). */
void vs_footprint_ctx_begun(int card, uint64_t handle, int primary);
void vs_footprint_ctx_ended(uint64_t handle, int card);
/* Before the driver is asked for a context on card (the program's thread,
 * outside the recursion guard): until this process's first context has
 * begun, NVML's list of the card's processes is kept, so that
 * vs_footprint_ctx_begun finds which pid NVML lists this process under (a
 * PID namespace of its own: a container's). */
void vs_footprint_ctx_begins(int card);
/* That rule: the pid NVML lists this process under, from its lists of a
 * card's processes just before (before, nb) and just after (after, na)
 * the process's first context began there; own: this process's pid as it
 * sees it. own where it appeared; else the one pid that appeared, if one
 * did; 0 when none or several did (another process began a context at the
 * same moment). *own_foreign, in and out: set where own was listed before
 * (here, or on a card looked at earlier): own is then another process's
 * pid in NVML's lists and is never taken (exposed for its unit test). */
unsigned vs_footprint_identity(const unsigned *before, unsigned nb, const unsigned *after, unsigned na, unsigned own,
                               int *own_foreign);

/* One measurement of the footprint: what NVML said the process holds on
 * the card, what the shim counted there (its charge less the overhead,
 * read before NVML's figure), the stamp of the driver calls that can
 * change either (vs_acct_memory_calls), VS_FOOTPRINT_NOT_QUIET when one
 * returned, the count moved or bytes were charged while it was taken, and
 * the bytes charged meanwhile (window). */
#define VS_FOOTPRINT_NOT_QUIET UINT64_MAX
typedef struct vs_footprint_reading {
  uint64_t used, counted, calls, window;
} vs_footprint_reading;
/* The overhead after measurement now, with last the one before it and
 * overhead the one charged: used - counted where the two saw the same
 * quiet state, else overhead unchanged; at_ctx (a context's own
 * measurement): at once, less the bytes charged while it was taken
 * (vs_footprint_refresh's rule; exposed for its unit test). */
uint64_t vs_footprint_rule(const vs_footprint_reading *last, const vs_footprint_reading *now, uint64_t overhead,
                           int at_ctx);

void vs_nvml_cards_atfork_child(void);
#endif

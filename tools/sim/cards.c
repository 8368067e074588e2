/* The cards and processes of the shared state, for the sim's NVML
 * (nvml.c, a library of its own over this one): the extension API of
 * vramsim.h. Nothing here needs cuInit or a context; vramsim_nvml_attach
 * does cuInit's work (configuration, shared state) without counting a call.
 * Cards are numbered physically, as NVML numbers them: CUDA_VISIBLE_DEVICES
 * changes CUDA's ordinals (sim_cfg.phys), never these. */
#include "sim_internal.h"
#include <string.h>

SIM_API int vramsim_nvml_attach(void) { return sim_init() == CUDA_SUCCESS ? 0 : -1; }

SIM_API int vramsim_card_count(void) { return sim_initialized() ? sim_cfg.nphys : 0; }

SIM_API uint64_t vramsim_card_capacity(int card)
{
    if (!sim_initialized() || card < 0 || card >= sim_cfg.nphys) return 0;
    return sim_cfg.phys_capacity[card];
}

SIM_API int vramsim_card_identity(int card, char *name, unsigned name_len, unsigned char uuid[16], char *pci,
                                  unsigned pci_len)
{
    if (!sim_initialized() || card < 0 || card >= sim_cfg.nphys) return -1;
    if (name && name_len) sim_card_name(card, name, name_len);
    if (uuid) sim_card_uuid(card, uuid);
    if (pci && pci_len) sim_card_pci(card, pci, pci_len);
    return 0;
}

SIM_API unsigned vramsim_card_processes(int card, int32_t *pids, uint64_t *used, unsigned max)
{
    if (!sim_initialized() || card < 0 || card >= sim_cfg.nphys) return 0;
    return sim_state_processes(card, pids, used, max);
}

SIM_API uint64_t vramsim_context_overhead(void) { return sim_initialized() ? sim_cfg.context_overhead : 0; }

SIM_API int vramsim_driver_version(void) { return sim_driver_version(); }

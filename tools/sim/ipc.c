/* Legacy IPC handles. An exported allocation is named by the exporter's
 * pid, the memfd descriptor backing it and its buffer id; the importer opens
 * /proc/<pid>/fd/<fd> (same user) and maps the same pages, after checking
 * that the descriptor still names that very buffer (memfd name
 * "vramsim-<pid>-<id>.<card>"), so a stale handle fails instead of mapping some
 * other allocation (sim_os_ipc_map). On Windows every cuIpc* memory call is
 * CUDA_ERROR_NOT_SUPPORTED, as from a WDDM driver (os.h). */
#include "sim_internal.h"
#include <stdlib.h>
#include <string.h>

#define IPC_MAGIC 0x76735049u   /* "IPsv" */

struct ipc_wire {
    uint32_t magic;
    int32_t pid;
    int32_t fd;
    int32_t card;
    uint64_t id;
    uint64_t size;
    uint64_t map_len;
};
_Static_assert(sizeof(struct ipc_wire) <= CU_IPC_HANDLE_SIZE, "IPC handle is 64 bytes");

/* The record of memory another process exported, mapped here at m (a
 * cuIpcOpenMemHandle, or a pool pointer import): inserted in the memory
 * table, its address in *out; the mapping undone when out of host memory. */
CUresult sim_ipc_record(void *m, size_t map_len, size_t size, int card, int32_t pid, int32_t id, struct sim_ctx *ctx,
                        int pool_import, CUdeviceptr *out)
{
    struct sim_alloc *a = calloc(1, sizeof *a);
    if (!a) {
        sim_os_obj_unmap(m, map_len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->base = (uintptr_t)m;
    a->size = size;
    a->map_len = map_len;
    a->obj = SIM_OS_NO_OBJ;
    a->card = card;
    a->kind = SIM_K_IPC;
    a->ctx = ctx;
    a->id = sim_next_id();
    a->ipc_refs = 1;
    a->ipc_pid = pid;
    a->ipc_id = id;
    a->pool_import = pool_import;
    pthread_mutex_lock(&sim_mem_lock);
    sim_mem_insert(a);
    pthread_mutex_unlock(&sim_mem_lock);
    *out = a->base;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    SIM_COUNT(cuIpcGetMemHandle);
    SIM_REQUIRE_INIT();
    if (!sim_os_ipc_supported()) return CUDA_ERROR_NOT_SUPPORTED;
    if (!pHandle) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find_base((uintptr_t)dptr);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (a && a->kind == SIM_K_DEVICE && !a->free_pending) {
        struct ipc_wire w = {IPC_MAGIC, sim_os_pid(), (int32_t)a->obj, a->card, a->id, a->size, a->map_len};
        memset(pHandle, 0, sizeof *pHandle);
        memcpy(pHandle->reserved, &w, sizeof w);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_mem_lock);
    return r;
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned flags)
{
    SIM_REQUIRE_INIT();
    if (!sim_os_ipc_supported()) return CUDA_ERROR_NOT_SUPPORTED;
    if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) return CUDA_ERROR_INVALID_VALUE;
    struct sim_ctx *ctx;
    CUresult r = sim_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    struct ipc_wire w;
    memcpy(&w, handle.reserved, sizeof w);
    if (w.magic != IPC_MAGIC || w.pid <= 0 || w.fd < 0 || w.map_len == 0 || w.size > w.map_len)
        return CUDA_ERROR_INVALID_VALUE;
    if (w.pid == sim_os_pid()) return CUDA_ERROR_INVALID_CONTEXT;

    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *open_a = sim_mem_find_ipc(w.pid, w.id);
    if (open_a && !open_a->pool_import) {
        open_a->ipc_refs++;
        *pdptr = open_a->base;
        pthread_mutex_unlock(&sim_mem_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_mem_lock);

    void *m = NULL;
    int mr = sim_os_ipc_map(w.pid, w.fd, w.id, w.map_len, &m);
    if (mr != 0) return mr == -2 ? CUDA_ERROR_MAP_FAILED : CUDA_ERROR_INVALID_HANDLE;
    CUresult rr = sim_ipc_record(m, w.map_len, w.size, w.card, w.pid, w.id, ctx, 0, pdptr);
    if (rr != CUDA_SUCCESS) return rr;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    SIM_COUNT(cuIpcOpenMemHandle_v2);
    return ipc_open(pdptr, handle, Flags);
}

SIM_API CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    SIM_COUNT(cuIpcOpenMemHandle);
    return ipc_open(pdptr, handle, Flags);
}

SIM_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    SIM_COUNT(cuIpcCloseMemHandle);
    SIM_REQUIRE_INIT();
    if (!sim_os_ipc_supported()) return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find_base((uintptr_t)dptr);
    if (!a || a->kind != SIM_K_IPC || a->pool_import) {
        pthread_mutex_unlock(&sim_mem_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (--a->ipc_refs > 0) {
        pthread_mutex_unlock(&sim_mem_lock);
        return CUDA_SUCCESS;
    }
    sim_mem_remove(a);
    pthread_mutex_unlock(&sim_mem_lock);
    sim_free_record(a);
    return CUDA_SUCCESS;
}

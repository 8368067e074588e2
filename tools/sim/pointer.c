/* cuPointerGetAttribute(s): what the driver knows about an address. */
#include "sim_internal.h"
#include <stdbool.h>
#include <string.h>

struct ptr_info {
    int known;
    struct sim_alloc a;   /* copy of the record, taken under the lock */
};

static void lookup(CUdeviceptr p, struct ptr_info *pi)
{
    memset(pi, 0, sizeof *pi);
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find((uintptr_t)p);
    if (a && a->kind != SIM_K_VA) {
        pi->known = 1;
        pi->a = *a;
    } else if (a) {
        /* a mapped VMM address reads as its mapping */
        int dev;
        uintptr_t base;
        size_t size;
        if (sim_vmm_ptr_info((uintptr_t)p, &dev, &base, &size)) {
            pi->known = 1;
            pi->a = *a;
            pi->a.card = dev;
            pi->a.base = base;
            pi->a.size = pi->a.map_len = size;
        }
    }
    pthread_mutex_unlock(&sim_mem_lock);
}

/* Writes the attribute for a known pointer; unknown ones get the zero value
 * (cuPointerGetAttributes) or an error (cuPointerGetAttribute). */
static CUresult one_attr(CUpointer_attribute attr, void *data, CUdeviceptr p, const struct ptr_info *pi)
{
    const struct sim_alloc *a = &pi->a;
    int known = pi->known;
    int host = known && a->kind == SIM_K_HOST;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = known ? (CUcontext)a->ctx : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = !known ? 0 : host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = known ? p : 0;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (known && !host && a->kind != SIM_K_MANAGED) return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = known ? (void *)(uintptr_t)p : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(bool *)data = known && a->sync_memops;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(bool *)data = known;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(bool *)data = known && a->kind == SIM_K_MANAGED;
        break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(bool *)data = known && a->kind == SIM_K_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        *(bool *)data = false;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = known ? a->id : 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = known ? a->card : -2;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = known ? a->base : 0;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = known ? a->size : 0;
        break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data = known && a->kind == SIM_K_VA ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
        break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned int *)data = known ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : 0;
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = known ? (CUmemoryPool)a->pool : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = known ? a->map_len : 0;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(void **)data = known ? (void *)a->base : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *(unsigned long long *)data = known ? a->id : 0;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;   /* P2P tokens and anything unknown */
    }
    return CUDA_SUCCESS;
}

/* Only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS may be set (cuda.h), on memory the
 * driver allocated whole: a VMM mapping refuses it with
 * CUDA_ERROR_NOT_SUPPORTED, as the real driver does (UCX and libfabric
 * report it: VMM memory needs the context's CU_CTX_SYNC_MEMOPS instead). */
SIM_API CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SIM_COUNT(cuPointerSetAttribute);
    SIM_REQUIRE_INIT();
    if (!value || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mem_lock);
    struct sim_alloc *a = sim_mem_find((uintptr_t)ptr);
    CUresult r = !a ? CUDA_ERROR_INVALID_VALUE : a->kind == SIM_K_VA ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) a->sync_memops = *(const unsigned int *)value != 0;
    pthread_mutex_unlock(&sim_mem_lock);
    return r;
}

SIM_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SIM_COUNT(cuPointerGetAttribute);
    SIM_REQUIRE_INIT();
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    struct ptr_info pi;
    lookup(ptr, &pi);
    if (!pi.known) return CUDA_ERROR_INVALID_VALUE;
    return one_attr(attribute, data, ptr, &pi);
}

SIM_API CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr)
{
    SIM_COUNT(cuPointerGetAttributes);
    SIM_REQUIRE_INIT();
    if (numAttributes == 0 || !attributes || !data) return CUDA_ERROR_INVALID_VALUE;
    struct ptr_info pi;
    lookup(ptr, &pi);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
        CUresult r = one_attr(attributes[i], data[i], ptr, &pi);
        /* Unlike the singular call, a pointer the driver does not know is
         * not an error here: its attributes read as zero. */
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

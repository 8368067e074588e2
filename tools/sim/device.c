/* Device queries: each card is an H100-like device (compute capability 9.0)
 * with the capacity given by VRAMSIM_CARDS. */
#include "sim_internal.h"
#include <stdio.h>
#include <string.h>

SIM_API CUresult cuDeviceGetCount(int *count)
{
    SIM_COUNT(cuDeviceGetCount);
    SIM_REQUIRE_INIT();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = sim_cfg.ncards;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    SIM_COUNT(cuDeviceGet);
    SIM_REQUIRE_INIT();
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(ordinal);
    *dev = ordinal;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SIM_COUNT(cuDeviceGetName);
    SIM_REQUIRE_INIT();
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    sim_card_name(sim_cfg.phys[dev], name, (size_t)len);   /* the physical card's */
    return CUDA_SUCCESS;
}

/* The physical card's name (NVML numbers cards physically; an ordinal is
 * first turned into its physical index). */
void sim_card_name(int phys, char *name, size_t len)
{
    uint64_t mib = sim_cfg.phys_capacity[phys] >> 20;
    if (mib % 1024 == 0)
        snprintf(name, len, "vramsim GPU %d (%llu GiB)", phys, (unsigned long long)(mib / 1024));
    else
        snprintf(name, len, "vramsim GPU %d (%llu MiB)", phys, (unsigned long long)mib);
}

void sim_phys_uuid(int phys, uint64_t capacity, CUuuid *u)
{
    /* Stable per physical card: "GPU-5653494d-...", its index and capacity
     * in the last bytes. */
    static const unsigned char base[16] = {0x56, 0x53, 0x49, 0x4d, 0x8c, 0x1f, 0x4a, 0x2e,
                                           0x9b, 0x3d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    memcpy(u->bytes, base, 16);
    u->bytes[15] = (unsigned char)phys;
    u->bytes[14] = (unsigned char)(capacity >> 30);
}

void sim_card_uuid(int phys, unsigned char out[16])
{
    CUuuid u;
    sim_phys_uuid(phys, sim_cfg.phys_capacity[phys], &u);
    memcpy(out, u.bytes, 16);
}

void sim_card_pci(int phys, char *out, size_t len)
{
    snprintf(out, len, "00000000:%02X:00.0", 0x10 + phys);
}

/* The UUID of the card, whatever ordinal this process gives it. */
static void make_uuid(CUuuid *u, int dev) { sim_card_uuid(sim_cfg.phys[dev], (unsigned char *)u->bytes); }

SIM_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    SIM_COUNT(cuDeviceGetUuid);
    SIM_REQUIRE_INIT();
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    make_uuid(uuid, dev);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    SIM_COUNT(cuDeviceGetUuid_v2);
    SIM_REQUIRE_INIT();
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    make_uuid(uuid, dev);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetLuid(char *luid, unsigned int *mask, CUdevice dev)
{
    SIM_COUNT(cuDeviceGetLuid);
    (void)luid; (void)mask; (void)dev;
    SIM_REQUIRE_INIT();
    return CUDA_ERROR_NOT_SUPPORTED;   /* LUIDs exist on Windows only */
}

SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SIM_COUNT(cuDeviceTotalMem_v2);
    SIM_REQUIRE_INIT();
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    *bytes = sim_cfg.capacity[dev];
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    SIM_COUNT(cuDeviceTotalMem);
    SIM_REQUIRE_INIT();
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    uint64_t c = sim_cfg.capacity[dev];
    *bytes = c > 0xffffffffull ? 0xffffffffu : (unsigned)c;
    return CUDA_SUCCESS;
}

/* Attribute values of the modelled card; anything unlisted but valid is 0. */
static int attr_value(CUdevice_attribute a, int dev, int *v)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 52428800; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: *v = 512; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *v = 3; break;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *v = CU_COMPUTEMODE_DEFAULT; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *v = 0x10 + sim_cfg.phys[dev]; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *v = sim_cfg.vmm; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *v = sim_cfg.vmm && sim_os_posix_fd_handles(); break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: *v = -1; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: *v = -1; break;
    /* host locations for cuMemCreate (vmm.c): drivers from CUDA 12.2 */
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        *v = sim_cfg.vmm && sim_driver_version() >= 12020;
        break;
    default:
        if ((int)a <= 0 || a >= CU_DEVICE_ATTRIBUTE_MAX) return -1;
        *v = 0;
    }
    return 0;
}

SIM_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    SIM_COUNT(cuDeviceGetAttribute);
    SIM_REQUIRE_INIT();
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    return attr_value(attrib, dev, pi) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    SIM_COUNT(cuDeviceComputeCapability);
    SIM_REQUIRE_INIT();
    if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    *major = 9;
    *minor = 0;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    SIM_COUNT(cuDeviceGetPCIBusId);
    SIM_REQUIRE_INIT();
    if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    sim_card_pci(sim_cfg.phys[dev], pciBusId, (size_t)len);   /* the physical card's */
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    SIM_COUNT(cuDeviceGetByPCIBusId);
    SIM_REQUIRE_INIT();
    if (!dev || !pciBusId) return CUDA_ERROR_INVALID_VALUE;
    unsigned dom = 0, bus = 0, devno = 0, fn = 0;
    if (sscanf(pciBusId, "%x:%x:%x.%x", &dom, &bus, &devno, &fn) != 4 &&
        sscanf(pciBusId, "%x:%x.%x", &bus, &devno, &fn) != 3)
        return CUDA_ERROR_INVALID_VALUE;
    int phys = (int)bus - 0x10;
    if (dom != 0 || devno != 0 || fn != 0) return CUDA_ERROR_INVALID_DEVICE;
    for (int d = 0; d < sim_cfg.ncards; d++)
        if (sim_cfg.phys[d] == phys) {
            *dev = d;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_DEVICE;
}

SIM_API CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
    SIM_COUNT(cuDeviceCanAccessPeer);
    SIM_REQUIRE_INIT();
    if (!can) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(dev);
    CHECK_DEV(peer);
    *can = dev != peer;
    return CUDA_SUCCESS;
}

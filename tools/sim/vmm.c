/* Virtual memory management: reservations, physical memory, mappings.
 *
 * cuMemAddressReserve takes inaccessible address space (sim_os_reserve:
 * PROT_NONE); cuMemCreate makes a memory object of the requested size (a
 * memfd; a section on Windows) charged to the card; cuMemMap maps it into a
 * reservation (sim_os_map_fixed: MAP_FIXED|MAP_SHARED; on Windows the
 * approximation described in os_windows.c); cuMemSetAccess makes it
 * readable/writable. Physical memory mapped at two addresses shows the same
 * bytes at both, so stitching is real. Physical memory lives until it has
 * been released and unmapped everywhere (the driver's rule). Everything
 * here is guarded by sim_mem_lock. */
#include "sim_internal.h"
#include <stdlib.h>
#include <string.h>

struct phys {
    sim_os_obj obj;
    size_t size;
    int dev;
    int refs;          /* handle references + one per mapping */
    int hrefs;         /* handle references: cuMemCreate's, + one per cuMemRetainAllocationHandle,
                          - one per cuMemRelease; 0: the handle is gone (its memory lives while mapped) */
    uint64_t id;
    int imported;      /* from another process's descriptor: charged there */
    int host;          /* a host location (CUDA 12.2+): host memory, never charged to a card */
    CUmemAllocationProp prop;
    struct phys *next;
};

struct vmap {
    uintptr_t addr;
    size_t size;
    struct phys *ph;
    int access;        /* CU_MEM_ACCESS_FLAGS_PROT_*: the widest any device has (the host's view) */
    unsigned char dev_access[SIM_MAX_CARDS];   /* each device's, as cuMemSetAccess set it */
};

struct va {
    struct sim_alloc *rec;   /* SIM_K_VA record in the table */
    struct vmap *maps;
    size_t nmaps, capmaps;
    struct va *next;
};

static struct phys *physs;
static struct va *vas;

/* Host locations (cuda.h, cuMemCreate; drivers from CUDA 12.2): HOST (id
 * ignored; no shareable handle types), HOST_NUMA (id a host NUMA node: the
 * sim's host has no NUMA, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID -1, so only 0),
 * and HOST_NUMA_CURRENT, which cuMemCreate refuses. An older driver knows
 * none of them. */
static int is_host_location(CUmemLocationType t)
{
    return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    if (is_host_location(prop->location.type)) {
        if (sim_driver_version() < 12020 || prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
            return CUDA_ERROR_INVALID_VALUE;
        if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST && prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE)
            return CUDA_ERROR_INVALID_VALUE;
        if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && prop->location.id != 0)
            return CUDA_ERROR_INVALID_VALUE;
    } else {
        if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        CHECK_DEV(prop->location.id);
    }
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
        (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !sim_os_posix_fd_handles()))
        return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

#define REQUIRE_VMM() \
    do { SIM_REQUIRE_INIT(); if (!sim_cfg.vmm) return CUDA_ERROR_NOT_SUPPORTED; } while (0)

SIM_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    SIM_COUNT(cuMemGetAllocationGranularity);
    REQUIRE_VMM();
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_prop(prop);
    if (r != CUDA_SUCCESS) return r;
    *granularity = SIM_VMM_GRANULE;
    return CUDA_SUCCESS;
}

/* ---- reservations ---- */
SIM_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags)
{
    SIM_COUNT(cuMemAddressReserve);
    REQUIRE_VMM();
    if (!ptr || size == 0 || size % SIM_VMM_GRANULE || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (alignment == 0) alignment = SIM_VMM_GRANULE;
    if ((alignment & (alignment - 1)) || alignment % SIM_VMM_GRANULE) return CUDA_ERROR_INVALID_VALUE;
    /* addr is a hint, as for the driver */
    void *m = sim_os_reserve((uintptr_t)addr, size, alignment);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    struct va *v = calloc(1, sizeof *v);
    struct sim_alloc *rec = calloc(1, sizeof *rec);
    if (!v || !rec) {
        free(v);
        free(rec);
        sim_os_release(m, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rec->base = (uintptr_t)m;
    rec->size = size;
    rec->map_len = size;
    rec->obj = SIM_OS_NO_OBJ;
    rec->kind = SIM_K_VA;
    rec->id = sim_next_id();
    v->rec = rec;
    pthread_mutex_lock(&sim_mem_lock);
    sim_mem_insert(rec);
    v->next = vas;
    vas = v;
    pthread_mutex_unlock(&sim_mem_lock);
    *ptr = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}

static struct va *va_containing(uintptr_t p)
{
    for (struct va *v = vas; v; v = v->next)
        if (p >= v->rec->base && p - v->rec->base < v->rec->size) return v;
    return NULL;
}

/* the reservation holding all of [p, p+n), or NULL */
static struct va *va_holding(uintptr_t p, size_t n)
{
    struct va *v = va_containing(p);
    return v && n <= v->rec->size - (p - v->rec->base) ? v : NULL;
}

/* the mapping of v containing p (mappings never overlap), or NULL */
static struct vmap *vmap_at(struct va *v, uintptr_t p)
{
    for (size_t i = 0; v && i < v->nmaps; i++) {
        struct vmap *m = &v->maps[i];
        if (p >= m->addr && p - m->addr < m->size) return m;
    }
    return NULL;
}

static void phys_unref(struct phys *ph, struct phys **to_free)
{
    if (--ph->refs == 0) {
        struct phys **pp = &physs;
        while (*pp && *pp != ph) pp = &(*pp)->next;
        if (*pp) *pp = ph->next;
        ph->next = *to_free;
        *to_free = ph;
    }
}

static void phys_destroy_list(struct phys *list)
{
    while (list) {
        struct phys *n = list->next;
        if (!list->imported && !list->host) {
            sim_latency();
            sim_live_add(list->dev, -(int64_t)list->size, -1);
            sim_uncharge(list->dev, list->size);
        }
        sim_os_obj_close(list->obj);
        free(list);
        list = n;
    }
}

static void unmap_one(struct vmap *m, struct phys **to_free)
{
    sim_os_unmap_fixed((void *)m->addr, m->size);
    phys_unref(m->ph, to_free);
}

SIM_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    SIM_COUNT(cuMemAddressFree);
    REQUIRE_VMM();
    struct phys *to_free = NULL;
    pthread_mutex_lock(&sim_mem_lock);
    struct va **pp = &vas;
    while (*pp && (*pp)->rec->base != (uintptr_t)ptr) pp = &(*pp)->next;
    struct va *v = *pp;
    if (!v || v->rec->size != size) {
        pthread_mutex_unlock(&sim_mem_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pp = v->next;
    for (size_t i = 0; i < v->nmaps; i++) unmap_one(&v->maps[i], &to_free);
    sim_mem_remove(v->rec);
    pthread_mutex_unlock(&sim_mem_lock);
    sim_os_release((void *)v->rec->base, v->rec->size);
    free(v->rec);
    free(v->maps);
    free(v);
    phys_destroy_list(to_free);
    return CUDA_SUCCESS;
}

/* ---- physical memory ---- */
static struct phys *phys_get(CUmemGenericAllocationHandle h)
{
    for (struct phys *p = physs; p; p = p->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)p == h) return p;
    return NULL;
}

SIM_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    SIM_COUNT(cuMemCreate);
    REQUIRE_VMM();
    if (!handle || size == 0 || size % SIM_VMM_GRANULE || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_prop(prop);
    if (r != CUDA_SUCCESS) return r;
    /* host memory is mapped for the devices like device memory; it is
     * named after card 0 and charged to none */
    int host = is_host_location(prop->location.type);
    int dev = host ? 0 : prop->location.id;
    sim_latency();
    if (!host && (r = sim_charge(dev, size)) != CUDA_SUCCESS) return r;
    struct phys *ph = calloc(1, sizeof *ph);
    sim_os_obj obj = SIM_OS_NO_OBJ;
    /* only the memory object: mappings come from cuMemMap */
    if (!ph || (r = sim_backing_create(size, sim_next_id(), dev, &obj, NULL)) != CUDA_SUCCESS) {
        free(ph);
        if (!host) sim_uncharge(dev, size);
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
    }
    ph->obj = obj;
    ph->size = size;
    ph->dev = dev;
    ph->host = host;
    ph->refs = 1;
    ph->hrefs = 1;
    ph->id = sim_next_id();
    ph->prop = *prop;
    pthread_mutex_lock(&sim_mem_lock);
    ph->next = physs;
    physs = ph;
    pthread_mutex_unlock(&sim_mem_lock);
    if (!host) sim_live_add(dev, (int64_t)size, 1);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    SIM_COUNT(cuMemRelease);
    REQUIRE_VMM();
    struct phys *to_free = NULL;
    pthread_mutex_lock(&sim_mem_lock);
    struct phys *ph = phys_get(handle);
    if (!ph || ph->hrefs == 0) {
        pthread_mutex_unlock(&sim_mem_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    ph->hrefs--;
    phys_unref(ph, &to_free);
    pthread_mutex_unlock(&sim_mem_lock);
    phys_destroy_list(to_free);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    SIM_COUNT(cuMemRetainAllocationHandle);
    REQUIRE_VMM();
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mem_lock);
    struct vmap *m = vmap_at(va_containing((uintptr_t)addr), (uintptr_t)addr);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (m) {
        /* a new handle reference, released with cuMemRelease */
        m->ph->refs++;
        m->ph->hrefs++;
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->ph;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_mem_lock);
    return r;
}

SIM_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle handle)
{
    SIM_COUNT(cuMemGetAllocationPropertiesFromHandle);
    REQUIRE_VMM();
    if (!prop) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mem_lock);
    struct phys *ph = phys_get(handle);
    if (ph) *prop = ph->prop;
    pthread_mutex_unlock(&sim_mem_lock);
    return ph ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- shareable handles (POSIX file descriptors) ----
 * The descriptor is the memfd itself (dup'ed): a process that receives it
 * (fork, SCM_RIGHTS, pidfd_getfd) imports the same physical memory. The
 * exporter keeps the charge; the importer's handle is not counted. On
 * Windows POSIX descriptors are no handle type: CUDA_ERROR_NOT_SUPPORTED. */
SIM_API CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_COUNT(cuMemExportToShareableHandle);
    REQUIRE_VMM();
    if (!shareableHandle || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !sim_os_posix_fd_handles())
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&sim_mem_lock);
    struct phys *ph = phys_get(handle);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (ph && (ph->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        int fd = sim_os_obj_export_fd(ph->obj);
        if (fd >= 0) {
            *(int *)shareableHandle = fd;
            r = CUDA_SUCCESS;
        } else {
            r = CUDA_ERROR_OPERATING_SYSTEM;
        }
    }
    pthread_mutex_unlock(&sim_mem_lock);
    return r;
}

SIM_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                CUmemAllocationHandleType shHandleType)
{
    SIM_COUNT(cuMemImportFromShareableHandle);
    REQUIRE_VMM();
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !sim_os_posix_fd_handles())
        return CUDA_ERROR_NOT_SUPPORTED;
    sim_os_obj obj;
    size_t size;
    int card;
    int ir = sim_os_obj_import_fd((int)(intptr_t)osHandle, &obj, &size, &card);
    if (ir == -2) return CUDA_ERROR_OUT_OF_MEMORY;
    /* only physical memory of the sim: a memfd it named, of granule size */
    if (ir != 0) return CUDA_ERROR_INVALID_VALUE;
    if (card < 0 || card >= sim_cfg.ncards || size % SIM_VMM_GRANULE) {
        sim_os_obj_close(obj);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct phys *ph = calloc(1, sizeof *ph);
    if (!ph) {
        sim_os_obj_close(obj);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    ph->obj = obj;
    ph->size = size;
    ph->dev = card;
    ph->refs = 1;
    ph->hrefs = 1;
    ph->id = sim_next_id();
    ph->imported = 1;
    ph->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    ph->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    ph->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ph->prop.location.id = card;
    pthread_mutex_lock(&sim_mem_lock);
    ph->next = physs;
    physs = ph;
    pthread_mutex_unlock(&sim_mem_lock);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
    return CUDA_SUCCESS;
}

/* ---- mappings ---- */
static int overlaps(const struct va *v, uintptr_t a, size_t n)
{
    for (size_t i = 0; i < v->nmaps; i++)
        if (a < v->maps[i].addr + v->maps[i].size && v->maps[i].addr < a + n) return 1;
    return 0;
}

SIM_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags)
{
    SIM_COUNT(cuMemMap);
    REQUIRE_VMM();
    uintptr_t a = (uintptr_t)ptr;
    if (flags != 0 || size == 0 || a % SIM_VMM_GRANULE || size % SIM_VMM_GRANULE || offset % SIM_VMM_GRANULE)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mem_lock);
    struct va *v = va_holding(a, size);
    struct phys *ph = phys_get(handle);
    CUresult r = CUDA_SUCCESS;
    if (!v) r = CUDA_ERROR_INVALID_VALUE;
    else if (!ph || ph->hrefs == 0) r = CUDA_ERROR_INVALID_HANDLE;
    else if (offset > ph->size || size > ph->size - offset) r = CUDA_ERROR_INVALID_VALUE;
    /* As the real driver (CUDA 13's header: "currently must be zero"; an
     * H200 with driver 580.159.04 answers CUDA_ERROR_NOT_SUPPORTED):
     * VRAMSIM_MAP_OFFSET=1 honours a non-zero offset instead. */
    else if (offset && !sim_cfg.map_offset) r = CUDA_ERROR_NOT_SUPPORTED;
    else if (overlaps(v, a, size)) r = CUDA_ERROR_ALREADY_MAPPED;
    else if (v->nmaps == v->capmaps) {
        size_t nc = v->capmaps ? v->capmaps * 2 : 8;
        struct vmap *nm = realloc(v->maps, nc * sizeof *nm);
        if (!nm) r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
            v->maps = nm;
            v->capmaps = nc;
        }
    }
    if (r == CUDA_SUCCESS && sim_os_map_fixed((void *)a, size, ph->obj, offset) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        v->maps[v->nmaps++] = (struct vmap){.addr = a, .size = size, .ph = ph, .access = CU_MEM_ACCESS_FLAGS_PROT_NONE};
        ph->refs++;
    }
    pthread_mutex_unlock(&sim_mem_lock);
    return r;
}

SIM_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    SIM_COUNT(cuMemUnmap);
    REQUIRE_VMM();
    uintptr_t a = (uintptr_t)ptr;
    struct phys *to_free = NULL;
    pthread_mutex_lock(&sim_mem_lock);
    struct va *v = va_holding(a, size);
    CUresult r = CUDA_SUCCESS;
    if (!v || size == 0) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        /* the range must consist of whole mappings, and be fully mapped */
        size_t covered = 0;
        for (size_t i = 0; i < v->nmaps; i++) {
            struct vmap *m = &v->maps[i];
            if (m->addr < a + size && a < m->addr + m->size) {
                if (m->addr < a || m->addr + m->size > a + size) r = CUDA_ERROR_INVALID_VALUE;
                covered += m->size;
            }
        }
        if (covered != size) r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        size_t j = 0;
        for (size_t i = 0; i < v->nmaps; i++) {
            struct vmap *m = &v->maps[i];
            if (m->addr >= a && m->addr < a + size) unmap_one(m, &to_free);
            else v->maps[j++] = *m;
        }
        v->nmaps = j;
    }
    pthread_mutex_unlock(&sim_mem_lock);
    phys_destroy_list(to_free);
    return r;
}

SIM_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    SIM_COUNT(cuMemSetAccess);
    REQUIRE_VMM();
    uintptr_t a = (uintptr_t)ptr;
    if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        CHECK_DEV(desc[i].location.id);
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&sim_mem_lock);
    struct va *v = va_holding(a, size);
    CUresult r = CUDA_SUCCESS;
    if (!v || !sim_vmm_range_mapped_locked(a, size))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        for (size_t i = 0; i < v->nmaps; i++) {
            struct vmap *m = &v->maps[i];
            uintptr_t lo = m->addr > a ? m->addr : a;
            uintptr_t hi = m->addr + m->size < a + size ? m->addr + m->size : a + size;
            if (lo >= hi) continue;
            /* a partial change is recorded for the whole mapping; host
             * memory stands in for every card: the widest access wins */
            unsigned char was[SIM_MAX_CARDS];
            memcpy(was, m->dev_access, sizeof was);
            for (size_t k = 0; k < count; k++) m->dev_access[desc[k].location.id] = (unsigned char)desc[k].flags;
            int access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
            for (int d = 0; d < SIM_MAX_CARDS; d++)
                if (m->dev_access[d] > access) access = m->dev_access[d];
            if (sim_os_protect((void *)lo, hi - lo, access) != 0) {
                memcpy(m->dev_access, was, sizeof was);
                r = CUDA_ERROR_INVALID_VALUE;
            } else {
                m->access = access;
            }
        }
    }
    pthread_mutex_unlock(&sim_mem_lock);
    return r;
}

SIM_API CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    SIM_COUNT(cuMemGetAccess);
    REQUIRE_VMM();
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    CHECK_DEV(location->id);
    pthread_mutex_lock(&sim_mem_lock);
    struct vmap *m = vmap_at(va_containing((uintptr_t)ptr), (uintptr_t)ptr);
    if (m) *flags = (unsigned long long)m->dev_access[location->id];
    pthread_mutex_unlock(&sim_mem_lock);
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* [p, p+n) covered by mappings of reservation v, all read-write if
 * need_rw, all with some access for device dev if dev >= 0 (sim_mem_lock
 * held) */
static int range_covered(struct va *v, uintptr_t p, size_t n, int need_rw, int dev)
{
    if (!v) return 0;
    for (uintptr_t cur = p, end = p + n; cur < end;) {
        struct vmap *m = vmap_at(v, cur);
        if (!m || (need_rw && m->access != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) ||
            (dev >= 0 && m->dev_access[dev] == CU_MEM_ACCESS_FLAGS_PROT_NONE))
            return 0;
        cur = m->addr + m->size;
    }
    return 1;
}

int sim_vmm_range_mapped_locked(uintptr_t p, size_t n) { return range_covered(va_containing(p), p, n, 0, -1); }

int sim_vmm_dev_access_locked(uintptr_t p, size_t n, int dev)
{
    struct va *v = va_containing(p);
    if (!v) return -1;
    return dev >= 0 && dev < SIM_MAX_CARDS && range_covered(v, p, n, 0, dev);
}

/* mapped and read-write: copies may touch it */
int sim_vmm_range_ok(uintptr_t p, size_t n) { return range_covered(va_containing(p), p, n, 1, -1); }

/* The mapping containing p: its device and extent (sim_mem_lock held). */
int sim_vmm_ptr_info(uintptr_t p, int *dev, uintptr_t *base, size_t *size)
{
    struct vmap *m = vmap_at(va_containing(p), p);
    if (!m) return 0;
    *dev = m->ph->dev;
    *base = m->addr;
    *size = m->size;
    return 1;
}

void sim_vmm_after_fork_child(void)
{
    /* The parent's physical memory and reservations stay the parent's. */
    physs = NULL;
    vas = NULL;
}

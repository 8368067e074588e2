/* How long the program's own VMM memory lives (cuMemCreate handles the
 * memory service recorded; the arena's handles never pass the hooks).
 *
 * The driver keeps a handle's physical memory while the handle is
 * referenced or mapped: cuMemCreate gives one reference,
 * cuMemRetainAllocationHandle one more (the same handle value), each
 * cuMemRelease takes one back, and each cuMemMap / cuMemUnmap adds and
 * removes a mapping. Memory released while still mapped (the idiom of
 * NVIDIA's own samples: create, map, release at once) stays on the card
 * until its last mapping goes, and NCCL frees its buffers with retain,
 * release, unmap, release. So the record (and the tenant's charge) leaves
 * only when both counts reach zero: at the last cuMemRelease of an
 * unmapped handle, or at the cuMemUnmap of the last mapping of a released
 * one. This file keeps the two counts; the memory service acts on them.
 * Thread safety: any thread; one lock (the calls it follows are slow
 * driver calls, seldom made). */
#ifndef VS_VMM_LIFE_H
#define VS_VMM_LIFE_H

#include <stddef.h>
#include <stdint.h>

/* A handle recorded by cuMemCreate: one reference, no mapping. */
void vs_vmm_life_created(uint64_t handle);
/* One more reference: cuMemRetainAllocationHandle answered handle, or the
 * driver refused a release vs_vmm_life_release had counted. */
void vs_vmm_life_retained(uint64_t handle);
/* Before the driver's cuMemRelease: 1 when that release ends the memory
 * (the last reference of an unmapped handle; also a handle this file does
 * not know), 0 when the memory stays (then the reference is taken off). */
int vs_vmm_life_release(uint64_t handle);
/* After a successful cuMemMap of handle at [va, va + size). */
void vs_vmm_life_mapped(uint64_t handle, uint64_t va, uint64_t size);
/* After a successful cuMemUnmap of [va, va + size): the mappings inside
 * it go; returns how many handles' memory ended with them (released, no
 * mapping left), forgotten here, in *ended (malloc'd, the caller frees;
 * NULL when none, or out of host memory: then they are kept). */
size_t vs_vmm_life_unmapped(uint64_t va, uint64_t size, uint64_t **ended);
void vs_vmm_life_atfork_child(void);

#endif

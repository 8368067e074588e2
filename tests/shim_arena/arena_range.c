/* cuMemGetAddressRange_v2 and cuPointerGetAttribute(s) on arena blocks:
 * from the start, the middle and the last byte of a block, the range is the
 * block's own (start, requested size), not the chunk or VMM range around
 * it; other attributes are the driver's; the VMM queries
 * (cuMemRetainAllocationHandle, cuMemGetAccess) are refused as for any
 * cuMemAlloc block; SYNC_MEMOPS is set and reads back. The same program passes with arena = off, where the
 * driver answers everything. */
#include "shim_test.h"

static void check_block(CUdeviceptr p, size_t n) {
  const size_t at[] = {0, n / 2, n - 1};
  for (int k = 0; k < 3; k++) {
    CUdeviceptr q = p + at[k], base = 0, start = 0;
    size_t size = 0, rsize = 0;
    T_CU(cuMemGetAddressRange(&base, &size, q));
    T_CHECK(base == p && size == n, "address range of 0x%llx (block 0x%llx, %zu B): 0x%llx, %zu B",
            (unsigned long long)q, (unsigned long long)p, n, (unsigned long long)base, size);
    T_CU(cuMemGetAddressRange(&base, NULL, q));   /* either out-parameter may be NULL */
    T_CHECK(base == p, "base alone");
    T_CU(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, q));
    T_CU(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, q));
    T_CHECK(start == p && rsize == n, "pointer attribute range of 0x%llx: 0x%llx, %zu B", (unsigned long long)q,
            (unsigned long long)start, rsize);
    unsigned type = 0;
    T_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, q));
    T_CHECK(type == CU_MEMORYTYPE_DEVICE, "memory type from the driver (%u)", type);

    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned mtype = 0;
    int ordinal = -1;
    CUdeviceptr s2 = 0;
    size_t z2 = 0;
    void *data[] = {&mtype, &s2, &ordinal, &z2};
    T_CU(cuPointerGetAttributes(4, attrs, data, q));
    T_CHECK(mtype == CU_MEMORYTYPE_DEVICE && ordinal == 0, "other attributes are the driver's (%u, %d)", mtype,
            ordinal);
    T_CHECK(s2 == p && z2 == n, "cuPointerGetAttributes range of 0x%llx: 0x%llx, %zu B", (unsigned long long)q,
            (unsigned long long)s2, z2);
    /* cuMemAlloc memory, not the program's VMM: no handle types, and the
     * VMM queries refused as the driver refuses them (the arena's own
     * handle underneath is not the program's to retain or export) */
    unsigned long long types = 7, flags = 7;
    T_CU(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, q));
    T_CHECK(types == 0, "allowed handle types of a cuMemAlloc block: %llu", types);
    CUmemGenericAllocationHandle h = 0;
    CUresult r = cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)q);
    T_CHECK(r == CUDA_ERROR_INVALID_VALUE, "cuMemRetainAllocationHandle of a cuMemAlloc block: %d", (int)r);
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    r = cuMemGetAccess(&flags, &loc, q);
    T_CHECK(r == CUDA_ERROR_INVALID_VALUE, "cuMemGetAccess of a cuMemAlloc block: %d", (int)r);
    /* SYNC_MEMOPS, the one settable attribute (UCX, libfabric and MPI set
     * it on the buffers they register), is taken and reads back */
    unsigned one = 1;
    unsigned char sync = 0;
    r = cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, q);
    T_CHECK(r == CUDA_SUCCESS, "cuPointerSetAttribute(SYNC_MEMOPS) of a cuMemAlloc block: %d", (int)r);
    T_CU(cuPointerGetAttribute(&sync, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, q));
    T_CHECK(sync == 1, "SYNC_MEMOPS reads back %u", sync);
    r = cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_BUFFER_ID, q);
    T_CHECK(r == CUDA_ERROR_INVALID_VALUE, "another attribute set: %d", (int)r);
  }
}

int main(void) {
  t_shim();
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  const size_t sizes[] = {1000, 4096 * 3 + 1, 300 << 10, 5 << 20, 20 << 20};
  enum { N = sizeof sizes / sizeof sizes[0] };
  CUdeviceptr p[2][N];
  /* Two of each, so most blocks sit inside a chunk shared with others. */
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < N; i++) T_CU(cuMemAlloc(&p[r][i], sizes[i]));
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < N; i++) {
      T_CHECK(p[r][i] % 512 == 0, "512-byte alignment of 0x%llx", (unsigned long long)p[r][i]);
      check_block(p[r][i], sizes[i]);
    }
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < N; i++) T_CU(cuMemFree(p[r][i]));
  /* A reset clears what was set: a block of the new context reads 0. */
  T_CU(cuDevicePrimaryCtxReset(0));
  t_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
  CUdeviceptr q;
  unsigned char sync = 7;
  T_CU(cuMemAlloc(&q, 5 << 20));
  T_CU(cuPointerGetAttribute(&sync, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, q));
  T_CHECK(sync == 0, "SYNC_MEMOPS of a block after the context's reset: %u", sync);
  T_CU(cuMemFree(q));
  T_SAY("ranges and attributes of %d blocks: PASS", 2 * N);
  return 0;
}

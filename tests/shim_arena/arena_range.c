/* cuMemGetAddressRange_v2 and cuPointerGetAttribute(s) on arena blocks:
 * from the start, the middle and the last byte of a block, the range is the
 * block's own (start, requested size), not the chunk or VMM range around
 * it; other attributes are the driver's; the VMM queries
 * (cuMemRetainAllocationHandle, cuMemGetAccess) are refused as for any
 * cuMemAlloc block; SYNC_MEMOPS is each block's own: 0 until set, set and
 * cleared on one block without moving its neighbours in the same chunk, 0
 * again for a new block at a freed one's address. The same program passes
 * with arena = off, where the driver answers everything. */
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

static unsigned char sync_of(CUdeviceptr q) {
  unsigned char v = 7;
  T_CU(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, q));
  unsigned char w = 7;
  CUpointer_attribute a = CU_POINTER_ATTRIBUTE_SYNC_MEMOPS;
  void *data[] = {&w};
  T_CU(cuPointerGetAttributes(1, &a, data, q));
  T_CHECK(v == w, "SYNC_MEMOPS of 0x%llx: %u, the plural call %u", (unsigned long long)q, v, w);
  return v;
}

static void set_sync(CUdeviceptr q, unsigned v) {
  T_CU(cuPointerSetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, q));
}

/* SYNC_MEMOPS belongs to the allocation (cuda-bindings' own driver tests
 * set it, read it, clear it and read it again): blocks a[i] and b[i] are
 * two allocations of one size, so most pairs share a chunk. */
static void sync_memops_per_block(const CUdeviceptr *a, const CUdeviceptr *b, int n) {
  for (int i = 0; i < n; i++)
    T_CHECK(sync_of(a[i]) == 0 && sync_of(b[i]) == 0, "SYNC_MEMOPS of new blocks %d: %u / %u", i, sync_of(a[i]),
            sync_of(b[i]));
  for (int i = 0; i < n; i++) set_sync(a[i], 1);
  for (int i = 0; i < n; i++)
    T_CHECK(sync_of(a[i]) == 1 && sync_of(b[i]) == 0, "set on block a %d only: %u / %u", i, sync_of(a[i]),
            sync_of(b[i]));
  for (int i = 0; i < n; i++) {
    set_sync(b[i], 1);
    set_sync(b[i] + 1, 0);   /* any address inside the allocation names it */
  }
  for (int i = 0; i < n; i++)
    T_CHECK(sync_of(a[i]) == 1 && sync_of(b[i]) == 0, "set and cleared on block b %d: %u / %u", i, sync_of(a[i]),
            sync_of(b[i]));
  for (int i = 0; i < n; i++) set_sync(a[i], 0);
  for (int i = 0; i < n; i++) T_CHECK(sync_of(a[i]) == 0, "cleared on block a %d: %u", i, sync_of(a[i]));
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
  sync_memops_per_block(p[0], p[1], N);
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < N; i++) {
      T_CHECK(p[r][i] % 512 == 0, "512-byte alignment of 0x%llx", (unsigned long long)p[r][i]);
      check_block(p[r][i], sizes[i]);
    }
  /* check_block left SYNC_MEMOPS set on every block: a new allocation in
   * a freed one's place (an arena's slot comes back at once) reads 0. */
  for (int i = 0; i < N; i++) {
    CUdeviceptr again = 0;
    T_CU(cuMemFree(p[0][i]));
    T_CU(cuMemAlloc(&again, sizes[i]));
    T_CHECK(sync_of(again) == 0, "SYNC_MEMOPS of a new %zu-byte block at 0x%llx (freed: 0x%llx): %u", sizes[i],
            (unsigned long long)again, (unsigned long long)p[0][i], sync_of(again));
    p[0][i] = again;
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

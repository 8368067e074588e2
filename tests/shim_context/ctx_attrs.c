/* An arena block answers what the driver answers for a cuMemAlloc block
 * of its size (issue 9).
 *
 *   ctx_attrs MODE          (under the shim; MODE: vmm, chunks, off, novmm)
 *   ctx_attrs probe         (what it runs, also in a child without the shim)
 *
 * The probe allocates blocks of a few sizes and prints every answer it
 * gets, normalised where two processes must differ (an address, a context
 * handle, a buffer id: "is the block's own", "is the current context", "is
 * not 0"): pointer attributes one by one and all at once, address ranges
 * (the last byte, and one byte past the end: CUDA_ERROR_NOT_FOUND),
 * cuMemAllocPitch with bad arguments, zero-byte cuMemAlloc, cuMemAllocManaged
 * and cuMemAllocAsync. The test runs it
 * under the shim and in a child with LD_PRELOAD removed (the driver alone)
 * and wants the same lines.
 * Not compared: CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR / MAPPING_SIZE
 * describe the mapping underneath, which for an arena block is the chunk or
 * VMM range it lies in (the driver's answer, passed on).
 * Then, under the shim: buffer ids are unique over many allocations, also
 * where an address comes back (in an arena mode it must come back), and a
 * zero-byte request is no refusal (failed_requests does not move). */
#include "shim_test.h"

#include <cuda.h>
#include <unistd.h>

#define OUT(...) fprintf(out, __VA_ARGS__)

static void one(FILE *out, const char *tag, CUpointer_attribute a, const char *name, CUdeviceptr p, CUdeviceptr base,
                size_t n, CUcontext ctx) {
  union {
    unsigned long long u64;
    unsigned int u32;
    int i32;
    unsigned char b;
    void *ptr;
  } v;
  memset(&v, 0, sizeof v);
  CUresult r = cuPointerGetAttribute(&v, a, p);
  OUT("%s %s rc=%d", tag, name, (int)r);
  if (r == CUDA_SUCCESS) {
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: OUT(" current=%d", v.ptr == (void *)ctx); break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: OUT(" self=%d", v.u64 == (unsigned long long)p); break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: OUT(" block=%d", v.u64 == (unsigned long long)base); break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: OUT(" size_is_block=%d", v.u64 == (unsigned long long)n); break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: OUT(" nonzero=%d", v.u64 != 0); break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: OUT(" null=%d", v.ptr == NULL); break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: OUT(" value=%u", v.u32); break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: OUT(" value=%d", v.i32); break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: OUT(" value=%llu", v.u64); break;
    default: OUT(" value=%u", v.b); break;   /* the boolean ones */
    }
  }
  OUT("\n");
}

#define A(x) {CU_POINTER_ATTRIBUTE_##x, #x}
static const struct {
  CUpointer_attribute a;
  const char *name;
} attrs[] = {A(CONTEXT),           A(MEMORY_TYPE),
             A(DEVICE_POINTER),    A(HOST_POINTER),
             A(SYNC_MEMOPS),       A(BUFFER_ID),
             A(IS_MANAGED),        A(DEVICE_ORDINAL),
             A(IS_LEGACY_CUDA_IPC_CAPABLE), A(RANGE_START_ADDR),
             A(RANGE_SIZE),        A(MAPPED),
             A(ALLOWED_HANDLE_TYPES), A(IS_GPU_DIRECT_RDMA_CAPABLE),
             A(ACCESS_FLAGS),      A(MEMPOOL_HANDLE),
             A(MEMORY_BLOCK_ID)};
enum { NATTR = sizeof attrs / sizeof attrs[0] };

static void plural(FILE *out, const char *tag, CUdeviceptr p, CUdeviceptr base, size_t n, CUcontext ctx) {
  CUcontext c = NULL;
  unsigned type = 0, access = 0;
  unsigned char ipc = 0, managed = 0, mapped = 0;
  unsigned long long id = 0, handles = 7;
  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute list[] = {CU_POINTER_ATTRIBUTE_CONTEXT,     CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                CU_POINTER_ATTRIBUTE_BUFFER_ID,   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                CU_POINTER_ATTRIBUTE_MAPPED,      CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
                                CU_POINTER_ATTRIBUTE_ACCESS_FLAGS};
  void *data[] = {&c, &type, &id, &ordinal, &start, &size, &ipc, &managed, &mapped, &handles, &access};
  CUresult r = cuPointerGetAttributes(sizeof list / sizeof *list, list, data, p);
  OUT("%s plural rc=%d current=%d type=%u id_nonzero=%d ordinal=%d block=%d size_is_block=%d ipc=%u managed=%u "
      "mapped=%u handles=%llu access=%u\n",
      tag, (int)r, c == ctx, type, id != 0, ordinal, start == base, size == n, ipc, managed, mapped, handles,
      access);
}

static int probe(FILE *out) {
  T_CU(cuInit(0));
  CUcontext ctx = NULL;
  T_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
  T_CU(cuCtxSetCurrent(ctx));
  const size_t sizes[] = {1000, 64 << 10, 3 << 20};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    size_t n = sizes[s];
    CUdeviceptr p = 0, base = 0;
    size_t got = 0;
    T_CU(cuMemAlloc(&p, n));
    char tag[64];
    const size_t at[] = {0, n / 2, n - 1};
    for (int k = 0; k < 3; k++) {
      snprintf(tag, sizeof tag, "size=%zu at=%s", n, k == 0 ? "start" : k == 1 ? "middle" : "last");
      for (int i = 0; i < NATTR; i++) one(out, tag, attrs[i].a, attrs[i].name, p + at[k], p, n, ctx);
      plural(out, tag, p + at[k], p, n, ctx);
    }
    CUresult r = cuMemGetAddressRange(&base, &got, p + n - 1);
    OUT("size=%zu range(last byte) rc=%d block=%d size_is_block=%d\n", n, (int)r, base == p, got == n);
    r = cuMemGetAddressRange(&base, &got, p + n);
    OUT("size=%zu range(one past the end) rc=%d\n", n, (int)r);
    T_CU(cuMemFree(p));
    r = cuMemGetAddressRange(&base, &got, p);
    OUT("size=%zu range(after free) rc=%d\n", n, (int)r);
  }
  const struct {
    size_t w, h;
    unsigned e;
  } pitch[] = {{100, 10, 3}, {100, 10, 0}, {100, 10, 32}, {0, 10, 4}, {100, 0, 4}, {100, 10, 4}, {4096, 3, 16}};
  for (size_t i = 0; i < sizeof pitch / sizeof *pitch; i++) {
    CUdeviceptr p = 0;
    size_t pp = 0;
    CUresult r = cuMemAllocPitch(&p, &pp, pitch[i].w, pitch[i].h, pitch[i].e);
    OUT("pitch %zux%zu elem %u rc=%d pitch=%zu\n", pitch[i].w, pitch[i].h, pitch[i].e, (int)r, r ? 0 : pp);
    if (r == CUDA_SUCCESS) T_CU(cuMemFree(p));
  }
  CUdeviceptr z = 0;
  OUT("alloc(0) rc=%d\n", (int)cuMemAlloc(&z, 0));
  OUT("managed(0) rc=%d\n", (int)cuMemAllocManaged(&z, 0, CU_MEM_ATTACH_GLOBAL));
  CUresult ra = cuMemAllocAsync(&z, 0, NULL);
  OUT("async(0) rc=%d\n", (int)ra);
  if (ra == CUDA_SUCCESS) T_CU(cuMemFreeAsync(z, NULL));
  OUT("free(0) rc=%d\n", (int)cuMemFree(0));
  return 0;
}

int main(int argc, char **argv) {
  T_CHECK(argc == 2, "usage: ctx_attrs vmm|chunks|off|novmm|probe");
  if (!strcmp(argv[1], "probe")) return probe(stdout);
  int arena = strcmp(argv[1], "off") != 0;
  shim_api shim = t_shim();

  /* The driver alone: the same program in a child without the shim. */
  char self[4096], cmd[4200];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  T_CHECK(len > 0, "readlink /proc/self/exe");
  self[len] = 0;
  snprintf(cmd, sizeof cmd, "env -u LD_PRELOAD '%s' probe", self);
  FILE *child = popen(cmd, "r");
  T_CHECK(child, "popen %s", cmd);
  char *mine = NULL;
  size_t nmine = 0;
  FILE *out = open_memstream(&mine, &nmine);
  T_CHECK(out, "open_memstream");
  probe(out);
  fclose(out);
  char line[512];
  const char *at = mine;
  int lines = 0, diffs = 0;
  while (fgets(line, sizeof line, child)) {
    const char *nl = strchr(at, '\n');
    size_t n = nl ? (size_t)(nl - at) + 1 : strlen(at);
    if (strlen(line) != n || strncmp(line, at, n) != 0) {
      printf("vramshim-test: differs: driver: %sshim:   %.*s", line, (int)n, at);
      diffs++;
    }
    at += n;
    lines++;
  }
  T_CHECK(pclose(child) == 0, "the probe without the shim failed");
  T_CHECK(*at == 0, "the shim's probe said more than the driver's: %s", at);
  T_CHECK(diffs == 0, "%d of %d answers differ from the driver's", diffs, lines);
  free(mine);

  /* Buffer ids: unique, also where an address comes back. */
  enum { N = 3000 };
  static CUdeviceptr addr[N];
  static unsigned long long id[N];
  int reused = 0;
  for (int i = 0; i < N; i++) {
    T_CU(cuMemAlloc(&addr[i], 4096));
    T_CU(cuPointerGetAttribute(&id[i], CU_POINTER_ATTRIBUTE_BUFFER_ID, addr[i]));
    T_CU(cuMemFree(addr[i]));
  }
  for (int i = 0; i < N; i++) {
    int again = 0;
    for (int j = 0; j < i; j++) {
      T_CHECK(id[i] != id[j], "allocations %d and %d have the buffer id %llu (addresses 0x%llx, 0x%llx)", j, i,
              id[i], (unsigned long long)addr[j], (unsigned long long)addr[i]);
      again |= addr[i] == addr[j];
    }
    reused += again;
  }
  T_CHECK(!arena || reused > 0, "the arena never gave an address back in %d allocations: the test proves nothing",
          N);

  vramshim_card_stats before = t_stats(&shim, 0);
  CUdeviceptr z = 0;
  T_CHECK(cuMemAlloc(&z, 0) == CUDA_ERROR_INVALID_VALUE, "cuMemAlloc(0) is the driver's CUDA_ERROR_INVALID_VALUE");
  CUdeviceptr pz = 0;
  size_t pp = 0;
  T_CHECK(cuMemAllocPitch(&pz, &pp, 0, 4, 4) != CUDA_SUCCESS, "an empty pitch allocation");
  T_CHECK(cuMemAllocManaged(&pz, 0, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS, "an empty managed allocation");
  vramshim_card_stats after = t_stats(&shim, 0);
  T_EQ_U64(after.failed_requests, before.failed_requests, "failed requests after zero-byte requests");
  T_SAY("%s: %d answers as the driver's, %d buffer ids unique (%d at an address that came back), zero bytes no "
        "refusal: PASS",
        argv[1], lines, N, reused);
  return 0;
}

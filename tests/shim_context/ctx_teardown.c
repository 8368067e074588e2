/* Memory belongs to the context it was allocated in (issue 9).
 *
 *   ctx_teardown destroy|release|reset
 *
 * In context A (a cuCtxCreate context for `destroy`, the primary context
 * for `release` and `reset`): blocks of several sizes, written with a
 * pattern; some freed before the context ends, one never freed. Then the
 * context ends (cuCtxDestroy, the last cuDevicePrimaryCtxRelease after a
 * second retain and release, cuDevicePrimaryCtxReset). Checked:
 *   - a free of A's never-freed block gets the driver's error
 *     (CUDA_ERROR_INVALID_VALUE), and so does a second free of a freed one;
 *   - the shim holds nothing of A: live and reserved bytes 0, the tenant's
 *     view of free memory (cuMemGetInfo, a 1 GiB limit) what it was before
 *     A allocated anything;
 *   - in context B (made the same way): twice as many blocks, each written
 *     with its own pattern and read back (a block of A's memory, which the
 *     driver has unmapped, fails the copy or faults), no two overlapping;
 *     their CONTEXT attribute is B, their buffer ids are new (none of A's,
 *     also where B's block sits at an address A used).
 *
 *   ctx_teardown fork
 *
 * A forked child has none of the parent's contexts or blocks; it makes and
 * ends its own; the parent's blocks keep their bytes.
 * Runs over the sim in every arena mode and on a real driver (gpu). */
#include "shim_test.h"

#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

enum { NSIZES = 5 };
static const size_t sizes[NSIZES] = {1000, 64 << 10, 300 << 10, 3 << 20, 20 << 20};

static void fill(CUdeviceptr p, size_t n, unsigned char v) {
  T_CU(cuMemsetD8(p, v, n));
  unsigned char probe[3] = {0};
  size_t at[3] = {0, n / 2, n - 1};
  for (int k = 0; k < 3; k++) T_CU(cuMemcpyDtoH(&probe[k], p + at[k], 1));
  for (int k = 0; k < 3; k++)
    T_CHECK(probe[k] == v, "block 0x%llx (%zu B) byte %zu reads %u, wrote %u", (unsigned long long)p, n, at[k],
            probe[k], v);
}

static unsigned long long buffer_id(CUdeviceptr p) {
  unsigned long long id = 0;
  T_CU(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p));
  return id;
}

static CUcontext begin(const char *how) {
  CUcontext c = NULL;
  if (!strcmp(how, "destroy")) {
    T_CU(cuCtxCreate(&c, NULL, 0, 0));   /* current on this thread */
  } else {
    T_CU(cuDevicePrimaryCtxRetain(&c, 0));
    T_CU(cuCtxSetCurrent(c));
  }
  return c;
}

static void end(const char *how, CUcontext c) {
  if (!strcmp(how, "destroy")) {
    T_CU(cuCtxDestroy(c));
  } else if (!strcmp(how, "release")) {
    /* Two retains: the first release must not end it, the second must. */
    CUcontext again = NULL;
    T_CU(cuDevicePrimaryCtxRetain(&again, 0));
    T_CHECK(again == c, "the primary context is one per device");
    T_CU(cuDevicePrimaryCtxRelease(0));
    CUdeviceptr still = 0;
    T_CU(cuMemAlloc(&still, 4096));   /* still alive after the first release */
    T_CU(cuMemFree(still));
    T_CU(cuDevicePrimaryCtxRelease(0));
    T_CU(cuCtxSetCurrent(NULL));
  } else {
    T_CU(cuDevicePrimaryCtxReset(0));
    T_CU(cuCtxSetCurrent(NULL));
  }
}

/* fork: the child has none of the parent's contexts or blocks; it makes
 * its own, ends it, and the parent's blocks keep their bytes. */
static int forked(shim_api *shim) {
  CUcontext a = begin("destroy");
  CUdeviceptr p[NSIZES];
  for (int i = 0; i < NSIZES; i++) {
    T_CU(cuMemAlloc(&p[i], sizes[i]));
    fill(p[i], sizes[i], (unsigned char)(0x30 + i));
  }
  fflush(stdout);
  pid_t pid = fork();
  T_CHECK(pid >= 0, "fork");
  if (pid == 0) {
    vramshim_card_stats st = t_stats(shim, 0);
    T_EQ_U64(st.live_count, 0, "the child's live allocations before it allocates");
    /* The real driver refuses CUDA in a child forked after the parent used
     * it (CUDA is not fork-safe; an H200, driver 580.159.04, fails cuInit
     * here); the shim cannot and must not make it work. Then the child has
     * nothing to allocate, and the parent's checks below stand alone. */
    CUresult ir = cuInit(0);
    if (ir != CUDA_SUCCESS && t_real_driver()) {
      T_SAY("the real driver refuses cuInit in the forked child (%d): no child checks", (int)ir);
      _exit(0);
    }
    T_CU(ir);
    CUcontext c = begin("destroy");
    CUdeviceptr q[NSIZES];
    for (int i = 0; i < NSIZES; i++) {
      T_CU(cuMemAlloc(&q[i], sizes[i]));
      fill(q[i], sizes[i], (unsigned char)(0x60 + i));
    }
    st = t_stats(shim, 0);
    T_EQ_U64(st.live_count, NSIZES, "the child's live allocations");
    T_CU(cuCtxDestroy(c));
    st = t_stats(shim, 0);
    T_EQ_U64(st.live_bytes, 0, "the child's live bytes after its context ended");
    T_EQ_U64(st.reserved_bytes, 0, "the child's reserved bytes after its context ended");
    _exit(0);
  }
  int status = 0;
  T_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed");
  for (int i = 0; i < NSIZES; i++) {
    unsigned char v = 0;
    T_CU(cuMemcpyDtoH(&v, p[i] + sizes[i] - 1, 1));
    T_CHECK(v == 0x30 + i, "the parent's block %d after the child (%u)", i, v);
  }
  T_CU(cuCtxDestroy(a));
  vramshim_card_stats st = t_stats(shim, 0);
  T_EQ_U64(st.live_bytes, 0, "the parent's live bytes after its context ended");
  T_SAY("fork: the child follows its own contexts only: PASS");
  return 0;
}

static int overlaps(CUdeviceptr a, size_t na, CUdeviceptr b, size_t nb) { return a < b + nb && b < a + na; }

int main(int argc, char **argv) {
  T_CHECK(argc == 2 && (!strcmp(argv[1], "destroy") || !strcmp(argv[1], "release") || !strcmp(argv[1], "reset") ||
                        !strcmp(argv[1], "fork")),
          "usage: ctx_teardown destroy|release|reset|fork");
  const char *how = argv[1];
  shim_api shim = t_shim();
  sim_api sim = t_sim(RTLD_DEFAULT);
  T_CU(cuInit(0));
  if (!strcmp(how, "fork")) return forked(&shim);

  CUcontext a = begin(how);
  size_t free0 = 0, total0 = 0;
  T_CU(cuMemGetInfo(&free0, &total0));
  CUdeviceptr pa[NSIZES];
  unsigned long long ida[NSIZES];
  for (int i = 0; i < NSIZES; i++) {
    T_CU(cuMemAlloc(&pa[i], sizes[i]));
    fill(pa[i], sizes[i], (unsigned char)(0x10 + i));
    ida[i] = buffer_id(pa[i]);
    CUcontext owner = NULL;
    T_CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, pa[i]));
    T_CHECK(owner == a, "block %d belongs to context A (%p), says %p", i, (void *)a, (void *)owner);
  }
  /* All but the last freed before the end; the last never. */
  for (int i = 0; i < NSIZES - 1; i++) T_CU(cuMemFree(pa[i]));
  end(how, a);

  CUresult r = cuMemFree(pa[NSIZES - 1]);
  T_CHECK(r == CUDA_ERROR_INVALID_VALUE, "free of a block of an ended context: %d (the driver says %d)", (int)r,
          (int)CUDA_ERROR_INVALID_VALUE);
  r = cuMemFree(pa[0]);
  T_CHECK(r == CUDA_ERROR_INVALID_VALUE, "second free of a block freed before the end: %d", (int)r);
  vramshim_card_stats st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 0, "live bytes after the end");
  T_EQ_U64(st.live_count, 0, "live allocations after the end");
  T_EQ_U64(st.reserved_bytes, 0, "bytes the shim holds from the driver after the end");
  if (sim.live_bytes) T_EQ_U64(sim.live_bytes(0), 0, "the sim's live bytes after the end");

  CUcontext b = begin(how);
  size_t free1 = 0, total1 = 0;
  T_CU(cuMemGetInfo(&free1, &total1));
  T_CHECK(free1 == free0 && total1 == total0,
          "the tenant's view after the end: %zu of %zu B free, before A allocated: %zu of %zu B", free1, total1,
          free0, total0);

  enum { NB = 2 * NSIZES };
  CUdeviceptr pb[NB];
  size_t nb[NB];
  int reused = 0;
  for (int i = 0; i < NB; i++) {
    nb[i] = sizes[i % NSIZES];
    T_CU(cuMemAlloc(&pb[i], nb[i]));
    fill(pb[i], nb[i], (unsigned char)(0x80 + i));
    CUcontext owner = NULL;
    T_CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, pb[i]));
    T_CHECK(owner == b, "block %d belongs to context B (%p), says %p", i, (void *)b, (void *)owner);
    unsigned long long id = buffer_id(pb[i]);
    for (int j = 0; j < NSIZES; j++) {
      T_CHECK(id != ida[j], "block %d of B has the buffer id %llu of A's block %d", i, id, j);
      reused += pb[i] == pa[j];
    }
    for (int j = 0; j < i; j++) {
      T_CHECK(!overlaps(pb[i], nb[i], pb[j], nb[j]), "blocks %d and %d of B overlap", i, j);
      T_CHECK(id != buffer_id(pb[j]), "blocks %d and %d of B share a buffer id", i, j);
    }
  }
  /* Every pattern still there: no block was handed out twice. */
  for (int i = 0; i < NB; i++) {
    unsigned char first = 0, last = 0;
    T_CU(cuMemcpyDtoH(&first, pb[i], 1));
    T_CU(cuMemcpyDtoH(&last, pb[i] + nb[i] - 1, 1));
    T_CHECK(first == 0x80 + i && last == 0x80 + i, "block %d of B lost its pattern (%u, %u)", i, first, last);
  }
  for (int i = 0; i < NB; i++) T_CU(cuMemFree(pb[i]));
  end(how, b);
  st = t_stats(&shim, 0);
  T_EQ_U64(st.live_bytes, 0, "live bytes after B");
  T_EQ_U64(st.reserved_bytes, 0, "reserved bytes after B");
  T_SAY("%s: nothing of an ended context is handed out again (%d of B's blocks at an address A used): PASS", how,
        reused);
  return 0;
}

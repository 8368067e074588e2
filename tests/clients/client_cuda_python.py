"""NVIDIA's Python bindings (cuda-bindings / cuda.core from PyPI) under the
shim, over the simulated driver. cuda.bindings resolves every driver
function through cuGetProcAddress_v2, so the shim sees this program only if
its cuGetProcAddress hook hands out the memory hooks. Allocates with
cuMemAlloc, cuMemAllocAsync (the device's default pool),
cuMemAllocFromPoolAsync (a pool made here) and cuda.core's
Device.allocate, frees everything, and checks through vramshim_stats and
vramshim_hook_count that the shim saw every allocation and free with exact
live bytes, back to zero at the end.

usage: client_cuda_python.py LIBVRAMSHIM MODE   (MODE: the config's arena)
Exit 77 (skipped) when this python cannot import the bindings."""
import ctypes
import sys

try:
    from cuda.bindings import driver as cu
    from cuda.core import Device
except ImportError as e:
    print(f"vramshim-test: skipping, {sys.executable} cannot import cuda.bindings/cuda.core ({e})")
    sys.exit(77)

SHIM_PATH, MODE = sys.argv[1], sys.argv[2]
CALL_KINDS = 16                       # VRAMSHIM_CALL_KINDS in include/vramshim.h
PATH_PROCADDRESS, PATH_CALLS = 1, 2   # vramshim_path
CALL_MEM_ALLOC, CALL_MEM_FREE, CALL_MEM_ALLOC_ASYNC, CALL_MEM_FREE_ASYNC = 0, 2, 3, 4


class CardStats(ctypes.Structure):    # vramshim_card_stats
    _fields_ = [("card", ctypes.c_int32), ("live_bytes", ctypes.c_uint64), ("live_count", ctypes.c_uint64),
                ("peak_live_bytes", ctypes.c_uint64), ("reserved_bytes", ctypes.c_uint64),
                ("peak_reserved_bytes", ctypes.c_uint64), ("alloc_requests", ctypes.c_uint64),
                ("free_requests", ctypes.c_uint64), ("failed_requests", ctypes.c_uint64),
                ("driver_calls", ctypes.c_uint64 * CALL_KINDS), ("va_reserved_bytes", ctypes.c_uint64),
                ("ipc_open_bytes", ctypes.c_uint64), ("ipc_open_count", ctypes.c_uint64)]


shim = ctypes.CDLL(SHIM_PATH)         # already preloaded: the same copy
shim.vramshim_stats.argtypes = [ctypes.c_int, ctypes.POINTER(CardStats)]
shim.vramshim_hook_count.restype = ctypes.c_uint64
shim.vramshim_hook_count.argtypes = [ctypes.c_char_p, ctypes.c_int]
shim.vramshim_driver_path.restype = ctypes.c_char_p


def stats():
    s = CardStats()
    assert shim.vramshim_stats(0, ctypes.byref(s)) == 0
    return s


def hooks(fn, path=PATH_CALLS):
    return shim.vramshim_hook_count(fn.encode(), path)


def ok(r):
    err = r[0] if isinstance(r, tuple) else r
    assert err == cu.CUresult.CUDA_SUCCESS, r
    return r[1] if isinstance(r, tuple) and len(r) == 2 else r[1:]


def expect_live(what, live, count, base):
    s = stats()
    assert s.live_bytes - base.live_bytes == live and s.live_count - base.live_count == count, \
        f"{what}: the shim counts {s.live_bytes - base.live_bytes} bytes in {s.live_count - base.live_count} " \
        f"allocations, want {live} in {count}"
    assert s.reserved_bytes >= s.live_bytes, (what, s.reserved_bytes, s.live_bytes)
    return s


ok(cu.cuInit(0))
assert shim.vramshim_driver_path(), "the shim loaded no driver"
sim = ctypes.CDLL("libcuda.so.1")     # the sim, under its soname
sim.vramsim_live_bytes.restype = ctypes.c_uint64
# How cuda.bindings reached the driver: cuGetProcAddress_v2, answered by the shim.
assert hooks("cuGetProcAddress_v2", PATH_CALLS) > 0, "cuda.bindings never called the shim's cuGetProcAddress_v2"
dev = ok(cu.cuDeviceGet(0))
ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
ok(cu.cuCtxSetCurrent(ctx))
base = stats()
assert base.live_bytes == 0 and base.live_count == 0, "something is live before the test allocates"
n_alloc = n_free = 0

# 1. cuMemAlloc / cuMemFree, odd sizes: live bytes are the requested ones.
sizes = [1 << 20, 3 * (1 << 20) + 123, 4096, 70 << 20]
ptrs = [ok(cu.cuMemAlloc(n)) for n in sizes]
n_alloc += len(sizes)
s = expect_live("cuMemAlloc", sum(sizes), len(sizes), base)
assert hooks("cuMemAlloc_v2", PATH_PROCADDRESS) >= 1, "cuMemAlloc_v2 was not handed out through cuGetProcAddress"
assert hooks("cuMemAlloc_v2") >= len(sizes)
if MODE == "off":   # pass-through: the driver holds exactly what the program asked for
    assert sim.vramsim_live_bytes(0) == sum(sizes), (sim.vramsim_live_bytes(0), sum(sizes))
    assert s.driver_calls[CALL_MEM_ALLOC] - base.driver_calls[CALL_MEM_ALLOC] == len(sizes)
for p, n in zip(ptrs, sizes):   # RANGE_SIZE of a shim pointer is the allocation's own
    assert ok(cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_RANGE_SIZE, p)) == n
# 1b. Pointer attributes as cuda-bindings' own driver tests read them: the
# plural call agrees with the singular one (MEMORY_TYPE aside: a real
# driver's plural call answers it differently, docs/gpu-validation.md), and
# SYNC_MEMOPS, the one a program sets, is each allocation's own: set, read,
# cleared and read again on one block while its neighbour stays unset.
A = cu.CUpointer_attribute
attrs = [A.CU_POINTER_ATTRIBUTE_CONTEXT, A.CU_POINTER_ATTRIBUTE_DEVICE_POINTER, A.CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
         A.CU_POINTER_ATTRIBUTE_BUFFER_ID, A.CU_POINTER_ATTRIBUTE_IS_MANAGED, A.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
         A.CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, A.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
         A.CU_POINTER_ATTRIBUTE_RANGE_SIZE, A.CU_POINTER_ATTRIBUTE_MAPPED, A.CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
         A.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE]
for p in ptrs:
    one = [cu.cuPointerGetAttribute(a, p) for a in attrs]
    many = ok(cu.cuPointerGetAttributes(len(attrs), attrs, p))
    for a, (err, v), w in zip(attrs, one, many):
        assert err == cu.CUresult.CUDA_SUCCESS, (a, err)
        assert str(v) == str(w), (a, v, w)
first, neighbour = ptrs[2], ptrs[0]   # 4 KiB and 1 MiB: with the arena, in one chunk or VMM range
for val in (True, False, True, False):
    ok(cu.cuPointerSetAttribute(val, A.CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, first))
    assert ok(cu.cuPointerGetAttribute(A.CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, first)) == val, val
    assert ok(cu.cuPointerGetAttribute(A.CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, neighbour)) is False, val
for p in ptrs:
    ok(cu.cuMemFree(p))
n_free += len(sizes)
expect_live("cuMemFree", 0, 0, base)

# 2. cuMemAllocAsync from the device's default pool, freed in stream order.
stream = ok(cu.cuStreamCreate(0))
asizes = [2 << 20, 5000, 33 << 20]
aptrs = [ok(cu.cuMemAllocAsync(n, stream)) for n in asizes]
n_alloc += len(asizes)
expect_live("cuMemAllocAsync", sum(asizes), len(asizes), base)
assert hooks("cuMemAllocAsync", PATH_PROCADDRESS) + hooks("cuMemAllocAsync_ptsz", PATH_PROCADDRESS) >= 1
# The device's default pool counts them, whoever serves them (the arena in
# its place, or the driver's pool with arena = off): pool_view.c.
dev0 = ok(cu.cuDeviceGet(0))
defpool = ok(cu.cuDeviceGetDefaultMemPool(dev0))
used = int(ok(cu.cuMemPoolGetAttribute(defpool, cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_USED_MEM_CURRENT)))
assert used >= sum(asizes), ("default pool used", used, sum(asizes))
assert hooks("cuMemPoolGetAttribute", PATH_PROCADDRESS) >= 1
for p in aptrs:
    ok(cu.cuMemFreeAsync(p, stream))
n_free += len(asizes)
ok(cu.cuStreamSynchronize(stream))
expect_live("cuMemFreeAsync", 0, 0, base)

# 3. cuMemAllocFromPoolAsync from a pool of our own.
props = cu.CUmemPoolProps()
props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
props.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
props.location.id = 0
pool = ok(cu.cuMemPoolCreate(props))
psizes = [1 << 20, 7 << 20, 777]
pptrs = [ok(cu.cuMemAllocFromPoolAsync(n, pool, stream)) for n in psizes]
n_alloc += len(psizes)
expect_live("cuMemAllocFromPoolAsync", sum(psizes), len(psizes), base)
assert hooks("cuMemAllocFromPoolAsync", PATH_PROCADDRESS) + \
    hooks("cuMemAllocFromPoolAsync_ptsz", PATH_PROCADDRESS) >= 1
for p in pptrs:
    ok(cu.cuMemFreeAsync(p, stream))
n_free += len(psizes)
ok(cu.cuStreamSynchronize(stream))
expect_live("cuMemFreeAsync (pool)", 0, 0, base)
ok(cu.cuMemPoolDestroy(pool))

# 4. cuda.core: Device.allocate (the device's memory resource), buffers closed on a stream.
d = Device(0)
d.set_current()
s4 = d.create_stream()
csizes = [4096, 9 << 20]
bufs = [d.allocate(n, stream=s4) for n in csizes]
n_alloc += len(csizes)
expect_live("cuda.core Device.allocate", sum(csizes), len(csizes), base)
bufs[0].fill(7, stream=s4)
s4.sync()
assert ctypes.string_at(int(bufs[0].handle), 4) == b"\x07" * 4   # sim device bytes are host bytes
for b in bufs:
    b.close(s4)
n_free += len(csizes)
s4.sync()
ok(cu.cuStreamDestroy(stream))

end = expect_live("the end", 0, 0, base)
assert end.live_bytes == 0 and end.live_count == 0
assert end.alloc_requests - base.alloc_requests == n_alloc, (end.alloc_requests, n_alloc)
assert end.free_requests - base.free_requests == n_free, (end.free_requests, n_free)
assert end.failed_requests == 0
want_peak = max(sum(sizes), sum(asizes), sum(psizes), sum(csizes))
assert end.peak_live_bytes == want_peak, (end.peak_live_bytes, want_peak)
# What the driver holds is what the shim says it reserved: nothing with
# arena = off; with the arena, its cache (under release_threshold).
assert end.reserved_bytes == sim.vramsim_live_bytes(0), (end.reserved_bytes, sim.vramsim_live_bytes(0))
assert (end.reserved_bytes == 0) == (MODE == "off"), (MODE, end.reserved_bytes)
async_allocs = end.driver_calls[CALL_MEM_ALLOC_ASYNC] - base.driver_calls[CALL_MEM_ALLOC_ASYNC]
# Stream-ordered: cuMemAllocAsync on a stream the program made is the
# arena's when it is on (stream_alloc.h), the driver's pool's with arena =
# off; a pool of the program's own (cuMemAllocFromPoolAsync, cuda.core's
# memory resource) is always the driver's.
want_async = len(psizes) + len(csizes) + (len(asizes) if MODE == "off" else 0)
assert async_allocs == want_async, (async_allocs, want_async)
import cuda.bindings, cuda.core
print(f"vramshim-test: cuda.bindings {cuda.bindings.__version__} + cuda.core {cuda.core.__version__} under the shim (arena = {MODE}): "
      f"{n_alloc} allocations and {n_free} frees seen, peak live {end.peak_live_bytes} bytes, "
      f"reserved now {end.reserved_bytes} bytes; PASS")

"""NVIDIA's Python bindings over the simulated driver: cuda.bindings
resolves every driver function through cuGetProcAddress; cuda.core
allocates from the device's memory pool in stream order. Checked against
the sim's counters. Exit 77 (skipped) when this python lacks them."""
import ctypes
import sys

try:
    from cuda.bindings import driver as cu
    from cuda.core import Device
except ImportError as e:
    print(f"vramshim: sim: skipping, {sys.executable} cannot import cuda.bindings/cuda.core ({e})")
    sys.exit(77)


def ok(r):
    err = r[0] if isinstance(r, tuple) else r
    assert err == cu.CUresult.CUDA_SUCCESS, r
    return r[1] if isinstance(r, tuple) and len(r) == 2 else r[1:]


ok(cu.cuInit(0))
sim = ctypes.CDLL("libcuda.so.1")   # the sim, already loaded under its soname
sim.vramsim_calls.restype = ctypes.c_uint64
sim.vramsim_live_bytes.restype = ctypes.c_uint64
sim.vramsim_live_count.restype = ctypes.c_uint64
assert sim.vramsim_calls(b"cuGetProcAddress_v2") > 0

# the driver API through cuda.bindings
dev = ok(cu.cuDeviceGet(0))
ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
ok(cu.cuCtxSetCurrent(ctx))
free, total = ok(cu.cuMemGetInfo())
assert total == 24 << 30, total
p = ok(cu.cuMemAlloc(1 << 20))
assert ok(cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_RANGE_SIZE, p)) == 1 << 20
assert sim.vramsim_live_bytes(0) == 1 << 20
ok(cu.cuMemFree(p))

# stream-ordered allocation through cuda.core
d = Device(0)
d.set_current()
s = d.create_stream()
a = d.allocate(4096, stream=s)
b = d.allocate(4096, stream=s)
assert sim.vramsim_live_count(0) == 2
a.fill(7, stream=s)
b.copy_from(a, stream=s)
s.record().sync()
assert ctypes.string_at(int(b.handle), 4) == b"\x07" * 4   # device bytes are host bytes in the sim
a.close(s)
b.close(s)
s.sync()
assert sim.vramsim_live_count(0) == 0 and sim.vramsim_live_bytes(0) == 0
pooled = sim.vramsim_calls(b"cuMemAllocFromPoolAsync") + sim.vramsim_calls(b"cuMemAllocAsync") + \
    sim.vramsim_calls(b"cuMemAllocFromPoolAsync_ptsz") + sim.vramsim_calls(b"cuMemAllocAsync_ptsz")
assert pooled == 2, pooled
print("vramshim: sim: cuda.bindings and cuda.core ok")

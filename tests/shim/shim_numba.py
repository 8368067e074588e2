"""Test 5: Numba's CUDA driver layer (ctypes: dlopen + dlsym) over the shim.

cuda.to_device, copy_to_host and freeing must go through the shim's hooks,
and the shim's accounting must match the driver's at each step. Exits 77
(skip) when Numba or NumPy is missing.
"""
import ctypes
import os
import sys

try:
    import numpy as np
    from numba import cuda
except ImportError as e:  # pragma: no cover
    print("vramshim-test: SKIP numba is not installed (%s)" % e)
    sys.exit(77)

CALL_KINDS = 16


class CardStats(ctypes.Structure):
    _fields_ = [("card", ctypes.c_int32)] + [
        (n, ctypes.c_uint64)
        for n in ("live_bytes", "live_count", "peak_live_bytes", "reserved_bytes", "peak_reserved_bytes",
                  "alloc_requests", "free_requests", "failed_requests")
    ] + [("driver_calls", ctypes.c_uint64 * CALL_KINDS)] + [
        (n, ctypes.c_uint64) for n in ("va_reserved_bytes", "ipc_open_bytes", "ipc_open_count")
    ]


def fail(msg):
    print("vramshim-test: FAIL " + msg)
    sys.exit(1)


process = ctypes.CDLL(None)
try:
    vramshim_stats = process.vramshim_stats
    hook_count = process.vramshim_hook_count
except AttributeError:
    fail("libvramshim.so is not preloaded")
hook_count.restype = ctypes.c_uint64
hook_count.argtypes = [ctypes.c_char_p, ctypes.c_int]

sim = None
if os.environ.get("NUMBA_CUDA_DRIVER") and not os.environ.get("VRAMSHIM_TEST_REAL_DRIVER"):
    lib = ctypes.CDLL(os.environ["NUMBA_CUDA_DRIVER"])
    if hasattr(lib, "vramsim_live_bytes"):
        sim = lib
        sim.vramsim_live_bytes.restype = ctypes.c_uint64
        sim.vramsim_live_count.restype = ctypes.c_uint64


def stats():
    s = CardStats()
    if vramshim_stats(0, ctypes.byref(s)) != 0:
        fail("vramshim_stats")
    return s


def match(when):
    s = stats()
    if sim is None:
        print("vramshim-test: %s: shim %d bytes in %d allocations" % (when, s.live_bytes, s.live_count))
        return s
    sb, sc = sim.vramsim_live_bytes(0), sim.vramsim_live_count(0)
    if (s.live_bytes, s.live_count) != (sb, sc):
        fail("%s: shim %d bytes/%d allocations, driver %d/%d" % (when, s.live_bytes, s.live_count, sb, sc))
    print("vramshim-test: %s: %d bytes in %d allocations, shim and driver agree" % (when, sb, sc))
    return s


host = np.arange(1 << 18, dtype=np.float32)  # 1 MiB
dev = cuda.to_device(host)
s = match("after to_device")
if s.live_bytes < host.nbytes:
    fail("to_device was not seen by the shim (%d bytes live)" % s.live_bytes)
if hook_count(b"cuMemAlloc_v2", 0) < 1:
    fail("Numba's dlsym(cuMemAlloc_v2) was not answered by the shim")
back = dev.copy_to_host()
if not np.array_equal(host, back):
    fail("copy_to_host returned other bytes")
second = cuda.device_array(12345, dtype=np.uint8)
match("after device_array")
del dev, second
# Numba defers frees in its memory manager's queue; run them now.
ctx = cuda.current_context()
getattr(ctx, "memory_manager", ctx).deallocations.clear()
s = match("after freeing")
if s.free_requests < 2:
    fail("the frees did not go through the shim (%d)" % s.free_requests)
if s.live_bytes != 0:
    fail("live bytes not back to zero: %d" % s.live_bytes)
print("vramshim-test: PASS (Numba: %d allocations, %d frees through the shim)" % (s.alloc_requests, s.free_requests))

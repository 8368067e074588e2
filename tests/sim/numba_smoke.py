"""Numba's CUDA driver layer (dlopen + dlsym via NUMBA_CUDA_DRIVER) over the
simulated driver: to_device, copy_to_host and freeing, checked against the
sim's own counters. Exit 77 (skipped) when this python has no numba."""
import ctypes
import gc
import os
import sys

try:
    import numpy as np
    from numba import cuda
except ImportError as e:
    print(f"vramshim: sim: skipping, {sys.executable} cannot import numba ({e})")
    sys.exit(77)

data = np.arange(1000, dtype=np.int64)
dev = cuda.to_device(data)
back = dev.copy_to_host()
assert (back == data).all(), back

sim = ctypes.CDLL(os.environ["NUMBA_CUDA_DRIVER"])
sim.vramsim_calls.restype = ctypes.c_uint64
sim.vramsim_live_bytes.restype = ctypes.c_uint64
sim.vramsim_live_count.restype = ctypes.c_uint64
assert sim.vramsim_calls(b"cuMemAlloc_v2") == 1
assert sim.vramsim_calls(b"cuMemcpyHtoD_v2") == 1
assert sim.vramsim_calls(b"cuMemcpyDtoH_v2") == 1
assert sim.vramsim_live_bytes(0) == data.nbytes, sim.vramsim_live_bytes(0)
assert sim.vramsim_live_count(0) == 1

del dev
gc.collect()
cuda.current_context().memory_manager.deallocations.clear()   # flush deferred frees
assert sim.vramsim_calls(b"cuMemFree_v2") == 1, sim.vramsim_calls(b"cuMemFree_v2")
assert sim.vramsim_live_count(0) == 0
free, total = cuda.current_context().get_memory_info()
assert total == 24 << 30 and free == total, (free, total)
print("vramshim: sim: numba ok:", back[:5], "...")

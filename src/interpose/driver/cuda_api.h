/* The Driver API as the interposer sees it: every ABI variant by its own
 * name. With __CUDA_API_VERSION_INTERNAL, cuda.h declares cuMemAlloc_v2
 * and the legacy cuMemAlloc (32-bit sizes) side by side instead of mapping
 * one name onto the other, and the _ptsz variants by their names. Every
 * interposer source includes this header before anything that includes
 * cuda.h.
 *
 * The public dlsym is poisoned from here on: on POSIX the shim overrides
 * dlsym, so calling it by name from inside the shim would call itself (and
 * lose the caller's RTLD_NEXT position). Use vs_plat_dl_sym() (dynlib.h). */
#ifndef VS_CUDA_API_H
#define VS_CUDA_API_H

#ifdef CUDA_VERSION
#error "cuda.h was included before cuda_api.h: the legacy ABI variants would be missing"
#endif
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#pragma GCC poison dlsym

#endif

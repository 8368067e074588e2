/* Loading the driver and finding its functions: dlopen/dlsym/dladdr on
 * POSIX, LoadLibraryExW/GetProcAddress/GetModuleHandleEx on Windows. */
#ifndef VS_PLAT_DYNLIB_H
#define VS_PLAT_DYNLIB_H

#include <stddef.h>

/* The driver a program loads when VRAMSHIM_DRIVER does not name one:
 * "libcuda.so.1" on POSIX; System32's nvcuda.dll (by its absolute path, as
 * the CUDA runtime loads it) on Windows. */
const char *vs_plat_driver_default(void);
/* NVML, when VRAMSHIM_NVML does not name it: "libnvidia-ml.so.1" on POSIX,
 * "nvml.dll" on Windows (found by the loader's search, System32 first, or
 * the one the program already loaded). */
const char *vs_plat_nvml_default(void);

/* $name, or NULL; on POSIX NULL too in a set-uid program (secure_getenv). */
const char *vs_plat_getenv_secure(const char *name);

/* Loads a library (kept loaded for the process's life); NULL with the
 * loader's reason in err. */
void *vs_plat_dl_open(const char *path, char *err, size_t errlen);

/* The library's own export `name` (never an override of the shim's), NULL
 * when it has none. */
void *vs_plat_dl_sym(void *handle, const char *name);

/* The module that contains code address fn: an identity to compare (its
 * base), and its file path into path when path is not NULL; NULL when fn
 * is in no module. */
const void *vs_plat_dl_module_of(const void *fn, char *path, size_t len);

#endif

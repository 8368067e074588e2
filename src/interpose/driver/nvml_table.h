/* The real NVML: loaded once, lazily, from $VRAMSHIM_NVML, else
 * libnvidia-ml.so.1 (Windows: nvml.dll), with its pointer for every
 * function of nvml_api.h's lists.
 *
 * Invariants as driver_table.h's: a pointer in the table is never one of
 * the shim's own hooks (a library that resolves back to the shim is
 * refused); once vs_nvml() returned the table it never changes. A process
 * without NVML (no such library) is no error: NVML's hooks are then only
 * reached by a program that already failed to load it. */
#ifndef VS_NVML_TABLE_H
#define VS_NVML_TABLE_H

#include "nvml_api.h"

typedef struct vs_nvml_table {
#define X(ret, name, params, args) ret (*name) params;
  VS_NVML_HOOKS(X)
  VS_NVML_EXTRAS(X)
#undef X
} vs_nvml_table;

/* The table, loading NVML on first use; NULL when there is none. */
const vs_nvml_table *vs_nvml(void);
/* The real pointer of hook `id`, NULL when NVML or the function is missing. */
void *vs_nvml_real(int id);
/* NVML initialised for the shim's own calls (nvmlInit_v2 once, never shut
 * down: NVML counts inits, so the program's own shutdown stays balanced);
 * NULL when NVML is missing or refuses.
 * may_load 0: NULL, rather than loading NVML, when nobody has loaded it yet.
 * The shim's background thread passes 0: it never dlopens. A dlopen that
 * races the program's exit runs the constructors of libraries exit has
 * already finalised (glibc clears their "initialised" mark), the driver's
 * among them; the program's own threads load NVML (a context's start). */
const vs_nvml_table *vs_nvml_for_shim(int may_load);

/* fork: the loader lock, held across fork (driver_table.h's reason) */
void vs_nvml_atfork_prepare(void);
void vs_nvml_atfork_release(void);

#endif

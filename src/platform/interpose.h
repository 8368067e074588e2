/* Putting the shim on the program's paths to the driver.
 *
 * POSIX: LD_PRELOAD puts the shim's exported cu* first for direct binding;
 * a load-time constructor starts it, and the dlsym override answers lookups
 * on the driver's handle. Windows: the DLL is injected (launch.h) and
 * patches the import tables of the program's modules (LoadLibrary*,
 * GetProcAddress, CreateProcess* and nvcuda.dll's cu* imports), now and
 * for every module loaded later; GetProcAddress on the driver answers with
 * the shim's hooks; child processes are injected as they are created.
 *
 * Like mimalloc's prim layer, the platform calls back into the shim through
 * the vs_shim_* functions below, which src/interpose defines. */
#ifndef VS_PLAT_INTERPOSE_H
#define VS_PLAT_INTERPOSE_H

/* --- provided by the shim (src/interpose) --- */

/* The shim's entry point for the driver function `name` ("cuMemAlloc_v2",
 * or NVML's "nvmlDeviceGetMemoryInfo"), or NULL when the shim does not hook it. Pure: loads nothing, counts
 * nothing, safe under the Windows loader lock (import-table patching). */
void *vs_shim_hook_for(const char *name);

/* The answer to a lookup of `name` on the driver's handle (dlsym,
 * GetProcAddress): the hook when the shim hooks it and the driver has that
 * variant (loading the driver if need be), counted as a lookup; NULL when
 * the driver's own answer stands. */
void *vs_shim_lookup(const char *name);

/* The shim's start-up: logging, fork handlers, settings, the observer
 * thread. POSIX runs it from a load-time constructor; Windows from the first
 * hook (never under the loader lock). */
void vs_shim_start(void);

/* The process is about to end while its other threads still run (Windows:
 * the program's call of ExitProcess, hooked): the shim's exit work, done
 * there because the destructors will run too late (vs_plat_exit_work_ok).
 * POSIX never calls it: its destructors run while threads still run. */
void vs_shim_exit(void);

/* --- provided by the platform --- */

/* 1 when the shim's exit-time work (its destructors: giving ledger slots
 * back, removing its IPC files) may take the shim's locks. POSIX: in the
 * process that loaded the shim or a fork child of it (exit runs them while
 * the other threads still run); not in a child made without fork handlers
 * (a bare clone(2)), whose state is a copy of its parent's. Windows: not once
 * the process is ending (ExitProcess has ended every other thread first,
 * perhaps inside one of those locks, before the DLL's destructors run);
 * the slots are then reclaimed as a dead process's, by the next process
 * that uses the card. */
int vs_plat_exit_work_ok(void);

/* 1 when the platform's loader does the interposition on its own (LD_PRELOAD
 * on POSIX); on Windows 1 once the import tables are patched. For the
 * debug log only. */
int vs_plat_interpose_active(void);

#endif

/* The simulated driver's operating-system services: the only sim header
 * whose implementation differs per system (os_posix.c on Linux,
 * os_windows.c on Windows; tools/sim/CMakeLists.txt picks one). The other
 * sim files call these and carry no #ifdef of their own.
 *
 * This is the test driver's own OS code, not the product's platform layer
 * (src/platform): the sim must build and run without vramshim.
 *
 * A memory object (sim_os_obj) is what device memory lives in: a memfd on
 * Linux, a pagefile-backed section (CreateFileMapping) on Windows. It can be
 * mapped at any address, or at a fixed one inside a VMM reservation, and
 * every mapping shows the same bytes. */
#ifndef VRAMSIM_OS_H
#define VRAMSIM_OS_H
#include <stddef.h>
#include <stdint.h>

typedef intptr_t sim_os_obj;            /* memfd, or a section HANDLE */
#define SIM_OS_NO_OBJ ((sim_os_obj)-1)

/* ---- processes ---- */
int32_t sim_os_pid(void);
/* An identity of the live process pid beside its number (Linux: its start
 * time in /proc/<pid>/stat; Windows: its creation time), so a recycled pid
 * is not taken for the old process; 0 when it cannot be read. */
uint64_t sim_os_proc_start(int32_t pid);
/* 1 when pid is gone, a zombie, or no longer the process that had start. */
int sim_os_proc_dead(int32_t pid, uint64_t start);
void sim_os_sleep_us(uint64_t us);       /* the whole time, across signals */
/* Once, at the first cuInit: make room for many memory objects (Linux:
 * raise RLIMIT_NOFILE, one memfd per allocation). */
void sim_os_process_setup(void);
/* pthread_atfork on POSIX; nothing on Windows, which has no fork. */
void sim_os_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));
/* Where the card state lives without VRAMSIM_STATE: /dev/shm/vramsim-<uid>.state,
 * %TEMP%\vramsim.state. */
void sim_os_default_state_path(char *buf, size_t n);

/* ---- the card state shared by every process (state.c) ----
 * Opens (creating owner-only, never through a symlink) the file at path
 * and maps its first size bytes shared. On success it returns with the
 * creation lock held, so the caller may format the state; it then calls
 * sim_os_state_ready(). NULL (with a "vramshim: sim:" message) on failure. */
void *sim_os_state_map(const char *path, size_t size);
void sim_os_state_ready(void);
/* The state's robust lock. POSIX: a process-shared robust pthread mutex
 * in the SIM_OS_LOCK_BYTES at lock, inside the mapping. Windows: a named
 * mutex derived from the state path (those bytes are unused). */
#define SIM_OS_LOCK_BYTES 64
void sim_os_lock_init(void *lock);
/* 1 when the previous owner died holding it (the caller repairs), else 0 */
int sim_os_lock(void *lock);
void sim_os_unlock(void *lock);

/* ---- memory objects ---- */
/* A zero-filled object of len bytes (a multiple of SIM_PAGE); name tells a
 * Linux process what it opened ("vramsim-<pid>-<id>.<card>"). Returns 0, or
 * -1 for too many objects / out of memory (-2 for any other failure). */
int sim_os_obj_create(size_t len, const char *name, sim_os_obj *out);
void sim_os_obj_close(sim_os_obj o);
/* Maps all len bytes read-write, at an address aligned to align (a power of
 * two; up to the system's mapping granularity: anywhere); NULL on failure. */
void *sim_os_obj_map(sim_os_obj o, size_t len, size_t align);
void sim_os_obj_unmap(void *addr, size_t len);
/* Private read-write memory (pinned host memory); NULL on failure. */
void *sim_os_anon_alloc(size_t len);
void sim_os_anon_free(void *addr, size_t len);

/* ---- address space for VMM (vmm.c) ---- */
/* Inaccessible address space of size bytes at hint if free there (hint 0:
 * anywhere), aligned to align; NULL when there is none. */
void *sim_os_reserve(uintptr_t hint, size_t size, size_t align);
/* Gives back the reservation [addr, addr+size); nothing is mapped in it. */
void sim_os_release(void *addr, size_t size);
/* Maps [off, off+size) of o at addr, inaccessible, replacing the
 * reservation there; 0 on success. */
int sim_os_map_fixed(void *addr, size_t size, sim_os_obj o, size_t off);
/* Undoes sim_os_map_fixed: the range is reserved address space again. */
void sim_os_unmap_fixed(void *addr, size_t size);
/* access: 0 none, 1 read, 3 read-write (CU_MEM_ACCESS_FLAGS_PROT_*); 0 on success */
int sim_os_protect(void *addr, size_t size, int access);

/* ---- sharing memory between processes ---- */
/* 1 where cuIpc* memory handles work (Linux); 0 on Windows, where a WDDM
 * driver answers them with CUDA_ERROR_NOT_SUPPORTED (docs/sim.md). */
int sim_os_ipc_supported(void);
/* Maps len bytes of the object that process pid has as its handle obj,
 * after checking it is still that process's buffer id: 0 and *addr; -1
 * when it is not (any more), -2 when it cannot be mapped. */
int sim_os_ipc_map(int32_t pid, int32_t obj, uint64_t id, size_t len, void **addr);
/* 1 where CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR exists (POSIX). */
int sim_os_posix_fd_handles(void);
/* A new descriptor for o (the exported shareable handle); -1 on failure. */
int sim_os_obj_export_fd(sim_os_obj o);
/* From a descriptor another process exported: 0 with a new object, its
 * size and its card when it is memory of the sim; -1 when it is not, -2
 * when it cannot be duplicated. */
int sim_os_obj_import_fd(int fd, sim_os_obj *out, size_t *size, int *card);
/* An exportable pool's shareable handle (cuMemPoolExportToShareableHandle):
 * a new descriptor that names pool `id` of process pid on card (an empty
 * memfd "vramsim-pool-<pid>-<id>.<card>"); -1 on failure. */
int sim_os_pool_fd_create(int32_t pid, uint64_t id, int card);
/* What such a descriptor names: 0, or -1 when it is not one. */
int sim_os_pool_fd_read(int fd, int32_t *pid, uint64_t *id, int *card);
#endif

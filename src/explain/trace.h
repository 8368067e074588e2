/* Trace recording: every allocate, allocate failure and free of one card of
 * one process, appended as RMM logging CSV (BRIEF "Outside formats"):
 *
 *     Thread,Time,Action,Pointer,Size,Stream
 *     4711,00:00:01.250000,allocate,0x7f3a00000000,1048576,0x0
 *
 * Time is elapsed since the recorder's first event; Pointer and Stream are
 * hex; for a failure Pointer is 0x0. The path is a pattern: %p becomes the
 * pid, %d the card index, %% a '%'.
 *
 * Cost: an event is stored as a 40-byte binary record in the recorder's
 * buffer under its mutex, stamped with the TSC where it is invariant (else
 * CLOCK_MONOTONIC); no syscall, no formatting (the thread id is cached per
 * thread). A full buffer goes to the process's writer thread, which formats
 * and writes it while the hot path fills the other buffer; when both are
 * full the hot path waits for the writer (nothing is dropped). Buffers are
 * also written on vs_trace_flush(), at exit (atexit), when the recorder is
 * destroyed, and by the writer thread (started at the first record) every
 * 250 ms: a record reaches the file within a second, so a process ended by
 * SIGTERM or SIGKILL loses at most its last second, and the file is valid
 * CSV up to its last complete line. Memory: about 600 KiB per recorder. The file is opened at the first write (O_APPEND|O_NOFOLLOW,
 * header when empty), so a process that never allocates leaves no file.
 *
 * Fork: the child starts clean. Its copy of the parent's buffered events is
 * dropped (the parent writes them), its first write opens the file its own
 * pid names, and it writes full buffers itself (no thread is started after
 * a fork; a child's partly filled buffers are written when they fill, at
 * exit or on a flush). Events lost: those of a process that ends with
 * _exit or a signal since the writer's last pass (at most ~1 s). */
#ifndef VS_TRACE_H
#define VS_TRACE_H

#include <stddef.h>
#include <stdint.h>

typedef struct vs_trace vs_trace;

#define VS_TRACE_BUFFER (256 * 1024)   /* bytes of records per buffer (two per recorder) */

/* A recorder for one card; NULL with the reason in err (bad pattern, out of
 * memory). Nothing is opened yet. */
vs_trace *vs_trace_create(const char *pattern, int card, char *err, size_t errlen);
/* Flushes, closes the file, frees. */
void vs_trace_destroy(vs_trace *t);

void vs_trace_alloc(vs_trace *t, uint64_t ptr, uint64_t size, uint64_t stream);
void vs_trace_alloc_failed(vs_trace *t, uint64_t size, uint64_t stream);
void vs_trace_free(vs_trace *t, uint64_t ptr, uint64_t size, uint64_t stream);

/* Writes what is buffered. 0, or -1 when the file cannot be opened or
 * written (reported once through the log; later events are dropped). */
int vs_trace_flush(vs_trace *t);
/* Every recorder of the process (what the atexit handler does). */
void vs_trace_flush_all(void);
/* The process is ending while its threads still run (the shim on Windows:
 * its ExitProcess hook): every recorder is flushed now, and the atexit
 * handler does nothing afterwards. Events recorded after it (by threads
 * still running during the exit) are not written. */
void vs_trace_exit(void);
/* ok() tells the atexit handler whether it may take the recorder's locks
 * and wait for its writer thread (the shim: vs_plat_exit_work_ok). On
 * Windows a DLL's atexit handlers run after ExitProcess ended every other
 * thread, the writer included, perhaps inside a lock: the flush would wait
 * forever. Without ok (NULL, the default) it always flushes. */
void vs_trace_set_exit_guard(int (*ok)(void));

/* The path this process's recorder writes to (pattern expanded). */
const char *vs_trace_path(vs_trace *t);
/* Events recorded and events dropped since creation (or the fork). */
void vs_trace_counts(vs_trace *t, uint64_t *recorded, uint64_t *dropped);

/* Expands %p/%d/%% of pattern into out. 0, or -1 (unknown %x, too long). */
int vs_trace_expand(const char *pattern, long pid, int card, char *out, size_t outlen);

#endif

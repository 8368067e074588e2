/* Loading the shim into another process (Windows only): the launcher
 * (`vramshim run`, launch.c) and the shim's CreateProcess hooks
 * (interpose.c) share it.
 *
 * The target is normally a process created suspended: its main thread has
 * not run a single instruction of the program, so the shim is in place
 * (import tables patched) before the program's own code can reach the
 * driver. */
#ifndef VS_PLAT_WIN_INJECT_H
#define VS_PLAT_WIN_INJECT_H

#include <stddef.h>
#include <windows.h>

/* Loads `dll` (an absolute path) into `process` by running LoadLibraryW
 * there on a remote thread, and waits for it (at most timeout_ms). 0 when
 * the DLL is loaded; -1 with the reason in why otherwise (a 32-bit
 * process is refused before anything is done to it). The process is left
 * as it was (suspended or not). */
int vs_win_inject(HANDLE process, const wchar_t *dll, DWORD timeout_ms, char *why, size_t len);

/* For a launcher's own suspended child (launch.c, child.c): vs_win_inject,
 * and when that fails the child is ended (exit code 127, as a program that
 * could not start) and both of its handles closed, so no half-started
 * program is left behind. 0 with pi untouched, or -1 with why. */
int vs_win_inject_or_end(PROCESS_INFORMATION *pi, const wchar_t *dll, char *why, size_t len);

/* The real LoadLibraryW, GetProcAddress...: kernelbase's exports (kernel32's
 * may be stubs that jump through kernel32's own imports, which a patcher
 * must never touch), else kernel32's. NULL only if neither exports it. */
FARPROC vs_win_real_proc(const char *name);

#endif

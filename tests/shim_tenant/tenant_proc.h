/* Helpers of the shim_tenant tests: real processes under the shim over the
 * simulated driver. One program plays both parts: the orchestrator (never
 * allocates; reads the ledgers like `vramshim status`) and its workers,
 * which it starts by fork + exec of itself, so each worker is a fresh
 * process inheriting LD_PRELOAD, its own process in the ledger. Output
 * lines start with "vramshim-test: ". */
#ifndef VS_TENANT_PROC_H
#define VS_TENANT_PROC_H

#include <cuda.h>

#include "shim_test.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "ledger_read.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* The shim tests' own checks (tests/shim/shim_test.h), under short names. */
#define SAY T_SAY
#define CHECK T_CHECK

uint64_t tp_now_ns(void);
void tp_sleep_ms(int ms);
/* How long a condition that must come true (a process starting, a reclaim,
 * a wake-up, a dump written) may take before a test calls it broken.
 * Generous on purpose: a sanitizer build on a loaded 2-core machine is many
 * times slower than a normal one. The tests assert that it happens and
 * print how fast; the speed is a benchmark's to report. */
#define TP_EVENTUALLY_MS 30000

/* ---- orchestrator side ---------------------------------------------------- */
/* The test's own folder (created empty) and file names in it. */
void tp_workdir(const char *dir);
const char *tp_path(const char *name);   /* static buffer per call: copy it */
/* Writes the config (ledger_dir = <workdir>/ledger is prepended under
 * [global] unless global is NULL) and points VRAMSHIM_CONFIG at it. */
void tp_config(const char *global, const char *rest);
/* Starts this program with args under tenant (NULL: unset), stdout and
 * stderr to files "<tag>.out" / "<tag>.err" in the workdir. extra_env:
 * "NAME=VALUE" or NULL. */
pid_t tp_spawn(const char *tag, const char *tenant, const char *extra_env, const char *const *args);
/* Waits for exit; returns the exit status, or 128 + signal. */
int tp_wait(pid_t pid);
/* 1 when the process has exited (status in *st), 0 still running. */
int tp_exited(pid_t pid, int *st);
char *tp_read(const char *name);          /* a workdir file, malloc'd ("" if missing) */
int tp_count_lines(const char *text, const char *needle);
/* The ledger snapshot of card 0 (the only card) in <workdir>/ledger; 0 or -1. */
int tp_snapshot(vs_ledger_snapshot *s);
const vs_snap_proc *tp_proc(const vs_ledger_snapshot *s, int pid);
const vs_snap_tenant *tp_tenant(const vs_ledger_snapshot *s, const char *name);
/* Polls until pid holds at least bytes on card 0 (or timeout_ms of wall time). */
int tp_wait_held(int pid, uint64_t bytes, int timeout_ms);
/* The same for the cache pid last published (its background thread
 * publishes at its ticks, and may publish part of a run of frees first). */
int tp_wait_cached(int pid, uint64_t bytes, int timeout_ms);

/* ---- worker side ---------------------------------------------------------- */
void tp_cuda_up(void);
/* Workers take SIGUSR1 and SIGTERM (the orchestrator's commands) only by
 * tp_wait_signal: tp_worker_signals blocks them, at the worker's start. */
void tp_worker_signals(void);
/* Waits for SIGUSR1 or SIGTERM; returns which. */
int tp_wait_signal(void);
#endif

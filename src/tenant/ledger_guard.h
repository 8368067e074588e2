/* SIGBUS safety for ledger mappings (issue 10).
 *
 * A ledger is a file mapped shared by every process using the card; anyone
 * allowed to write it can truncate it, and touching a mapped page past the
 * new end of file raises SIGBUS. No process may crash whatever happens to
 * the file, so every mapping of a ledger is registered here: on a SIGBUS
 * inside a registered range, the handler replaces the whole range with
 * anonymous zero pages (the faulting access then completes on them) and
 * marks the range broken; the owner notices (vs_guard_broken) and
 * re-attaches to the file as it is now (ledger.c), carrying its own usage.
 * A SIGBUS anywhere else goes to the handler that was there before (or
 * the default action), exactly as without the shim.
 *
 * Limits: a program that installs its own SIGBUS handler after the shim
 * opened a ledger replaces this one (its handler then sees the fault). */
#ifndef VS_TENANT_LEDGER_GUARD_H
#define VS_TENANT_LEDGER_GUARD_H
#include <stddef.h>

/* Registers [addr, addr + len) (installs the handler on first use). 0, or
 * -1 when the table of ranges is full (the mapping is then unguarded). */
int vs_guard_add(void *addr, size_t len);
/* Forgets the range starting at addr (before it is unmapped). */
void vs_guard_remove(void *addr);
/* 1 when a SIGBUS replaced the range starting at addr with zero pages. */
int vs_guard_broken(const void *addr);
/* Replaces the range with anonymous zero pages now (the address stays
 * valid for lock-free readers that still hold it) and forgets it. */
void vs_guard_retire(void *addr, size_t len);
#endif

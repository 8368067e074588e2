/* Fault safety for shared mappings of a file (issue 10; was
 * src/tenant/ledger_guard.c).
 *
 * POSIX: a ledger is a file mapped shared by every process using the card;
 * anyone allowed to write it can truncate it, and touching a mapped page
 * past the new end of file raises SIGBUS. No process may crash whatever
 * happens to the file, so every mapping of a ledger is registered here: on
 * a SIGBUS inside a registered range, the handler replaces the whole range
 * with anonymous zero pages (the faulting access then completes on them)
 * and marks the range broken; the owner notices (vs_plat_guard_broken) and
 * re-attaches to the file as it is now (src/tenant/ledger.c), carrying its
 * own usage. A SIGBUS anywhere else goes to the handler that was there
 * before (or the default action), exactly as without the shim.
 * Limits: a program that installs its own SIGBUS handler after the shim
 * opened a ledger replaces this one (its handler then sees the fault).
 *
 * Windows: a file cannot be made shorter than a view mapped of it
 * (SetEndOfFile fails with ERROR_USER_MAPPED_FILE), so the fault this
 * guards against cannot happen: the functions only keep the table (broken
 * is never set by a fault) and retire unmaps nothing early. A ledger
 * deleted or replaced while mapped keeps its bytes, and the owner notices
 * by the path check, as on POSIX. */
#ifndef VS_PLAT_MAP_GUARD_H
#define VS_PLAT_MAP_GUARD_H
#include <stddef.h>

/* Registers [addr, addr + len) (installs the handler on first use). 0, or
 * -1 when the table of ranges is full (the mapping is then unguarded). */
int vs_plat_guard_add(void *addr, size_t len);
/* Forgets the range starting at addr (before it is unmapped). */
void vs_plat_guard_remove(void *addr);
/* 1 when a fault replaced the range starting at addr with zero pages. */
int vs_plat_guard_broken(const void *addr);
/* Replaces the range with zero pages now (the address stays valid for
 * lock-free readers that still hold it) and forgets it. */
void vs_plat_guard_retire(void *addr, size_t len);
#endif

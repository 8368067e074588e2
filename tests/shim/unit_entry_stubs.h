/* For the interposer's unit tests linked with the static interposer library
 * (unit_over_sim.h, unit_footprint.c): quota.c's exit check pulls in the
 * platform's interposition (its dlsym override and load-time constructor),
 * which call back into the shim's entry layer, not linked here: nothing to
 * hook, nothing to start. Included by one file per test program. */
#ifndef VS_UNIT_ENTRY_STUBS_H
#define VS_UNIT_ENTRY_STUBS_H

#include <stddef.h>

void *vs_shim_lookup(const char *name) { (void)name; return NULL; }
void *vs_shim_hook_for(const char *name) { (void)name; return NULL; }
void vs_shim_start(void) {}
void vs_shim_exit(void) {}

#endif

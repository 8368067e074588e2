/* The thread-local "inside the shim" guard.
 *
 * While a hook runs, every driver function it reaches that calls back into
 * an exported cu* symbol (a driver implementing one entry point with
 * another, as a simulated driver may) must pass straight through: counting
 * it again would count one program request twice. A hook that finds the
 * guard set forwards its arguments unchanged to the driver. */
#ifndef VS_GUARD_H
#define VS_GUARD_H

extern __thread int vs_guard_depth __attribute__((tls_model("initial-exec")));

static inline int vs_guard_active(void) { return vs_guard_depth != 0; }
static inline void vs_guard_enter(void) { vs_guard_depth++; }
static inline void vs_guard_leave(void) { vs_guard_depth--; }

#endif

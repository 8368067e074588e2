/* Start-up and fork. */
#ifndef VS_INIT_H
#define VS_INIT_H

#include <stdatomic.h>

/* Idempotent, thread-safe, cheap: logging and the fork handlers. Run by the
 * constructor and by the first hook, whichever comes first. It never loads
 * the driver (a process that makes no CUDA call never pays for it). */
void vs_init(void);

/* 1 once vs_init() has run. Every exported entry point (hooks.c) starts the
 * shim here before its hook body runs, so the layers below never call up
 * to start it: one relaxed load on the way in. */
extern _Atomic int vs_started;
static inline void vs_start(void) {
  if (__builtin_expect(!atomic_load_explicit(&vs_started, memory_order_relaxed), 0)) vs_init();
}

#endif

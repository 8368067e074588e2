/* Start-up and fork. */
#ifndef VS_INIT_H
#define VS_INIT_H

/* Idempotent, thread-safe, cheap: logging and the fork handlers. Run by the
 * constructor and by the first hook, whichever comes first. It never loads
 * the driver (a process that makes no CUDA call never pays for it). */
void vs_init(void);

#endif

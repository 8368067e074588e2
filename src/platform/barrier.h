/* An asymmetric memory barrier. A hot path that must order its store
 * before a later load against a rare other side (a reference published,
 * then a generation read) puts only a compiler barrier between them; the
 * rare side, after its own store, calls vs_plat_heavy_barrier, which
 * returns once every thread of the process has passed a full memory
 * barrier. Then either the rare side sees the hot path's store, or the hot
 * path's load sees the rare side's store (the Dekker pattern, with the cost
 * of the fence moved to the side that runs seldom).
 * POSIX: membarrier(2), private expedited (Linux 4.14 and later; a seccomp
 * profile may refuse it). Windows: FlushProcessWriteBuffers. */
#ifndef VS_PLAT_BARRIER_H
#define VS_PLAT_BARRIER_H

/* 1 when vs_plat_heavy_barrier works in this process: registers it where
 * the system asks for that. Call once per process, and again in a fork
 * child (the registration may not carry over). 0: the hot path must use a
 * real fence. */
int vs_plat_heavy_barrier_init(void);
/* Every thread of the process has passed a full memory barrier when this
 * returns. Only after vs_plat_heavy_barrier_init said 1. */
void vs_plat_heavy_barrier(void);
#endif

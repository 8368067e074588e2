/* A memory fence of the given __ATOMIC_ order, for the seqlocks (the
 * ledger's, the arena's and the shim's kept view answers). gcc refuses
 * __atomic_thread_fence under -fsanitize=thread (-Wtsan): a full barrier
 * there (stronger, and TSan does not model fences anyway). */
#ifndef VS_FENCE_H
#define VS_FENCE_H

#if defined(__SANITIZE_THREAD__)
#define VS_FENCE(order) __sync_synchronize()
#else
#define VS_FENCE(order) __atomic_thread_fence(order)
#endif

#endif

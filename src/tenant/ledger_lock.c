/* The ledger's bounded lock (ledger_lock.h). */
#include "ledger_lock.h"

#include "clock.h"
#include "ledger_shm.h"
#include "proc.h"
#include "wake.h"

#define SPINS 64                      /* looks at the word before the first sleep */
#define SLICE_NS 2000000ull           /* a sleeper looks at the word at least this often */
#define LIVENESS_AFTER_NS 1000000ull  /* a word held this long: is its holder alive? */
#define LIVENESS_EVERY_NS 10000000ull /* asked again this often */

#define OWNER_OF(w) ((w) >> VS_LOCK_NONCE_BITS)
#define NONCE_MASK ((1u << VS_LOCK_NONCE_BITS) - 1)

int vs_ledger_lock_owner_slot(uint32_t w) {
  uint32_t o = OWNER_OF(w);
  return o >= 1 && o <= VS_LEDGER_SLOTS ? (int)o - 1 : -1;
}

int vs_ledger_lock_word_valid(uint32_t w) {
  uint32_t o = OWNER_OF(w);
  return w == 0 || (o >= 1 && o <= VS_LEDGER_SLOTS) || o == VS_LOCK_NO_SLOT;
}

/* A new word for this process: its owner field and the next nonce (seeded
 * once by the pid, so two processes rarely start on the same values; not
 * per call: getpid is a system call). */
static uint32_t next_word(int slot) {
  static uint32_t counter;
  uint32_t n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
  if (n == 1) __atomic_store_n(&counter, n = (uint32_t)vs_plat_pid() * 2654435761u | 1u, __ATOMIC_RELAXED);
  uint32_t owner = slot >= 0 && slot < VS_LEDGER_SLOTS ? (uint32_t)slot + 1 : VS_LOCK_NO_SLOT;
  return owner << VS_LOCK_NONCE_BITS | (n & NONCE_MASK);
}

static int cas(uint32_t *w, uint32_t expected, uint32_t desired) {
  return __atomic_compare_exchange_n(w, &expected, desired, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* Why the holder of word w may be taken over at once: BAD (no holder can
 * write it), DEAD (its slot's byte lock is gone), else 0. Our own slot is
 * never dead (our byte lock does not conflict with us, so it would look
 * unheld): another thread of ours holds it, or the word lies (the lease). */
static int holder_gone(uint32_t w, int fd, int slot) {
  if (!vs_ledger_lock_word_valid(w)) return VS_LOCK_TAKEN_BAD;
  int k = vs_ledger_lock_owner_slot(w);
  if (k < 0 || k == slot || fd < 0) return 0;
  return vs_ledger_slot_alive(fd, k) ? 0 : VS_LOCK_TAKEN_DEAD;
}

int vs_ledger_lock_take(vs_ledger_lockw *l, int fd, int slot, const char *key, uint32_t *mine, uint32_t *owner) {
  uint32_t me = next_word(slot);
  *mine = me;
  *owner = 0;
  for (int i = 0; i < SPINS; i++) {
    uint32_t w = __atomic_load_n(&l->word, __ATOMIC_RELAXED);
    if (w == 0 && cas(&l->word, 0, me)) return VS_LOCK_TAKEN;
  }
  /* The word we wait on, since when (our own clock: the file's times could
   * be anything), and when its holder's liveness was last asked. */
  uint32_t seen = 0;
  uint64_t seen_since = 0, asked = 0;
  int sleeping = 0, r = VS_LOCK_TAKEN;
  for (;;) {
    uint32_t w = __atomic_load_n(&l->word, __ATOMIC_ACQUIRE);
    if (w == 0) {
      if (cas(&l->word, 0, me)) break;
      continue;
    }
    uint64_t now = vs_mono_ns();
    if (w != seen || !seen_since) {
      seen = w;
      seen_since = now;
      asked = 0;
    }
    /* A word no holder could write: at once. Whether the holder lives (a
     * system call) only once it held the word a while: a healthy holder
     * lets go within microseconds, and contention must not pay for it. */
    int why = vs_ledger_lock_word_valid(w) ? 0 : VS_LOCK_TAKEN_BAD;
    if (!why && now - seen_since >= LIVENESS_AFTER_NS && (!asked || now - asked >= LIVENESS_EVERY_NS)) {
      why = holder_gone(w, fd, slot);
      asked = now;
    }
    if (!why && now - seen_since >= VS_LOCK_LEASE_NS) why = VS_LOCK_TAKEN_STUCK;
    if (why) {
      if (cas(&l->word, w, me)) {
        *owner = w;
        r = why;
        break;
      }
      continue;   /* it moved meanwhile: look again */
    }
    if (!sleeping) {
      __atomic_add_fetch(&l->waiters, 1, __ATOMIC_SEQ_CST);
      sleeping = 1;
      continue;   /* counted before the word is read again: a release now wakes us */
    }
    uint64_t left = seen_since + VS_LOCK_LEASE_NS - now;
    vs_plat_wait(&l->word, w, left < SLICE_NS ? left : SLICE_NS, key, "lock");
  }
  if (sleeping) {
    /* Never below 0: the count may have been overwritten with less. */
    uint32_t c = __atomic_load_n(&l->waiters, __ATOMIC_RELAXED);
    while (c && !__atomic_compare_exchange_n(&l->waiters, &c, c - 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
  }
  return r;
}

int vs_ledger_lock_give(vs_ledger_lockw *l, uint32_t mine, const char *key) {
  uint32_t expected = mine;
  if (!__atomic_compare_exchange_n(&l->word, &expected, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return VS_LOCK_LOST;
  if (__atomic_load_n(&l->waiters, __ATOMIC_SEQ_CST)) vs_plat_wake(&l->word, key, "lock");
  return 0;
}

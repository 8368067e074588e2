/* The registry of live contexts (see contexts.h): a short doubly linked
 * list under a read-write lock. Requests take the read lock for one walk
 * and a reference; beginnings and ends take the write lock. */
#include "contexts.h"

#include "barrier.h"
#include "guard.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t g_primary_lock = PTHREAD_MUTEX_INITIALIZER;
static vs_ctx *g_head;
static _Atomic uint64_t g_next_id = 1;
/* A forked child's inheritance: the parent's list heads, one per generation
 * of fork (deeper ones are let go), reachable and never used. */
#define VS_FORK_ORPHANS 8
static vs_ctx *g_orphans[VS_FORK_ORPHANS];
static int g_norphans;

/* The fast path: each thread remembers the last record it used, valid
 * while no record has been unlinked since (g_gen counts unlinks). A hit
 * takes a reference and checks g_gen again: an unlink bumps g_gen before
 * it reads the references (both sequentially consistent), so either the
 * unlink sees this reference and waits for it, or this thread sees the new
 * g_gen and takes the slow path. */
static _Atomic uint64_t g_gen = 1;
static __thread struct {
  uint64_t gen;
  vs_ctx *c;
} t_last __attribute__((tls_model("initial-exec")));

/* The calling thread's reference stripe (vs_ctx.refs): handed out in turn
 * at a thread's first reference; 0 = none yet. */
static _Atomic unsigned g_next_stripe;
static __thread unsigned t_stripe __attribute__((tls_model("initial-exec")));

static _Atomic int *my_refs(vs_ctx *c) {
  if (__builtin_expect(!t_stripe, 0))
    t_stripe = 1 + atomic_fetch_add_explicit(&g_next_stripe, 1, memory_order_relaxed) % VS_CTX_REF_STRIPES;
  return &c->refs[t_stripe - 1].n;
}

static void ref(vs_ctx *c) { atomic_fetch_add(my_refs(c), 1); }
static void unref(vs_ctx *c) { atomic_fetch_sub(my_refs(c), 1); }

/* The fast path's hold, without a locked instruction: each thread has a
 * record of its own (hold), naming the one context it holds there and how
 * often (only its owner writes it). The thread publishes the context in
 * its record, then reads g_gen again with only a compiler barrier between;
 * an unlink bumps g_gen and then passes the heavy barrier (barrier.h)
 * before it reads the records, so as with the stripes either it sees the
 * hold or the thread sees the bump. A second context at once, or a system
 * without the heavy barrier, takes the stripes. Records are kept for the
 * process's life on one list, reused after their thread exits (the walk of
 * an end reads them all: one per thread that ever held at once). */
typedef struct hold {
  _Atomic(vs_ctx *) c;        /* NULL: nothing held here */
  unsigned n;                 /* owner only: holds of c */
  _Atomic int owned;          /* a live thread's */
  struct hold *next;          /* written before the record is on the list, then never */
} hold;
static _Atomic(hold *) g_holds;
static __thread hold *t_hold __attribute__((tls_model("initial-exec")));
static pthread_once_t g_hold_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_hold_key;
static _Atomic int g_hold_ok;   /* the heavy barrier works and the key exists (hold_init) */

/* Runs on the exiting thread. A thread that ends holding (a leak, as a
 * stripe's count left raised would be) keeps its record. The thread lets
 * go of its pointer too: a hook in a later destructor of the same thread
 * takes a record again (kept if no further round of destructors comes),
 * never one another thread may have taken meanwhile. */
static void hold_exit(void *p) {
  hold *h = p;
  if (t_hold == h) t_hold = NULL;
  if (!h->n) atomic_store_explicit(&h->owned, 0, memory_order_release);
}
static void hold_init(void) {
  atomic_store(&g_hold_ok, vs_plat_heavy_barrier_init() && pthread_key_create(&g_hold_key, hold_exit) == 0);
}
/* After it every read of g_hold_ok is ordered after hold_init's write. */
static int holds_on(void) {
  pthread_once(&g_hold_once, hold_init);
  return atomic_load(&g_hold_ok);
}

/* The calling thread's record (an exited thread's, else a new one), or NULL. */
static hold *my_hold(void) {
  if (__builtin_expect(t_hold != NULL, 1)) return t_hold;
  if (!holds_on()) return NULL;
  hold *h = atomic_load_explicit(&g_holds, memory_order_acquire);
  for (; h; h = h->next) {
    int free_one = 0;
    if (!atomic_load_explicit(&h->owned, memory_order_relaxed) &&
        atomic_compare_exchange_strong(&h->owned, &free_one, 1))
      break;
  }
  if (!h) {
    if (!(h = calloc(1, sizeof *h))) return NULL;
    atomic_store_explicit(&h->owned, 1, memory_order_relaxed);
    hold *head = atomic_load_explicit(&g_holds, memory_order_relaxed);
    do h->next = head;
    while (!atomic_compare_exchange_weak_explicit(&g_holds, &head, h, memory_order_release, memory_order_relaxed));
  }
  if (pthread_setspecific(g_hold_key, h) != 0) {
    atomic_store_explicit(&h->owned, 0, memory_order_release);
    return NULL;
  }
  return t_hold = h;
}

/* 1: c held in the thread's record (published before the caller reads
 * g_gen again); 0: the caller takes a stripe. */
static int hold_take(vs_ctx *c) {
  hold *h = my_hold();
  if (!h) return 0;
  if (h->n) {
    if (atomic_load_explicit(&h->c, memory_order_relaxed) != c) return 0;
    h->n++;
    return 1;
  }
  /* The count first: a signal handler's hold on this thread in between
   * finds the record busy and takes a stripe. */
  h->n = 1;
  atomic_signal_fence(memory_order_seq_cst);
  atomic_store_explicit(&h->c, c, memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);   /* the heavy barrier is the other half */
  return 1;
}

/* 1: one hold of c given back from the thread's record. Release: what the
 * thread did under the hold is seen by the end that reads NULL. */
static int hold_drop(vs_ctx *c) {
  hold *h = t_hold;
  if (!h || !h->n || atomic_load_explicit(&h->c, memory_order_relaxed) != c) return 0;
  if (--h->n == 0) atomic_store_explicit(&h->c, NULL, memory_order_release);
  return 1;
}

static int held_by_threads(vs_ctx *c) {
  for (hold *h = atomic_load_explicit(&g_holds, memory_order_acquire); h; h = h->next)
    if (atomic_load_explicit(&h->c, memory_order_acquire) == c) return 1;
  return 0;
}

/* Every stripe: a thread's hold is on its own stripe, taken before it reads
 * g_gen again (cached()), so a hold this sum misses is one whose thread sees
 * the unlink and lets go. */
static int refs_held(vs_ctx *c) {
  int n = 0;
  for (int s = 0; s < VS_CTX_REF_STRIPES; s++) n += atomic_load(&c->refs[s].n);
  return n;
}

static vs_ctx *cached(uint64_t handle, uint64_t id) {
  uint64_t gen = atomic_load(&g_gen);
  vs_ctx *c = t_last.c;
  if (!c || t_last.gen != gen || (handle ? c->handle != handle : c->id != id)) return NULL;
  if (hold_take(c)) {
    if (atomic_load_explicit(&g_gen, memory_order_relaxed) == gen) return c;
    hold_drop(c);
    return NULL;
  }
  ref(c);
  if (atomic_load(&g_gen) == gen) return c;
  unref(c);
  return NULL;
}

/* c referenced: remember it (gen read before the walk that found it). */
static void remember(vs_ctx *c, uint64_t gen) {
  t_last.c = c;
  t_last.gen = gen;
}

/* Under the lock (either). */
static vs_ctx *find(uint64_t handle) {
  for (vs_ctx *c = g_head; c; c = c->next)
    if (c->handle == handle) return c;
  return NULL;
}

uint64_t vs_ctx_unlinks(void) { return atomic_load_explicit(&g_gen, memory_order_acquire); }

/* Under the write lock. */
static void link(vs_ctx *c) {
  c->prev = NULL;
  c->next = g_head;
  if (g_head) g_head->prev = c;
  g_head = c;
}

static void unlink_locked(vs_ctx *c) {
  atomic_fetch_add(&g_gen, 1);   /* before wait_refs reads the references: see cached() */
  if (c->prev) c->prev->next = c->next;
  else g_head = c->next;
  if (c->next) c->next->prev = c->prev;
  c->next = c->prev = NULL;
}

static vs_ctx *fresh(uint64_t handle, int card) {
  vs_ctx *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->handle = handle;
  c->card = card;
  c->id = atomic_fetch_add(&g_next_id, 1);
  return c;
}

/* Once unlinked nobody can take a new reference; the ones held are for
 * requests in flight (one driver call each, or a wait under on_limit). */
static void wait_refs(vs_ctx *c) {
  struct timespec ts = {0, 100000};
  int holds = holds_on();
  if (holds) vs_plat_heavy_barrier();   /* after unlink's bump of g_gen: see hold */
  while (refs_held(c) > 0 || (holds && held_by_threads(c))) nanosleep(&ts, NULL);
}

/* The calling thread's current context, asked of the driver; NULL when
 * there is none (or the driver cannot say). */
static CUcontext current_handle(const vs_real_table *real) {
  if (!real || !real->cuCtxGetCurrent) return NULL;
  CUcontext h = NULL;
  vs_guard_enter();
  CUresult r = real->cuCtxGetCurrent(&h);
  vs_guard_leave();
  return r == CUDA_SUCCESS ? h : NULL;
}

int vs_ctx_is_current(const vs_real_table *real, const vs_ctx *c) {
  CUcontext h = c ? current_handle(real) : NULL;
  return h && (uint64_t)(uintptr_t)h == c->handle;
}

vs_ctx *vs_ctx_acquire_current(const vs_real_table *real) {
  CUcontext h = current_handle(real);
  if (!h) return NULL;
  vs_ctx *c = cached((uint64_t)(uintptr_t)h, 0);
  if (c) return c;
  pthread_rwlock_rdlock(&g_lock);
  uint64_t gen = atomic_load(&g_gen);   /* unlinks bump it under the write lock */
  c = find((uint64_t)(uintptr_t)h);
  if (c) {
    ref(c);
    remember(c, gen);
  }
  pthread_rwlock_unlock(&g_lock);
  if (c) return c;
  /* A context the shim never saw begin (made before the shim was loaded,
   * or by a path it does not hook): followed from here on. */
  int card = vs_driver_current_card(real);
  if (card < 0) return NULL;
  pthread_rwlock_wrlock(&g_lock);
  c = find((uint64_t)(uintptr_t)h);
  if (!c && (c = fresh((uint64_t)(uintptr_t)h, card)) != NULL) {
    c->usage = 1;
    link(c);
  }
  if (c) ref(c);
  pthread_rwlock_unlock(&g_lock);
  return c;
}

vs_ctx *vs_ctx_acquire_id(uint64_t id) {
  vs_ctx *c = id ? cached(0, id) : NULL;
  if (c || !id) return c;
  pthread_rwlock_rdlock(&g_lock);
  uint64_t gen = atomic_load(&g_gen);
  c = g_head;
  while (c && c->id != id) c = c->next;
  if (c) {
    ref(c);
    remember(c, gen);
  }
  pthread_rwlock_unlock(&g_lock);
  return c;
}

vs_ctx *vs_ctx_acquire_handle(uint64_t handle) {
  if (!handle) return NULL;
  pthread_rwlock_rdlock(&g_lock);
  vs_ctx *c = find(handle);
  if (c) ref(c);
  pthread_rwlock_unlock(&g_lock);
  return c;
}

void vs_ctx_put(vs_ctx *c) {
  if (c && !hold_drop(c)) unref(c);
}

void vs_ctx_created(uint64_t handle, int card, vs_ctx **stale) {
  *stale = NULL;
  pthread_rwlock_wrlock(&g_lock);
  vs_ctx *old = find(handle);
  if (old) {
    unlink_locked(old);   /* the driver reused the handle of a context whose end went unseen */
    *stale = old;
  }
  vs_ctx *c = fresh(handle, card);
  if (c) {
    c->usage = 1;
    link(c);
  }
  pthread_rwlock_unlock(&g_lock);
  if (*stale) wait_refs(*stale);
}

void vs_ctx_primary_retained(uint64_t handle, int dev, vs_ctx **stale) {
  *stale = NULL;
  pthread_rwlock_wrlock(&g_lock);
  vs_ctx *c = find(handle);
  if (c && c->card != dev) {
    unlink_locked(c);
    *stale = c;
    c = NULL;
  }
  if (!c) {
    /* A primary record of dev under another handle ended unseen. */
    for (vs_ctx *o = g_head; o && !*stale; o = o->next)
      if (o->primary && o->card == dev) {
        unlink_locked(o);
        *stale = o;
      }
    c = fresh(handle, dev);
    if (c) link(c);
  }
  if (c) {
    c->primary = 1;   /* also a record made on first use before the retain was seen */
    c->retains++;
  }
  pthread_rwlock_unlock(&g_lock);
  if (*stale) wait_refs(*stale);
}

int vs_ctx_is_regular(uint64_t handle) {
  pthread_rwlock_rdlock(&g_lock);
  vs_ctx *c = find(handle);
  int regular = c && !c->primary;
  pthread_rwlock_unlock(&g_lock);
  return regular;
}

void vs_ctx_attached(uint64_t handle) {
  pthread_rwlock_wrlock(&g_lock);
  vs_ctx *c = find(handle);
  if (c) c->usage++;
  pthread_rwlock_unlock(&g_lock);
}

int vs_ctx_detached(uint64_t handle) {
  pthread_rwlock_wrlock(&g_lock);
  vs_ctx *c = find(handle);
  int ends = c && --c->usage <= 0;
  pthread_rwlock_unlock(&g_lock);
  return ends;
}

void vs_ctx_primary_lock(void) { pthread_mutex_lock(&g_primary_lock); }
void vs_ctx_primary_unlock(void) { pthread_mutex_unlock(&g_primary_lock); }

int vs_ctx_primary_released(int dev) {
  int left = 0;
  pthread_rwlock_wrlock(&g_lock);
  for (vs_ctx *c = g_head; c; c = c->next)
    if (c->primary && c->card == dev) {
      if (c->retains > 0) c->retains--;
      left = c->retains;
      break;
    }
  pthread_rwlock_unlock(&g_lock);
  return left;
}

/* Under the lock (either): the live record of handle, or of primary_dev's
 * primary context when primary_dev >= 0. */
static vs_ctx *find_either(uint64_t handle, int primary_dev) {
  if (primary_dev < 0) return find(handle);
  vs_ctx *c = g_head;
  while (c && !(c->primary && c->card == primary_dev)) c = c->next;
  return c;
}

/* Dekker's handshake, both sides sequentially consistent: a walker raises
 * walkers and then reads quiet; vs_ctx_quiet sets quiet and then reads
 * walkers. Either the walker sees quiet and leaves, or vs_ctx_quiet sees
 * it and waits for it to leave. */
int vs_ctx_walk_enter(vs_ctx *c) {
  atomic_fetch_add(&c->walkers, 1);
  if (!atomic_load(&c->quiet)) return 1;
  atomic_fetch_sub(&c->walkers, 1);
  return 0;
}

void vs_ctx_walk_leave(vs_ctx *c) { atomic_fetch_sub(&c->walkers, 1); }

vs_ctx *vs_ctx_quiet(uint64_t handle, int primary_dev) {
  pthread_rwlock_rdlock(&g_lock);
  vs_ctx *c = find_either(handle, primary_dev);
  if (c) atomic_fetch_add(&c->quiet, 1);
  pthread_rwlock_unlock(&g_lock);
  /* A walk inside may be in a trim's driver call: a short wait. */
  struct timespec ts = {0, 100000};
  while (c && atomic_load(&c->walkers) > 0) nanosleep(&ts, NULL);
  return c;
}

void vs_ctx_unquiet(vs_ctx *c) {
  if (c) atomic_fetch_sub(&c->quiet, 1);
}

vs_ctx *vs_ctx_unlink(uint64_t handle, int primary_dev) {
  pthread_rwlock_wrlock(&g_lock);
  vs_ctx *c = find_either(handle, primary_dev);
  if (c) unlink_locked(c);
  pthread_rwlock_unlock(&g_lock);
  if (c) wait_refs(c);
  return c;
}

/* Records are never given back to malloc: a thread's remembered record
 * (t_last) may be read, and its reference count touched, by a thread that
 * has not yet seen g_gen move. An ended context costs its record (a few
 * hundred bytes; contexts are few and slow to make), kept reachable here. */
static vs_ctx *g_ended;
static pthread_mutex_t g_ended_lock = PTHREAD_MUTEX_INITIALIZER;

void vs_ctx_free(vs_ctx *c) {
  if (!c) return;
  pthread_mutex_lock(&g_ended_lock);
  c->prev = NULL;
  c->next = g_ended;
  g_ended = c;
  pthread_mutex_unlock(&g_ended_lock);
}

void vs_ctx_read_lock(void) { pthread_rwlock_rdlock(&g_lock); }
void vs_ctx_read_unlock(void) { pthread_rwlock_unlock(&g_lock); }
vs_ctx *vs_ctx_next(vs_ctx *c) { return c ? c->next : g_head; }

/* No fork handler takes the registry's lock: the driver's own prepare
 * handlers run before the shim's (registered later, at cuInit) and hold the
 * driver's locks, which a thread inside the arena takes while another holds
 * the registry's read lock (the observer's walk): taking it in prepare
 * would close a cycle. The child never reads the parent's list, so it needs
 * no consistent copy of it. */
void vs_ctx_atfork_child(void) {
  /* Fresh locks; the parent's records (and their arenas) are never touched
   * again, not even walked (another thread may have been changing the list
   * at the fork): the head is kept as it was. */
  if (g_head && g_norphans < VS_FORK_ORPHANS) g_orphans[g_norphans++] = g_head;
  g_head = NULL;
  t_last.c = NULL;   /* the forking thread's; no other thread is here */
  /* The heavy barrier's registration may not carry over: without it the
   * child's threads take stripes (the forking thread's record is let go). */
  if (atomic_load(&g_hold_ok) && !vs_plat_heavy_barrier_init()) {
    atomic_store(&g_hold_ok, 0);
    t_hold = NULL;
  }
  atomic_fetch_add(&g_gen, 1);
  pthread_rwlock_t fresh_lock = PTHREAD_RWLOCK_INITIALIZER;
  memcpy(&g_lock, &fresh_lock, sizeof g_lock);
  pthread_mutex_init(&g_primary_lock, NULL);
  pthread_mutex_init(&g_ended_lock, NULL);
}

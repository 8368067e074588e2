/* The ledger within one process (several handles = several slots): the
 * admission rule with its numbers, the view formula per tenant, events,
 * snapshots, file safety, and fork. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "ledger.h"
#include "ledger_read.h"
#include "ledger_shm.h"
#include "plan.h"
#include "tenant_test.h"

/* The fixture's folders (tt_ledger_setup, tenant_test.h). */
static char *const g_tmp = tt_tmp, *const g_dir = tt_ledger_dir;

/* C = 1000, H = 50; a: R 400 L 600 warn 90%; b: R 150 L 250; c: R 100, no limit. */
static const char conf[] =
    "[card 0]\nheadroom = 50\n"
    "[tenant a]\nreserve = 400\nlimit = 600\nwarn_at = 90%\n"
    "[tenant b]\nreserve = 150\nlimit = 250\non_limit = wait:1s\n"
    "[tenant c]\nreserve = 100\n";

static vs_ledger *open_as(const vs_plan *plan, const char *tenant) {
  char err[VS_ERR_MAX];
  vs_ledger *h = vs_ledger_open(g_dir, "0", plan, tenant, err, sizeof err);
  if (!h) fail_msg("%s", err);
  return h;
}

static void rule_and_numbers(void **state) {
  (void)state;
  vs_plan plan;
  tt_make_plan(&plan, conf, 1000);
  vs_ledger *a = open_as(&plan, "a"), *b = open_as(&plan, "b"), *c = open_as(&plan, "c"), *d = open_as(&plan, "d");
  vs_refusal why;
  /* b up to its limit; one byte more is refused by the limit. */
  assert_int_equal(vs_ledger_charge(b, 250, &why), 0);
  assert_int_equal(vs_ledger_charge(b, 1, &why), 1);
  assert_int_equal(why.kind, VS_REFUSE_LIMIT);
  assert_int_equal(why.request, 1);
  assert_int_equal(why.used, 250);
  assert_int_equal(why.limit, 250);
  /* d (no section) may use what nobody reserved: 1000 - 50 - 400 - 250 - 100 = 200. */
  assert_int_equal(vs_ledger_charge(d, 201, &why), 1);
  assert_int_equal(why.kind, VS_REFUSE_CAPACITY);
  assert_int_equal(why.others, 400 + 250 + 100);
  assert_int_equal(why.headroom, 50);
  assert_int_equal(why.capacity, 1000);
  assert_int_equal(why.limit, VS_NO_LIMIT);
  assert_int_equal(vs_ledger_charge(d, 200, &why), 0);
  /* a's reservation stays a's: a gets its 400, c its 100, d nothing more. */
  assert_int_equal(vs_ledger_charge(d, 1, &why), 1);
  assert_int_equal(vs_ledger_charge(a, 400, &why), 0);
  assert_int_equal(vs_ledger_charge(c, 100, &why), 0);
  assert_int_equal(vs_ledger_charge(a, 1, &why), 1); /* the card is full: 50+400+250+100+200 */
  assert_int_equal(why.kind, VS_REFUSE_CAPACITY);
  /* d frees: a may grow beyond its reserve, up to the free bytes. */
  vs_ledger_uncharge(d, 150);
  assert_int_equal(vs_ledger_held(d), 50);
  assert_int_equal(vs_ledger_charge(a, 150, &why), 0);
  assert_int_equal(vs_ledger_charge(a, 1, &why), 1);
  /* Uncharging more than held is clamped. */
  vs_ledger_uncharge(d, 1000);
  assert_int_equal(vs_ledger_held(d), 0);
  assert_int_equal(vs_ledger_charge(a, 50, &why), 0);
  assert_int_equal(vs_ledger_held(a), 600);
  assert_int_equal(vs_ledger_charge(a, 1, &why), 1);
  assert_int_equal(why.kind, VS_REFUSE_LIMIT);
  /* Overflowing requests are refused, not wrapped. */
  assert_int_equal(vs_ledger_charge(d, UINT64_MAX, &why), 1);
  vs_ledger_close(a);
  vs_ledger_close(b);
  vs_ledger_close(c);
  vs_ledger_close(d);
}

/* free/total per tenant against the formula, computed here independently. */
static void view_formula(void **state) {
  (void)state;
  vs_plan plan;
  tt_make_plan(&plan, conf, 1000);
  const char *names[] = {"a", "b", "c", "d"};
  vs_ledger *h[4];
  for (int i = 0; i < 4; i++) h[i] = open_as(&plan, names[i]);
  uint64_t R[4] = {400, 150, 100, 0}, L[4] = {600, 250, UINT64_MAX, UINT64_MAX}, U[4] = {0};
  uint64_t steps[][4] = {{0, 0, 0, 0}, {100, 0, 0, 0}, {450, 200, 0, 0}, {450, 200, 120, 30}, {600, 250, 100, 0}};
  for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
    for (int i = 0; i < 4; i++) /* releases first, then growth */
      if (steps[s][i] < U[i]) vs_ledger_uncharge(h[i], U[i] - steps[s][i]), U[i] = steps[s][i];
    for (int i = 0; i < 4; i++)
      if (steps[s][i] > U[i]) {
        assert_int_equal(vs_ledger_charge(h[i], steps[s][i] - U[i], NULL), 0);
        U[i] = steps[s][i];
      }
    for (int a = 0; a < 4; a++) {
      uint64_t sumR = 0, sumMax = 0;
      for (int t = 0; t < 4; t++)
        if (t != a) sumR += R[t], sumMax += U[t] > R[t] ? U[t] : R[t];
      uint64_t total = 1000 - 50 - sumR;
      if (L[a] < total) total = L[a];
      uint64_t by_limit = L[a] == UINT64_MAX ? UINT64_MAX : L[a] - U[a];
      uint64_t by_card = 1000 - 50 - U[a] - sumMax;
      uint64_t avail = by_limit < by_card ? by_limit : by_card;
      uint64_t f, t;
      vs_ledger_view(h[a], 0, &f, &t);
      assert_int_equal(t, total);
      assert_int_equal(f, avail);
      /* The process's cached memory counts as free, never above total. */
      vs_ledger_view(h[a], 7, &f, &t);
      assert_int_equal(f, avail + 7 < total ? avail + 7 : total);
      /* free is exactly what a charge admits now. */
      if (avail > 0) {
        assert_int_equal(vs_ledger_charge(h[a], avail, NULL), 0);
        vs_ledger_uncharge(h[a], avail);
      }
      assert_int_equal(vs_ledger_charge(h[a], avail + 1, NULL), 1);
    }
  }
  for (int i = 0; i < 4; i++) vs_ledger_close(h[i]);
}

/* The file at g_dir/card-0.ledger, mapped (the test's own view of it). */
static vs_ledger_shm *map_ledger(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/card-0.ledger", g_dir);
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  void *m = mmap(NULL, sizeof(vs_ledger_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  assert_true(m != MAP_FAILED);
  return m;
}

/* The view's kept answer (ledger.c, view_kept) is not read back across a
 * re-attach, even where the new file's seq is the number the old one had
 * when the answer was kept (a new file goes through its own write
 * sections): the answer names its mapping (epoch). */
static void view_kept_across_reattach(void **state) {
  (void)state;
  vs_plan plan;
  tt_make_plan(&plan, conf, 1000);
  vs_ledger *a = open_as(&plan, "a"), *b = open_as(&plan, "b");
  assert_int_equal(vs_ledger_charge(a, 100, NULL), 0);
  assert_int_equal(vs_ledger_charge(b, 200, NULL), 0);
  uint64_t before, f, t;
  vs_ledger_view(a, 0, &before, &t);   /* kept */
  vs_ledger_shm *old = map_ledger();
  uint32_t seq = old->seq;
  assert_int_equal(seq & 1, 0);
  old->damaged = 1;                     /* every process moves to a new file */
  assert_int_equal(vs_ledger_charge(a, 1, NULL), 0);
  assert_int_equal(vs_ledger_charge(b, 1, NULL), 0);
  assert_int_equal(vs_ledger_charge(a, 1, NULL), 0);   /* after b's re-attach, in the new file */
  munmap(old, sizeof *old);
  vs_ledger_shm *now = map_ledger();
  assert_int_equal(now->damaged, 0);
  now->seq = seq;                       /* as if its writes had come to the same count */
  vs_ledger_view(a, 0, &f, &t);
  assert_int_not_equal(f, before);      /* a holds 2 more, b 1 more */
  now->seq = seq + 2;                   /* a write section: the view is read afresh */
  uint64_t fresh;
  vs_ledger_view(a, 0, &fresh, &t);
  assert_int_equal(f, fresh);
  munmap(now, sizeof *now);
  vs_ledger_close(a);
  vs_ledger_close(b);
}

static void events_and_snapshot(void **state) {
  (void)state;
  vs_plan plan;
  tt_make_plan(&plan, conf, 1000);
  vs_ledger *a = open_as(&plan, "a"), *b = open_as(&plan, "b");
  /* warn_at 90% of a's total min(600, 1000-50-150-100=700) = 540. */
  assert_int_equal(vs_ledger_charge(a, 500, NULL), 0);
  assert_int_equal(vs_ledger_charge(a, 39, NULL), 0);
  vs_refusal why;
  assert_int_equal(vs_ledger_charge(a, 1, &why), 0); /* crosses: one event */
  assert_true(why.warned);
  vs_ledger_uncharge(a, 100);
  assert_int_equal(vs_ledger_charge(a, 100, &why), 0); /* crosses again within 10 s: rate-limited */
  assert_false(why.warned);
  assert_int_equal(vs_ledger_charge(a, 100, &why), 1);
  vs_ledger_report_refusal(a, &why);
  vs_ledger_set_live(a, 321);
  assert_int_equal(vs_ledger_charge(b, 10, NULL), 0);

  vs_ledger_snapshot *snap = malloc(sizeof *snap);
  char err[VS_ERR_MAX];
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_true(snap->consistent);
  assert_int_equal(snap->capacity, 1000);
  assert_int_equal(snap->headroom, 50);
  assert_int_equal(snap->generation, plan.generation);
  assert_int_equal(snap->generations, 1);
  assert_int_equal(snap->nprocs, 2);
  assert_int_equal(snap->procs[0].pid, getpid());
  assert_true(snap->procs[0].alive);
  assert_int_equal(snap->procs[0].held, 540);
  assert_int_equal(snap->procs[0].live, 321);
  assert_string_equal(snap->procs[0].tenant, "a");
  assert_int_equal(snap->ntenants, 3);
  assert_string_equal(snap->tenants[0].name, "a");
  assert_int_equal(snap->tenants[0].used, 540);
  assert_int_equal(snap->tenants[0].recorded, 540);
  assert_int_equal(snap->tenants[0].reserve, 400);
  assert_int_equal(snap->tenants[0].limit, 600);
  assert_int_equal(snap->tenants[2].limit, VS_NO_LIMIT);
  assert_int_equal(snap->nevents, 2);
  assert_string_equal(snap->events[0].kind, "warn");
  assert_int_equal(snap->events[0].bytes, 540);
  assert_string_equal(snap->events[1].kind, "limit");
  assert_int_equal(snap->events[1].bytes, 100);
  assert_string_equal(snap->events[1].tenant, "a");
  /* Bytes over an event's kind make no event of a kind no reader knows
   * (status --json would print a kind its schema does not name). */
  char name[VS_NAME_MAX + 16], path[4096];
  assert_int_equal(vs_ledger_file_name("0", name, sizeof name), 0);
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  int fd = open(path, O_WRONLY);
  uint16_t bad = 0x5a5a;
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, &bad, sizeof bad, offsetof(vs_ledger_shm, events[0].kind)), sizeof bad);
  close(fd);
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->nevents, 1);
  assert_string_equal(snap->events[0].kind, "limit");

  char ids[4][VS_NAME_MAX];
  assert_int_equal(vs_ledger_list(g_dir, ids, 4, err, sizeof err), 1);
  assert_string_equal(ids[0], "0");

  /* A process with another config generation shows as a mismatch. */
  vs_plan plan2;
  tt_make_plan(&plan2, "[tenant a]\nlimit = 700\n", 1000);
  vs_ledger *a2 = open_as(&plan2, "a");
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->generations, 2);
  vs_ledger_close(a2);
  vs_ledger_close(a);
  vs_ledger_close(b);
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->nprocs, 0);
  assert_int_equal(snap->tenants[0].recorded, 0);
  free(snap);
}

/* on_limit = spill:MAX (issue 13): spilled bytes are counted per slot and
 * tenant, apart from device usage, MAX holds across the tenant's slots, an
 * episode starts when a slot goes from nothing spilled to something, and a
 * slot's spilled bytes leave with it. */
/* issue 24: a process's overhead (its footprint beyond what the shim
 * counted) is part of what it holds: the rule sees it, it is charged even
 * past the limit (the driver already took it), it shrinks back, status
 * shows it apart, and it leaves with the process. */
static void overhead_accounting(void **state) {
  (void)state;
  vs_plan plan;
  tt_make_plan(&plan, "[tenant a]\nlimit = 300\n[tenant b]\nlimit = 700\n", 1000);
  vs_ledger *a1 = open_as(&plan, "a"), *a2 = open_as(&plan, "a"), *b = open_as(&plan, "b");
  assert_int_equal(vs_ledger_charge(a1, 100, NULL), 0);
  vs_ledger_set_overhead(a1, 150);
  assert_int_equal(vs_ledger_held(a1), 250);
  assert_int_equal(vs_ledger_overhead(a1), 150);
  vs_refusal why;
  assert_int_equal(vs_ledger_charge(a2, 60, &why), 1);   /* 250 + 60 > 300: the overhead counts */
  assert_int_equal(why.kind, VS_REFUSE_LIMIT);
  assert_int_equal(why.used, 250);
  vs_ledger_set_overhead(a2, 100);                       /* past the limit: the driver took it already */
  assert_int_equal(vs_ledger_held(a2), 100);
  uint64_t f = 1, t = 0;
  vs_ledger_view(a1, 0, &f, &t);
  assert_int_equal(t, 300);
  assert_int_equal(f, 0);                                /* 350 used of 300: free 0, never a wrap-around */
  assert_int_equal(vs_ledger_charge(b, 700, NULL), 1);   /* 350 + 700 > 1000: others see it too */
  vs_ledger_set_overhead(a1, 50);                        /* it shrank: the difference comes back */
  assert_int_equal(vs_ledger_held(a1), 150);
  vs_ledger_uncharge(a1, 100);
  assert_int_equal(vs_ledger_held(a1), 50);
  assert_int_equal(vs_ledger_overhead(a1), 50);

  vs_ledger_snapshot *snap = malloc(sizeof *snap);
  char err[VS_ERR_MAX];
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_string_equal(snap->tenants[0].name, "a");
  assert_int_equal(snap->tenants[0].used, 150);
  assert_int_equal(snap->tenants[0].overhead, 150);
  int seen = 0;
  for (int i = 0; i < snap->nprocs; i++)
    if (snap->procs[i].held == 100) seen += snap->procs[i].overhead == 100;
  assert_int_equal(seen, 1);
  vs_ledger_close(a2);                                   /* its overhead goes with it */
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->tenants[0].used, 50);
  assert_int_equal(snap->tenants[0].overhead, 50);
  assert_int_equal(vs_ledger_charge(b, 700, NULL), 0);   /* 50 + 700 <= 1000 */
  free(snap);
  vs_ledger_close(a1);
  vs_ledger_close(b);
}

/* Published caches: what each process's arenas would give back when
 * asked. Others' views count them as free, admission does not; a trim ask
 * reaches whom the refusal's scope names, and a cache whose process leaves
 * it unanswered leaves the views; a give-back lowers the cache at once; a
 * closed slot's cache leaves with it. */
static void cache_accounting(void **state) {
  (void)state;
  vs_plan plan;
  tt_make_plan(&plan, "[tenant a]\nreserve = 100\n[tenant b]\nreserve = 200\n[tenant d]\nreserve = 300\n", 1000);
  vs_ledger *a1 = open_as(&plan, "a"), *a2 = open_as(&plan, "a"), *b = open_as(&plan, "b"), *d = open_as(&plan, "d");
  assert_int_equal(vs_ledger_charge(b, 400, NULL), 0);
  uint64_t f = 0, t = 0;
  vs_ledger_view(a1, 0, &f, &t);
  assert_int_equal(f, 1000 - 400 - 300);                 /* b: max(400, 200); d: its reserve */
  vs_ledger_set_cache(b, 900);                           /* never more than it holds */
  assert_int_equal(vs_ledger_others_cache(a1), 400);
  vs_ledger_set_cache(b, 300);
  vs_ledger_view(a1, 0, &f, &t);
  assert_int_equal(f, 1000 - 200 - 300);                 /* b: max(400 - 300, 200) */
  vs_refusal why;
  assert_int_equal(vs_ledger_charge(a1, 450, &why), 1);  /* admission counts what b holds */
  assert_int_equal(why.kind, VS_REFUSE_CAPACITY);
  /* d holds less than its reserve: its cache cannot help a capacity refusal. */
  assert_int_equal(vs_ledger_charge(d, 100, NULL), 0);
  vs_ledger_set_cache(d, 100);
  uint32_t req;
  assert_int_equal(vs_ledger_trim_others(a1, VS_TRIM_TENANT, 0), 0);   /* no other process of a holds memory */
  assert_int_equal(vs_ledger_trim_others(a1, VS_TRIM_CAPACITY, 0), 1);
  assert_int_equal(vs_ledger_trim_asked(b, &req), 1);
  assert_int_equal(vs_ledger_trim_asked(d, &req), 0);
  /* b did not answer in time (0 ms): its cache leaves the views until it publishes again. */
  assert_int_equal(vs_ledger_others_cache(a1), 100);
  assert_int_equal(vs_ledger_trim_others(a1, VS_TRIM_CARD, 0), 2);     /* the driver refused: every cache */
  assert_int_equal(vs_ledger_trim_asked(d, &req), 1);
  assert_int_equal(vs_ledger_others_cache(a1), 0);
  vs_ledger_trim_answer(d, req);
  assert_int_equal(vs_ledger_trim_asked(d, &req), 0);
  vs_ledger_set_cache(b, 300);                           /* their threads publish again */
  vs_ledger_set_cache(d, 100);
  assert_int_equal(vs_ledger_others_cache(a1), 300 + 100);
  /* b gives 250 back: its cache falls by as much at once. */
  vs_ledger_uncharge(b, 250);
  assert_int_equal(vs_ledger_others_cache(a1), 50 + 100);
  /* Our tenant's other process: its cache is ours to count as free too. */
  assert_int_equal(vs_ledger_charge(a2, 80, NULL), 0);
  vs_ledger_set_cache(a2, 50);
  assert_int_equal(vs_ledger_others_cache(a1), 50 + 100 + 50);
  assert_int_equal(vs_ledger_others_cache(a2), 50 + 100);
  vs_ledger_view(a1, 0, &f, &t);
  assert_int_equal(f, 1000 - (80 - 50) - 200 - 300);
  vs_ledger_close(b);                                    /* its cache leaves with it */
  assert_int_equal(vs_ledger_others_cache(a1), 100 + 50);
  vs_ledger_close(a2);
  vs_ledger_close(d);
  assert_int_equal(vs_ledger_others_cache(a1), 0);
  vs_ledger_close(a1);
}

static void spill_accounting(void **state) {
  (void)state;
  vs_plan plan;
  tt_make_plan(&plan, "[tenant s]\nlimit = 300\non_limit = spill:500\n[tenant f]\nlimit = 100\n", 1000);
  vs_ledger *s1 = open_as(&plan, "s"), *s2 = open_as(&plan, "s"), *f = open_as(&plan, "f");
  assert_int_equal(vs_ledger_spill_max(s1), 500);
  assert_int_equal(vs_ledger_spill_max(f), 0);
  vs_spill_note n;
  assert_int_equal(vs_ledger_spill(f, 10, &n), 1);   /* on_limit is not spill */
  assert_int_equal(vs_ledger_charge(s1, 300, NULL), 0);
  assert_int_equal(vs_ledger_spill(s1, 200, &n), 0);
  assert_true(n.episode);
  assert_int_equal(n.spilled, 200);
  assert_int_equal(n.used, 300);
  assert_int_equal(vs_ledger_spill(s1, 100, &n), 0);
  assert_false(n.episode);                            /* the same episode */
  assert_int_equal(vs_ledger_spill(s2, 250, &n), 1);  /* 300 + 250 > 500, across slots */
  assert_int_equal(n.spilled, 300);
  assert_int_equal(vs_ledger_spill(s2, 200, &n), 0);
  assert_true(n.episode);                             /* s2's own episode */
  assert_int_equal(vs_ledger_spilled(s1), 300);
  assert_int_equal(vs_ledger_spilled(s2), 200);
  /* Spilled bytes never count against the card: f and s still get device memory. */
  assert_int_equal(vs_ledger_charge(f, 100, NULL), 0);
  vs_ledger_unspill(s1, 300);
  assert_int_equal(vs_ledger_spilled(s1), 0);
  assert_int_equal(vs_ledger_spill(s1, 300, &n), 0);
  assert_true(n.episode);                             /* a new episode */
  assert_int_equal(vs_ledger_spill(s1, 1, &n), 1);    /* exactly at MAX */

  vs_ledger_snapshot *snap = malloc(sizeof *snap);
  char err[VS_ERR_MAX];
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  const vs_snap_tenant *t = &snap->tenants[0];
  assert_string_equal(t->name, "s");
  assert_int_equal(t->spilled, 500);
  assert_int_equal(t->spill_peak, 500);
  assert_int_equal(t->spill_max, 500);
  assert_int_equal(t->used, 300);
  int spills = 0;
  for (int e = 0; e < snap->nevents; e++)
    if (!strcmp(snap->events[e].kind, "spill")) spills++;
  assert_int_equal(spills, 3);
  vs_ledger_close(s2);                                /* its 200 go with it */
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->tenants[0].spilled, 300);
  assert_int_equal(vs_ledger_spill(s1, 200, &n), 0);
  free(snap);
  vs_ledger_close(s1);
  vs_ledger_close(f);
}

static void file_safety(void **state) {
  (void)state;
  vs_plan plan;
  tt_make_plan(&plan, conf, 1000);
  vs_ledger *a = open_as(&plan, "a");
  struct stat st;
  assert_int_equal(stat(g_dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  char path[512];
  snprintf(path, sizeof path, "%s/card-0.ledger", g_dir);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0007, 0);
  vs_ledger_close(a);

  char err[VS_ERR_MAX];
  /* A symlink in place of the ledger file is refused. */
  snprintf(path, sizeof path, "%s/card-1.ledger", g_dir);
  assert_int_equal(symlink("/etc/passwd", path), 0);
  assert_null(vs_ledger_open(g_dir, "1", &plan, "a", err, sizeof err));
  assert_non_null(strstr(err, "cannot open it"));
  /* A world-writable ledger dir is refused. */
  char ww[400];
  snprintf(ww, sizeof ww, "%s/ww", g_tmp);
  assert_int_equal(mkdir(ww, 0700), 0);
  assert_int_equal(chmod(ww, 0777), 0);
  assert_null(vs_ledger_open(ww, "0", &plan, "a", err, sizeof err));
  assert_non_null(strstr(err, "world-writable"));
  /* A UUID names its own file. */
  vs_ledger *u = vs_ledger_open(g_dir, "GPU-8c1f0e2a-1111", &plan, "a", err, sizeof err);
  assert_non_null(u);
  vs_ledger_close(u);
  snprintf(path, sizeof path, "%s/card-GPU-8c1f0e2a-1111.ledger", g_dir);
  assert_int_equal(access(path, F_OK), 0);
}

/* The fork child is its own process: the inherited handle refuses to work,
 * a new one takes its own slot, the parent's slot stays untouched. */
static void fork_child_is_own_process(void **state) {
  (void)state;
  vs_plan plan;
  tt_make_plan(&plan, conf, 1000);
  vs_ledger *a = open_as(&plan, "a");
  assert_int_equal(vs_ledger_charge(a, 100, NULL), 0);
  int pipefd[2], back[2]; /* child -> parent, parent -> child */
  assert_int_equal(pipe(pipefd), 0);
  assert_int_equal(pipe(back), 0);
  pid_t pid = fork();
  if (pid == 0) {
    int bad = 0;
    char err[VS_ERR_MAX];
    if (vs_ledger_charge(a, 1, NULL) != -ECHILD) bad |= 1;
    vs_ledger_uncharge(a, 100); /* ignored */
    vs_ledger_close(a);         /* frees memory only */
    vs_ledger *mine = vs_ledger_open(g_dir, "0", &plan, "a", err, sizeof err);
    if (!mine || vs_ledger_charge(mine, 30, NULL) != 0) bad |= 2;
    char c = (char)bad;
    if (write(pipefd[1], &c, 1) != 1) bad |= 4;
    /* Wait for the parent to look, then exit without closing: the parent's
     * sweep must find this process dead and reclaim its 30 bytes. */
    if (read(back[0], &c, 1) != 1) bad |= 8;
    _exit(bad);
  }
  char c;
  assert_int_equal(read(pipefd[0], &c, 1), 1);
  assert_int_equal(c, 0);
  vs_ledger_snapshot *snap = malloc(sizeof *snap);
  char err[VS_ERR_MAX];
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->nprocs, 2);
  int seen_parent = 0, seen_child = 0;
  for (int i = 0; i < snap->nprocs; i++) {
    if (snap->procs[i].pid == getpid() && snap->procs[i].held == 100) seen_parent = 1;
    if (snap->procs[i].pid == pid && snap->procs[i].held == 30) seen_child = 1;
  }
  assert_true(seen_parent && seen_child);
  assert_int_equal(snap->tenants[0].used, 130);
  assert_int_equal(write(back[1], "x", 1), 1);
  int st;
  waitpid(pid, &st, 0);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_int_equal(vs_ledger_sweep(a), 1);
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->nprocs, 1);
  assert_int_equal(snap->tenants[0].recorded, 100);
  assert_string_equal(snap->events[snap->nevents - 1].kind, "reclaim");
  assert_int_equal(snap->events[snap->nevents - 1].bytes, 30);
  free(snap);
  close(pipefd[0]);
  close(pipefd[1]);
  close(back[0]);
  close(back[1]);
  vs_ledger_close(a);
}

/* A child that execs (as the shim's LD_PRELOAD would be inherited) holds
 * none of the parent's ledger descriptors (O_CLOEXEC) and takes its own slot. */
static int exec_child(const char *dir) {
  /* Exactly one descriptor on the ledger file: our own, opened below. */
  vs_plan plan;
  vs_config *cfg = malloc(sizeof *cfg);
  char err[VS_ERR_MAX];
  if (vs_config_parse_string(conf, "t.conf", cfg, err, sizeof err) ||
      vs_plan_build(cfg, 0, NULL, 1000, &plan, err, sizeof err))
    return 10;
  free(cfg);
  int inherited = 0;
  char link[64], target[512];
  for (int fd = 0; fd < 1024; fd++) {
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) {
      target[n] = 0;
      inherited += strstr(target, "card-0.ledger") != NULL;
    }
  }
  if (inherited) return 11;
  vs_ledger *h = vs_ledger_open(dir, "0", &plan, "b", err, sizeof err);
  if (!h || vs_ledger_charge(h, 30, NULL) != 0) return 12;
  char c;
  if (write(1, "r", 1) != 1 || read(0, &c, 1) != 1) return 13; /* hold the slot until told */
  vs_ledger_close(h);
  return 0;
}

static void exec_child_is_own_process(void **state) {
  (void)state;
  vs_plan plan;
  tt_make_plan(&plan, conf, 1000);
  vs_ledger *a = open_as(&plan, "a");
  assert_int_equal(vs_ledger_charge(a, 100, NULL), 0);
  int up[2], down[2];
  assert_int_equal(pipe(up), 0);
  assert_int_equal(pipe(down), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(down[0], 0);
    dup2(up[1], 1);
    execl("/proc/self/exe", "tenant_ledger", "exec-child", g_dir, (char *)NULL);
    _exit(127);
  }
  char c;
  assert_int_equal(read(up[0], &c, 1), 1);
  vs_ledger_snapshot *snap = malloc(sizeof *snap);
  char err[VS_ERR_MAX];
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->nprocs, 2);
  assert_int_equal(snap->tenants[0].used, 100);
  assert_int_equal(snap->tenants[1].used, 30);
  int child_slot = snap->procs[0].pid == pid ? 0 : 1;
  assert_int_equal(snap->procs[child_slot].pid, pid);
  assert_string_equal(snap->procs[child_slot].tenant, "b");
  assert_int_equal(write(down[1], "x", 1), 1);
  int st;
  waitpid(pid, &st, 0);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_int_equal(vs_ledger_snapshot_read(g_dir, "0", snap, err, sizeof err), 0);
  assert_int_equal(snap->nprocs, 1);
  free(snap);
  close(up[0]);
  close(up[1]);
  close(down[0]);
  close(down[1]);
  vs_ledger_close(a);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "exec-child")) return exec_child(argv[2]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(rule_and_numbers, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(view_formula, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(view_kept_across_reattach, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(events_and_snapshot, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(spill_accounting, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(overhead_accounting, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(cache_accounting, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(file_safety, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(fork_child_is_own_process, tt_ledger_setup, tt_ledger_teardown),
      cmocka_unit_test_setup_teardown(exec_child_is_own_process, tt_ledger_setup, tt_ledger_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

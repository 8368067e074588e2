/* vramshim top: a live view of every card's ledger, refreshed every
 * second (ncurses): per card each tenant's usage as a bar against its
 * reservation and limit, sorted by usage, its processes, spilled bytes,
 * and the latest events. `q` quits. When stdout is not a terminal (or
 * with --once) it prints the same view once, as plain text. Reads the
 * ledgers as `vramshim status` does (ledger_read.h). */
#include <curses.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "config.h"
#include "ledger_read.h"
#include "log.h"
#include "timeutil.h"

#define MAX_LEDGERS 64
#define BAR 32
#define EVENTS_SHOWN 6

struct view {
  int curses, row, rows, cols;
};

static void line(struct view *v, int attr, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line(struct view *v, int attr, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (!v->curses) {
    puts(buf);
    return;
  }
  if (v->row >= v->rows) return;
  if (attr) attron(attr);
  mvaddnstr(v->row, 0, buf, v->cols);
  if (attr) attroff(attr);
  v->row++;
}

static const char *human(uint64_t b, char buf[32]) { return vs_bytes_or_none(b, buf, 32); }

/* [####|....    ]: used '#', the reservation '|', the room to the limit
 * '.', beyond the limit (the card's capacity, without one) ' '. */
static void bar(char out[BAR + 3], uint64_t used, uint64_t reserve, uint64_t limit, uint64_t capacity) {
  uint64_t scale = limit != VS_NO_LIMIT && limit ? limit : capacity ? capacity : 1;
  int u = (int)((double)used / (double)scale * BAR + 0.5);
  int r = reserve ? (int)((double)reserve / (double)scale * BAR + 0.5) : -1;
  out[0] = '[';
  for (int i = 0; i < BAR; i++) out[1 + i] = i < u ? '#' : '.';
  if (r > 0 && r <= BAR) out[r] = '|';
  out[BAR + 1] = ']';
  out[BAR + 2] = 0;
}

struct ev {
  const vs_snap_event *e;
  const char *card;
};

static int by_time(const void *a, const void *b) {
  const struct ev *x = a, *y = b;
  return x->e->time_ns < y->e->time_ns ? 1 : x->e->time_ns > y->e->time_ns ? -1 : 0;
}

static const vs_ledger_snapshot *sort_snap;
static int by_used(const void *a, const void *b) {
  const vs_snap_tenant *x = &sort_snap->tenants[*(const int *)a], *y = &sort_snap->tenants[*(const int *)b];
  return x->used < y->used ? 1 : x->used > y->used ? -1 : strcmp(x->name, y->name);
}
static int by_held(const void *a, const void *b) {
  const vs_snap_proc *x = &sort_snap->procs[*(const int *)a], *y = &sort_snap->procs[*(const int *)b];
  return x->held < y->held ? 1 : x->held > y->held ? -1 : x->pid - y->pid;
}

static void draw(struct view *v, const char *dir, vs_ledger_snapshot **snaps, int n) {
  char a[32], b[32], c[32], d[32], when[32];
  time_t now = time(NULL);
  struct tm tm;
  vs_plat_localtime(now, &tm);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  line(v, v->curses ? A_BOLD : 0, "vramshim top  %s  ledgers in %s%s", when, dir, v->curses ? "  (q quits)" : "");
  if (!n) line(v, 0, "no ledger: no process with the shim has used a card yet (or another --ledger-dir)");
  struct ev evs[MAX_LEDGERS * 8];
  int nev = 0;
  for (int k = 0; k < n; k++) {
    const vs_ledger_snapshot *s = snaps[k];
    uint64_t used = 0, taken = s->headroom, spilled = 0;
    for (int t = 0; t < s->ntenants; t++) {
      used += s->tenants[t].used;
      spilled += s->tenants[t].spilled;
      taken += s->tenants[t].used > s->tenants[t].reserve ? s->tenants[t].used : s->tenants[t].reserve;
    }
    line(v, 0, "%s", "");
    line(v, v->curses ? A_BOLD : 0, "card %s (index %d): capacity %s, headroom %s, used %s, free for any tenant %s%s%s",
         s->card_id, s->card_index, human(s->capacity, a), human(s->headroom, b), human(used, c),
         human(taken < s->capacity ? s->capacity - taken : 0, d), spilled ? ", spilled " : "",
         spilled ? human(spilled, a) : "");
    line(v, 0, "  %-16s %-34s %11s %11s %11s %11s %5s", "tenant", "usage [# used | reserve . to limit]", "used",
         "reserve", "limit", "spilled", "procs");
    int order[VS_SNAP_TENANTS], porder[VS_SNAP_PROCS];
    for (int t = 0; t < s->ntenants; t++) order[t] = t;
    sort_snap = s;
    qsort(order, (size_t)s->ntenants, sizeof order[0], by_used);
    for (int p = 0; p < s->nprocs; p++) porder[p] = p;
    qsort(porder, (size_t)s->nprocs, sizeof porder[0], by_held);
    for (int i = 0; i < s->ntenants; i++) {
      const vs_snap_tenant *x = &s->tenants[order[i]];
      char br[BAR + 3], e[32];
      bar(br, x->used, x->reserve, x->limit, s->capacity);
      int hot = x->limit != VS_NO_LIMIT && x->used >= x->limit / 10 * 9;
      line(v, v->curses && hot ? A_REVERSE : 0, "  %-16s %-34s %11s %11s %11s %11s %5d", x->name, br,
           human(x->used, a), human(x->reserve, b), human(x->limit, c), human(x->spilled, d), x->nprocs);
      for (int p = 0; p < s->nprocs; p++) {
        const vs_snap_proc *q = &s->procs[porder[p]];
        if (strcmp(q->tenant, x->name)) continue;
        line(v, 0, "      pid %-8d held %11s  live %11s  spilled %11s%s", q->pid, human(q->held, a),
             human(q->live, e), human(q->spilled, b), q->alive ? "" : "  (dead, reclaim pending)");
      }
    }
    for (int e = 0; e < s->nevents && nev < (int)(sizeof evs / sizeof evs[0]); e++)
      if (strcmp(s->events[e].kind, "reclaim")) evs[nev++] = (struct ev){&s->events[e], s->card_id};
  }
  qsort(evs, (size_t)nev, sizeof evs[0], by_time);
  line(v, 0, "%s", "");
  line(v, v->curses ? A_BOLD : 0, "latest events%s", nev ? "" : ": none");
  for (int i = 0; i < nev && i < EVENTS_SHOWN; i++) {
    const vs_snap_event *e = evs[i].e;
    time_t t = (time_t)(e->time_ns / 1000000000ull);
    vs_plat_localtime(t, &tm);
    strftime(when, sizeof when, "%H:%M:%S", &tm);
    line(v, 0, "  %s  card %s  %-16s %-8s %11s  (used %s, limit %s, pid %d)", when, evs[i].card, e->tenant,
         !strcmp(e->kind, "limit") ? "refusal" : e->kind, human(e->bytes, a), human(e->used, b), human(e->limit, c),
         e->pid);
  }
}

static int read_all(const char *dir, vs_ledger_snapshot **snaps) {
  static char ids[MAX_LEDGERS][VS_NAME_MAX];
  char err[VS_ERR_MAX];
  int n = vs_ledger_list(dir, ids, MAX_LEDGERS, err, sizeof err), got = 0;
  for (int i = 0; i < n; i++)
    if (vs_ledger_snapshot_read(dir, ids[i], snaps[got], err, sizeof err) == 0) got++;
  return got;
}

int cmd_top(int argc, char **argv) {
  char dir[VS_PATH_MAX] = "";
  int once = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: vramshim top [--ledger-dir DIR] [--once]\n"
             "  A live view of every card, refreshed every second: each tenant's usage as a bar\n"
             "  against its reservation and limit (sorted by usage), its processes, spilled bytes,\n"
             "  the latest events. q quits. --once, or stdout not a terminal: one plain view.\n");
      return 0;
    } else if (!strcmp(argv[i], "--once")) {
      once = 1;
    } else if (!strcmp(argv[i], "--ledger-dir") && i + 1 < argc) {
      snprintf(dir, sizeof dir, "%s", argv[++i]);
    } else {
      fprintf(stderr, "vramshim: top: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  char err[VS_ERR_MAX];
  if (!dir[0] && vs_config_ledger_dir(dir, sizeof dir, err, sizeof err))
    fprintf(stderr, "vramshim: %s\nvramshim: using the default ledger dir %s\n", err, dir);
  vs_ledger_snapshot *snaps[MAX_LEDGERS];
  for (int i = 0; i < MAX_LEDGERS; i++) {
    snaps[i] = malloc(sizeof *snaps[i]);
    if (!snaps[i]) {
      fprintf(stderr, "vramshim: out of memory\n");
      return 1;
    }
  }
  struct view v = {0};
  if (once || !isatty(STDOUT_FILENO)) {
    draw(&v, dir, snaps, read_all(dir, snaps));
  } else {
    setlocale(LC_CTYPE, ""); /* the terminal's encoding for paths; numbers stay in the C locale */
    initscr();
    cbreak();
    noecho();
    curs_set(0);
    keypad(stdscr, TRUE);
    timeout(1000); /* getch waits at most a second: the refresh */
    v.curses = 1;
    for (;;) {
      int n = read_all(dir, snaps);
      erase();
      getmaxyx(stdscr, v.rows, v.cols);
      v.row = 0;
      draw(&v, dir, snaps, n);
      refresh();
      int ch = getch();
      if (ch == 'q' || ch == 'Q') break;
    }
    endwin();
  }
  for (int i = 0; i < MAX_LEDGERS; i++) free(snaps[i]);
  return 0;
}

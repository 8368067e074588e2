#!/usr/bin/env python3
"""A synthetic 60-day history database, for `vramshim history`'s tests and
the sample in docs/schemas: three tenants on one card with known lines.
  leaky  live memory rising 500 MiB a week (a leak), cache flat
  frag   live flat, held - live rising 250 MiB a week (fragmentation)
  flat   both flat
Raw samples every 5 minutes over 60 days, with seeded noise; then
`vramshim record --once` aggregates them (hourly, daily) and prunes the raw
ones past 14 days, as a recorder running all along would have. A few
refusals, warnings and threshold actions. Prints the truth as JSON: each
tenant's days to its limit from its last sample.
usage: gen_history.py VRAMSHIM DB"""
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20
GiB = 1 << 30
WEEK_MS = 7 * 86400 * 1000
STEP_MS = 5 * 60 * 1000
CARD = "GPU-5e7a1c00-0000-4000-8000-000000000026"

# name: limit, reserve, live(t0), live slope per week, cached(t0), cached slope per week, noise
TENANTS = {
    "leaky": (16 * GiB, 8 * GiB, 4 * GiB, 500 * MiB, 256 * MiB, 0, 64 * MiB),
    "frag": (8 * GiB, 4 * GiB, 3 * GiB, 0, 200 * MiB, 250 * MiB, 48 * MiB),
    "flat": (4 * GiB, 2 * GiB, 1536 * MiB, 0, 100 * MiB, 0, 100 * MiB),
}


def generate(tool, db):
    if os.path.exists(db):
        os.unlink(db)
    empty = tempfile.mkdtemp()
    conf = os.path.join(empty, "vramshim.conf")   # no tenants, no actions
    with open(conf, "w") as f:
        f.write("[global]\n")
    env = dict(os.environ, VRAMSHIM_CONFIG=conf)
    # The schema, made by the tool itself (no ledgers in the empty folder).
    subprocess.run([tool, "record", "--db", db, "--ledger-dir", empty, "--once"], check=True, env=env)
    now = int(time.time() * 1000)
    t0 = now - 60 * 86400 * 1000
    rnd = random.Random(26)
    c = sqlite3.connect(db)
    truth = {}
    last = t0 + (now - t0) // STEP_MS * STEP_MS
    for name, (lim, res, live0, live_w, cache0, cache_w, noise) in TENANTS.items():
        rows = []
        for t in range(t0, now, STEP_MS):
            weeks = (t - t0) / WEEK_MS
            live = live0 + live_w * weeks + rnd.uniform(-noise, noise)
            cached = cache0 + cache_w * weeks + rnd.uniform(-noise / 4, noise / 4)
            rows.append((t, CARD, name, 0, int(live + cached), int(cached), 0, 0, lim, res))
        c.executemany("INSERT INTO samples VALUES(?,?,?,?,?,?,?,?,?,?)", rows)
        slope = (live_w + cache_w) / WEEK_MS
        if slope > 0:
            at_last = live0 + cache0 + slope * (last - t0)
            truth[name] = (lim - at_last) / slope / 86400000
        else:
            truth[name] = None
    # Events: warnings of leaky on its last 3 days, refusals of flat on two days.
    # Each at noon UTC of its day (the tool counts per UTC date), so a run near
    # midnight cannot split a day's refusals over two dates.
    def noon(d):
        return (now // 86400000 - d) * 86400000 + 12 * 3600000
    ev = []
    for d in (3, 2, 1):
        ev.append((noon(d) * 1000000, CARD, "leaky", 4242, "warn", 0, 14 * GiB, 16 * GiB))
    for d, k in ((20, 3), (5, 2)):
        for i in range(k):
            ev.append(((noon(d) + i * 60000) * 1000000, CARD, "flat", 4343, "limit", 3 * GiB, 1600 * MiB,
                       4 * GiB))
    c.executemany("INSERT INTO events VALUES(?,?,?,?,?,?,?,?)", ev)
    c.executemany("INSERT INTO actions VALUES(?,?,?,?,?,?,?,?,?)", [
        (now - 3 * 86400000, CARD, "leaky", "warn", "/usr/local/bin/llm-degrade", "ok", 0, 120, "switched to 8B\n"),
        (now - 5 * 86400000, CARD, "flat", "refuse", "/usr/local/bin/page-oncall", "failed", 3, 80,
         "pager: no route to host\n"),
    ])
    c.commit()
    c.close()
    # Aggregate and prune, as the recorder does once an hour.
    subprocess.run([tool, "record", "--db", db, "--ledger-dir", empty, "--once"], check=True, env=env)
    return truth


if __name__ == "__main__":
    print(json.dumps(generate(sys.argv[1], sys.argv[2])))

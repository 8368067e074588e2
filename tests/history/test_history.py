#!/usr/bin/env python3
"""`vramshim history` on a synthetic 60-day database (gen_history.py): the
leaking tenant, the fragmenting one and the flat one get the right
verdicts, the forecasts are within 5 % of the truth, refusals and warnings
per day and the actions are reported; --json validates against
docs/schemas/history.schema.json (the sample too); --svg draws every line
and marks each event; retention: 14 days raw, hourly before."""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import xml.etree.ElementTree as ET

from gen_history import CARD, generate
from histlib import GiB, Env, args, validate


def main():
    a = args()
    e = Env(a, "history", "")
    truth = generate(a.tool, e.db)

    # Retention, as the recorder keeps it.
    c = sqlite3.connect(e.db)
    oldest_raw = c.execute("SELECT (max(t) - min(t)) / 86400000.0 FROM samples").fetchone()[0]
    hourly = c.execute("SELECT count(*) FROM agg WHERE level = 1 AND tenant = 'leaky'").fetchone()[0]
    daily = c.execute("SELECT count(*) FROM agg WHERE level = 2 AND tenant = 'leaky'").fetchone()[0]
    c.close()
    assert 13.95 < oldest_raw < 14.05, oldest_raw   # cut at a whole hour
    assert 59 * 24 <= hourly <= 60 * 24 + 1, hourly
    assert 59 <= daily <= 60, daily
    print("raw samples over %.2f days, %d hourly and %d daily aggregates per tenant" % (oldest_raw, hourly, daily))

    doc = json.loads(e.tool("history", "--db", e.db, "--json").stdout)
    validate(a.schemas, "history", doc)
    with open(os.path.join(a.schemas, "history.sample.json")) as f:
        validate(a.schemas, "history", json.load(f))
    by = {t["tenant"]: t for t in doc["tenants"]}
    assert sorted(by) == ["flat", "frag", "leaky"], sorted(by)
    assert by["leaky"]["drift"]["verdict"] == "leak_or_growth", by["leaky"]["drift"]
    assert by["frag"]["drift"]["verdict"] == "fragmentation_or_caching", by["frag"]["drift"]
    assert by["flat"]["drift"]["verdict"] == "flat", by["flat"]["drift"]
    for name in ("leaky", "frag"):
        got, want = by[name]["forecast"]["days_to_limit"], truth[name]
        err = abs(got - want) / want
        print("%s: %s, %.1f days to its limit (truth %.1f, off by %.2f %%), slope %.0f MiB/week" %
              (name, by[name]["drift"]["verdict"], got, want, 100 * err,
               by[name]["drift"]["used_per_week"] / (1 << 20)))
        assert err <= 0.05, (name, got, want)
    assert by["flat"]["forecast"]["days_to_limit"] is None and by["flat"]["forecast"]["note"] == "usage is not rising"
    assert abs(by["leaky"]["drift"]["live_per_week"] / (500 << 20) - 1) < 0.05, by["leaky"]["drift"]
    assert abs(by["frag"]["drift"]["cached_per_week"] / (250 << 20) - 1) < 0.05, by["frag"]["drift"]
    # Refusals and warnings per day, and the actions.
    assert sum(d["refusals"] for d in by["flat"]["days"]) == 5 and len(by["flat"]["days"]) == 2, by["flat"]["days"]
    assert sum(d["warnings"] for d in by["leaky"]["days"]) == 3, by["leaky"]["days"]
    act = by["flat"]["actions"]
    assert len(act) == 1 and act[0]["status"] == "failed" and act[0]["exit_code"] == 3, act
    assert by["leaky"]["limit"] == 16 * GiB and by["leaky"]["reserve"] == 8 * GiB

    # Filters.
    one = json.loads(e.tool("history", "--db", e.db, "--json", "--tenant", "frag", "--card", CARD).stdout)
    assert [t["tenant"] for t in one["tenants"]] == ["frag"], one
    short = json.loads(e.tool("history", "--db", e.db, "--json", "--since", "2h").stdout)
    assert all(t["drift"]["verdict"] == "not_enough_data" for t in short["tenants"]), short

    # Plain words.
    text = e.tool("history", "--db", e.db).stdout
    for want in ("tenant leaky: limit 16.00 GiB, reserve 8.00 GiB",
                 "drift: live memory rising: a leak or a growing workload",
                 "drift: held minus live rising while live memory is flat: fragmentation or caching",
                 "drift: flat: no drift", "forecast: at this slope it reaches its limit of 16.00 GiB in",
                 "2 refusals, 0 warnings", "FAILED: exit status 3"):
        assert want in text, (want, text)
    assert text.count("week of") == 3, text

    # The plot: per tenant the usage and cache lines, limit and reservation, one mark per event.
    svg = e.path("history.svg")
    p = e.tool("history", "--db", e.db, "--svg", svg)
    root = ET.parse(svg).getroot()
    ns = {"s": "http://www.w3.org/2000/svg"}
    assert len(root.findall(".//s:g[@class='tenant']", ns)) == 3
    for cls in ("usage", "cache"):
        lines = root.findall(".//s:polyline[@class='%s']" % cls, ns)
        assert len(lines) == 3 and all(len(l.get("points").split()) > 100 for l in lines), cls
    assert len(root.findall(".//s:line[@class='limit']", ns)) == 3 + 3   # with the legends
    assert len(root.findall(".//s:path[@class='mark refusal']", ns)) == 5 + 3
    assert len(root.findall(".//s:path[@class='mark warn']", ns)) == 3 + 3
    if shutil.which("rsvg-convert"):
        r = subprocess.run(["rsvg-convert", svg, "-o", e.path("history.png")], capture_output=True, text=True)
        assert r.returncode == 0 and not r.stderr.strip(), r.stderr

    # No database: a message, not a crash.
    p = e.tool("history", "--db", e.path("missing.db"), ok=False)
    assert p.returncode == 1 and p.stderr.startswith("vramshim: ") and "missing.db" in p.stderr, p.stderr


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Threshold actions run by `vramshim record`: an action that records its
environment runs once per crossing of warn_at and not again until usage
falls below it; on_refuse once per refusal crossing; the card-wide form
([card 0]) for a tenant without its own; a hanging action is killed (with
what it started) at --action-timeout; a failing one is reported by
`vramshim history` and `vramshim status`. `vramshim check` validates the
programs (exists, executable, not world-writable)."""
import sqlite3
import glob
import json
import os
import stat
import subprocess
import time

from histlib import MiB, Env, args, eventually, stop, validate

ACT = """#!/bin/sh
f="{runs}/$VRAMSHIM_EVENT-$(date +%s%N).env"
env | grep '^VRAMSHIM_' | sort > "$f.part" && mv "$f.part" "$f"   # whole when the test sees it
echo "action saw $VRAMSHIM_EVENT for $VRAMSHIM_TENANT"
"""
HANG = """#!/bin/sh
echo $$ > "{dir}/hang.pid"
sleep 600 &
echo $! > "{dir}/hang-child.pid"
echo "hanging"
wait
"""
FAIL = """#!/bin/sh
echo "pager: no route to host"
exit 3
"""


def script(path, text, mode=0o755):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def runs(e, kind):
    out = []
    for p in sorted(glob.glob(os.path.join(e.path("runs"), kind + "-*.env"))):
        with open(p) as f:
            out.append(dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l))
    return out


def below_seen(e, tenant, threshold, since_ms):
    """A pass after since_ms stored the tenant's usage (pid 0) below threshold."""
    c = sqlite3.connect(e.db)
    try:
        return c.execute("SELECT count(*) FROM samples WHERE tenant = ? AND pid = 0 AND used < ? AND t > ?",
                         (tenant, threshold, since_ms)).fetchone()[0] > 0
    finally:
        c.close()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead: its parent (the recorder) reaped the group leader; the child is init's.
    with open("/proc/%d/stat" % pid) as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def main():
    a = args()
    probe = Env(a, "actions", "")
    d = probe.dir
    os.makedirs(os.path.join(d, "runs"))
    script(os.path.join(d, "act.sh"), ACT.format(runs=os.path.join(d, "runs")))
    script(os.path.join(d, "hang.sh"), HANG.format(dir=d))
    script(os.path.join(d, "fail.sh"), FAIL)
    config = ("[card 0]\non_refuse = run:{d}/fail.sh\n"
              "[tenant llm]\nlimit = 256MiB\nwarn_at = 50%\non_warn = run:{d}/act.sh\non_refuse = run:{d}/act.sh\n"
              "[tenant slow]\nlimit = 256MiB\nwarn_at = 50%\non_warn = run:{d}/hang.sh\n").format(d=d)
    with open(probe.conf, "a") as f:
        f.write(config)
    e = probe
    try:
        # vramshim check: the programs are fine; then a missing, a world-writable, a relative one.
        p = e.tool("check", e.conf)
        assert "is valid" in p.stdout, p.stdout
        bad = e.path("bad.conf")
        script(e.path("ww.sh"), FAIL, 0o777)
        os.chmod(e.path("ww.sh"), 0o777)
        with open(bad, "w") as f:
            f.write("[tenant a]\nlimit = 1GiB\nwarn_at = 90%%\non_warn = run:%s/missing.sh\n"
                    "[card 1]\non_refuse = run:%s/ww.sh\n" % (d, d))
        p = e.tool("check", bad, ok=False)
        assert p.returncode == 1, p
        assert "bad.conf:4: on_warn of [tenant a]: %s/missing.sh: No such file or directory" % d in p.stderr, p.stderr
        assert "bad.conf:6: on_refuse of [card 1]: %s/ww.sh: writable by every user" % d in p.stderr, p.stderr
        with open(bad, "w") as f:
            f.write("[tenant a]\non_refuse = run:page-oncall\n")
        p = e.tool("check", bad, ok=False)
        assert "bad.conf:2: bad value 'run:page-oncall' for 'on_refuse': expected run:PROGRAM with an absolute path" \
            in p.stderr, p.stderr

        llm, slow = e.holder("llm"), e.holder("slow")
        # A refusal before the recorder starts is history (stored), not a crossing to act on.
        assert llm.alloc(300 * MiB).startswith("refused")
        time.sleep(0.3)
        # 3 s: long enough for hang.sh to start its child on a loaded machine
        # before the timeout kills them both (with 1 s it could be killed first).
        rec = e.recorder("--config", e.conf, "--action-timeout", "3s")
        # Crossing warn_at (128 MiB): one run, with the event in its environment.
        assert llm.alloc(150 * MiB) == "ok"
        w = eventually(lambda: runs(e, "warn"), "on_warn ran")
        assert len(w) == 1, w
        assert not runs(e, "refuse"), runs(e, "refuse")
        env = w[0]
        card = e.status()["cards"][0]["card"]
        assert env["VRAMSHIM_EVENT"] == "warn" and env["VRAMSHIM_TENANT"] == "llm", env
        assert env["VRAMSHIM_CARD"] == card and env["VRAMSHIM_CARD_INDEX"] == "0", env
        assert int(env["VRAMSHIM_USED"]) >= 128 * MiB and env["VRAMSHIM_LIMIT"] == str(256 * MiB), env
        assert env["VRAMSHIM_THRESHOLD"] == str(128 * MiB) and env["VRAMSHIM_HISTORY_DB"] == e.db, env
        # Still above, higher: not again.
        assert llm.alloc(20 * MiB) == "ok"
        time.sleep(1.5)
        assert len(runs(e, "warn")) == 1, runs(e, "warn")
        # Below: re-armed; above again: once more.
        freed_ms = time.time() * 1000
        assert llm.cmd("freeall") == "ok"
        # Re-armed once a pass has seen the tenant below warn_at (waited for, not slept:
        # a loaded machine can delay a 200 ms pass past any fixed sleep).
        eventually(lambda: below_seen(e, "llm", 128 * MiB, freed_ms), "the recorder saw llm below warn_at")
        assert len(runs(e, "warn")) == 1
        assert llm.alloc(140 * MiB) == "ok"
        eventually(lambda: len(runs(e, "warn")) == 2, "on_warn ran again after re-arming")
        # A refusal: on_refuse once, with the request; a second refusal while still above: not again.
        assert llm.alloc(200 * MiB).startswith("refused")
        r = eventually(lambda: runs(e, "refuse"), "on_refuse ran")
        assert r[0]["VRAMSHIM_EVENT"] == "refuse" and r[0]["VRAMSHIM_REQUEST"] == str(200 * MiB), r
        assert llm.alloc(200 * MiB).startswith("refused")
        time.sleep(1.5)
        assert len(runs(e, "refuse")) == 1 and len(runs(e, "warn")) == 2, (runs(e, "refuse"), runs(e, "warn"))

        # A hanging action: killed at its timeout, with the process it started.
        assert slow.alloc(150 * MiB) == "ok"
        pid = eventually(lambda: os.path.exists(e.path("hang-child.pid")) and
                         int(open(e.path("hang-child.pid")).read() or 0), "hang.sh started")
        leader = int(open(e.path("hang.pid")).read())
        t0 = time.time()
        eventually(lambda: not alive(pid) and not alive(leader), "hanging action killed", timeout=20)
        print("hanging action and its child killed %.1f s after it started (timeout 3 s)" % (time.time() - t0))
        # The card-wide on_refuse of tenant slow: it fails (exit 3).
        assert slow.alloc(200 * MiB).startswith("refused")
        time.sleep(1.5)
        assert stop(rec) == 0

        h = json.loads(e.tool("history", "--db", e.db, "--json", "--since", "1h").stdout)
        validate(a.schemas, "history", h)
        by = {t["tenant"]: t for t in h["tenants"]}
        acts = by["llm"]["actions"]
        assert [(x["event"], x["status"]) for x in acts] == [("warn", "ok"), ("warn", "ok"), ("refuse", "ok")], acts
        assert acts[0]["output"] == "action saw warn for llm\n", acts[0]
        sl = [(x["event"], x["status"], x["exit_code"], x["program"]) for x in by["slow"]["actions"]]
        assert sl == [("warn", "timeout", None, d + "/hang.sh"), ("refuse", "failed", 3, d + "/fail.sh")], sl
        assert by["slow"]["actions"][1]["output"] == "pager: no route to host\n"
        text = e.tool("history", "--db", e.db, "--since", "1h").stdout
        assert "on_refuse %s/fail.sh: FAILED: exit status 3" % d in text, text
        assert "on_warn %s/hang.sh: FAILED: killed at its timeout" % d in text, text
        log = open(e.path("recorder.err")).read()
        assert "vramshim: on_warn of tenant llm on card %s: action saw warn for llm" % card in log, log
        assert "still ran after its timeout of 3.0 s: killed" in log, log
        # status names the failed actions (from the history database).
        st = e.tool("status", "--ledger-dir", e.ledger, env=dict(e.env, VRAMSHIM_HISTORY_DB=e.db)).stdout
        assert "vramshim: threshold action on_refuse of tenant slow on card %s failed at " % card in st, st
        assert "(exit status 3): %s/fail.sh" % d in st and "on_warn of tenant slow" in st, st
        # ... and so do its JSON (schema 1.1: actions_failed) and its Prometheus text.
        henv = dict(e.env, VRAMSHIM_HISTORY_DB=e.db)
        sj = json.loads(e.tool("status", "--json", "--ledger-dir", e.ledger, env=henv).stdout)
        validate(a.schemas, "status", sj)
        major, minor = (int(x) for x in sj["schema_version"].split("."))
        assert major == 1 and minor >= 1, sj["schema_version"]   # actions_failed since 1.1
        fl = [(x["card"], x["tenant"], x["event"], x["status"], x["exit_code"], x["program"])
              for x in sj["actions_failed"]]
        assert fl == [(card, "slow", "warn", "timeout", None, d + "/hang.sh"),
                      (card, "slow", "refuse", "failed", 3, d + "/fail.sh")], fl
        assert sj["actions_failed"][1]["output"] == "pager: no route to host\n", sj["actions_failed"]
        assert all(abs(x["time_ns"] / 1e9 - time.time()) < 600 for x in sj["actions_failed"]), sj["actions_failed"]
        none = dict(e.env, VRAMSHIM_HISTORY_DB=e.path("no-such.db"))
        assert json.loads(e.tool("status", "--json", "--ledger-dir", e.ledger, env=none).stdout)["actions_failed"] == []
        try:
            from prometheus_client.parser import text_string_to_metric_families
        except ImportError:
            text_string_to_metric_families = None
            print("prometheus_client is not installed: status --prometheus not parsed")
        if text_string_to_metric_families:
            prom = e.tool("status", "--prometheus", "--ledger-dir", e.ledger, env=henv).stdout
            fams = {f.name: f for f in text_string_to_metric_families(prom)}
            f = fams["vramshim_threshold_actions_failed"]
            assert f.type == "gauge" and f.documentation, f
            got = sorted((tuple(sorted(x.labels.items())), x.value) for x in f.samples)
            assert got == [((("card", card), ("event", "refuse"), ("tenant", "slow")), 1.0),
                           ((("card", card), ("event", "warn"), ("tenant", "slow")), 1.0)], got
    finally:
        e.close()


if __name__ == "__main__":
    main()

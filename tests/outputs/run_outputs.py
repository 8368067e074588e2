#!/usr/bin/env python3
"""Every machine-readable output of `vramshim`, read by real parsers and
validated against its schema (docs/schemas/, docs/dump.schema.json), under
live processes over the sim that exercise every field.

usage: run_outputs.py --tool T --prog P --preload LIB --sim-dir D --schemas DIR
                      --work DIR TEST
TEST: live | check | replay | samples        (exit 77: skipped)

  live     processes of four tenants on two simulated cards: a reservation
           held, a warning, a refusal at the limit, bytes spilled to host
           memory, a tenant without a section, a process killed (dead, then
           reclaimed); `status --json` (with and without --events),
           `status --prometheus` (prometheus_client's parser), `dump --pid`,
           `dump --tenant` and `dump --all` (one document each)
  check    `check --json`: valid with and without capacities, invalid
  replay   `replay --json`: JSON Lines, every policy kind
  samples  each docs/schemas/NAME.sample.json validates against its schema,
           and every schema is a valid JSON Schema 2020-12

The preload is set for the programs under test only, never for this script
or the tool. Nothing here looks for text in JSON: documents are parsed
(json), validated (jsonschema) and their values compared."""
import argparse
import glob
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

MiB = 1 << 20
# Seconds a condition that must come true may take (a loaded 2-core machine,
# sanitizer builds): a guard, not a speed bound.
EVENTUALLY = 30
SCHEMA_BASE = "https://github.com/vramshim/vramshim/docs/"


def fail(msg):
    print("vramshim-test: FAIL: " + msg)
    sys.exit(1)


def say(msg):
    print("vramshim-test: " + msg)


def need(module):
    try:
        return importlib.import_module(module)
    except ImportError:
        print("vramshim: the Python module %s is not installed (scripts/setup installs it); skipping" % module)
        sys.exit(77)


class Schemas:
    """The repository's schemas, each reachable by its $id, so the dump
    list's reference to the dump schema resolves offline."""

    def __init__(self, schemas_dir):
        self.js = need("jsonschema")
        docs_dir = os.path.dirname(os.path.abspath(schemas_dir))
        paths = glob.glob(os.path.join(schemas_dir, "*.schema.json")) + [os.path.join(docs_dir, "dump.schema.json")]
        self.store, self.by_name = {}, {}
        for p in paths:
            with open(p) as f:
                s = json.load(f)
            self.js.Draft202012Validator.check_schema(s)
            if not s.get("$id", "").startswith(SCHEMA_BASE):
                fail("%s: $id %r is not under %s" % (p, s.get("$id"), SCHEMA_BASE))
            self.store[s["$id"]] = s
            self.by_name[os.path.basename(p)[:-len(".schema.json")]] = s

    def validate(self, name, doc, what):
        s = self.by_name[name]
        resolver = self.js.RefResolver.from_schema(s, store=self.store)
        v = self.js.Draft202012Validator(s, resolver=resolver)
        errs = sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))
        if errs:
            fail("%s does not validate against %s.schema.json: %s at %s"
                 % (what, name, errs[0].message, "/".join(str(p) for p in errs[0].absolute_path)))
        return doc


class Env:
    def __init__(self, a, test):
        self.a = a
        self.dir = os.path.join(a.work, test)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.ledger = os.path.join(self.dir, "ledger")
        self.dumps = os.path.join(self.dir, "dumps")
        self.log = os.path.join(self.dir, "shim.log")
        self.conf = os.path.join(self.dir, "vramshim.conf")
        self.base = dict(os.environ)
        for k in ("LD_PRELOAD", "VRAMSHIM_TENANT", "VRAMSHIM_ON_ERROR"):
            self.base.pop(k, None)
        self.base["VRAMSHIM_CONFIG"] = self.conf
        self.procs = []

    def config(self, text):
        with open(self.conf, "w") as f:
            f.write("[global]\nledger_dir = %s\ndump_dir = %s\ntimeline_interval = 100ms\n\n%s"
                    % (self.ledger, self.dumps, text))

    def start(self, tenant, allocs):
        e = dict(self.base)
        e.update({"LD_PRELOAD": self.a.preload, "LD_LIBRARY_PATH": self.a.sim_dir,
                  "VRAMSIM_STATE": os.path.join(self.dir, "sim.state"), "VRAMSIM_CARDS": "1GiB,512MiB",
                  "VRAMSHIM_LOG": "info,file:" + self.log, "VRAMSHIM_TENANT": tenant})
        p = subprocess.Popen([self.a.prog] + allocs, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=e, text=True)
        line = p.stdout.readline().split()
        if len(line) != 4 or line[0] != "ready":
            p.kill()
            fail("%s %s said %r (exit %s); log:\n%s" % (tenant, allocs, line, p.wait(), self.read_log()))
        self.procs.append(p)
        return p, int(line[2]), int(line[3])

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.stdin.close()
                if p.wait(timeout=2 * EVENTUALLY) != 0:
                    fail("pid %d exited %d" % (p.pid, p.returncode))

    def tool(self, args, ok=(0,)):
        if args[0] == "dump":
            args = args + ["--timeout", str(EVENTUALLY)]
        r = subprocess.run([self.a.tool] + args, capture_output=True, text=True, env=self.base,
                           timeout=4 * EVENTUALLY)
        # Each output stays in the test's folder, for a look after a failure.
        self.n = getattr(self, "n", 0) + 1
        name = "-".join(os.path.basename(x).strip("-") for x in args[:3])
        with open(os.path.join(self.dir, "out-%02d-%s.txt" % (self.n, name)), "w") as f:
            f.write(r.stdout)
        if r.returncode not in ok:
            fail("vramshim %s exited %d: %s\nlog:\n%s" % (" ".join(args), r.returncode, r.stderr, self.read_log()))
        return r

    def read_log(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""


def parse(text, what):
    try:
        return json.loads(text)
    except ValueError as e:
        fail("%s is not one JSON document: %s\n%s" % (what, e, text[:4000]))


def by(items, key):
    return {x[key]: x for x in items}


# ---- live ----------------------------------------------------------------------
CONFIG = """[card 0]
headroom = 64MiB

[tenant llm]
reserve = 256MiB
limit = 512MiB
warn_at = 50%

[tenant spiller]
limit = 128MiB
on_limit = spill:256MiB

[tenant capped]
limit = 64MiB
"""


def status(env, schemas, events):
    args = ["status", "--json"] + (["--events"] if events else [])
    return schemas.validate("status", parse(env.tool(args).stdout, " ".join(args)), " ".join(args))


def eventually(cond, what):
    end = time.monotonic() + EVENTUALLY
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    fail("never came true: " + what)


def t_live(env, schemas):
    prom_parser = need("prometheus_client.parser")
    env.config(CONFIG)
    llm, _, _ = env.start("llm", ["0:%d" % (300 * MiB), "1:%d" % (32 * MiB)])   # above warn_at (256 MiB)
    spill, _, _ = env.start("spiller", ["0:%d" % (100 * MiB), "0:%d" % (100 * MiB)])   # the second spills
    capped, _, refused = env.start("capped", ["0:%d" % (48 * MiB), "0:%d?" % (48 * MiB)])
    if refused != 1:
        fail("tenant capped: the allocation beyond its 64 MiB limit was not refused")
    guest, _, _ = env.start("guest", ["1:%d" % (16 * MiB)])   # a tenant in no section
    victim, _, _ = env.start("guest", ["0:%d" % (8 * MiB)])

    # A dead process: killed, its usage not yet reclaimed (nothing allocates meanwhile).
    victim.kill()
    victim.wait()
    st = status(env, schemas, events=False)
    cards = by(st["cards"], "index")
    if sorted(cards) != [0, 1]:
        fail("status lists cards %s, wanted 0 and 1 (VRAMSIM_CARDS=1GiB,512MiB)" % sorted(cards))
    c0, c1 = cards[0], cards[1]
    if "events" in c0:
        fail("events without --events")
    if (c0["capacity"], c1["capacity"], c0["headroom"]) != (1024 * MiB, 512 * MiB, 64 * MiB):
        fail("capacities %d, %d, headroom %d" % (c0["capacity"], c1["capacity"], c0["headroom"]))
    procs0 = by(c0["processes"], "pid")
    if victim.pid not in procs0 or procs0[victim.pid]["alive"] or c0["dead_bytes"] < 8 * MiB:
        fail("the killed pid %d is not listed dead with its 8 MiB: %s, dead_bytes %d"
             % (victim.pid, procs0.get(victim.pid), c0["dead_bytes"]))
    if not all(procs0[p.pid]["alive"] for p in (llm, spill, capped)):
        fail("a live process is listed dead: %s" % c0["processes"])

    t0 = by(c0["tenants"], "name")
    t1 = by(c1["tenants"], "name")
    x = t0["llm"]
    if x["reserve"] != 256 * MiB or x["limit"] != 512 * MiB or x["used"] < 300 * MiB or x["processes"] != 1:
        fail("llm on card 0: %s" % x)
    # Every live process on the card runs the config that reserves for llm: each holds the reservation.
    alive0 = sorted(p for p, q in procs0.items() if q["alive"])
    if sorted(x["reserve_held_by"]) != alive0 or x["reserve_processes"] != len(alive0):
        fail("llm's reservation is held by the live processes %s: %s" % (alive0, x))
    if abs(x["share"] - x["used"] / c0["capacity"]) > 1e-4:
        fail("share %s of %d used" % (x["share"], x["used"]))
    s = t0["spiller"]
    if s["spilled"] != 100 * MiB or s["spill_max"] != 256 * MiB or s["spill_peak"] < 100 * MiB:
        fail("spiller's spilled bytes: %s" % s)
    if procs0[spill.pid]["spilled"] != 100 * MiB:
        fail("spiller's process spilled %d" % procs0[spill.pid]["spilled"])
    if x["spill_max"] is not None or x["spilled"] != 0:
        fail("llm does not spill: %s" % x)
    g = t1["guest"]
    if g["reserve"] != 0 or g["limit"] is not None or g["used"] < 16 * MiB or g["reserve_held_by"] != []:
        fail("a tenant without a section has no reserve and no limit: %s" % g)
    if t0["capped"]["limit"] != 64 * MiB:
        fail("capped: %s" % t0["capped"])
    if t1["llm"]["used"] < 32 * MiB:
        fail("llm on card 1: %s" % t1["llm"])
    say("status --json: 2 cards, %d tenants on card 0, pid %d dead holding %d bytes, %d bytes spilled"
        % (len(t0), victim.pid, c0["dead_bytes"], s["spilled"]))

    # A process whose program freed its memory: its arena's cache, published
    # from its background thread, shows as cached (part of held and used),
    # and its live bytes fall to 0 (refreshed by the same thread: a free
    # into the arena touches no ledger).
    freer, _, _ = env.start("freer", ["1:%d-" % (64 * MiB)])
    def cache_shown():
        d = status(env, schemas, events=False)
        c1 = by(d["cards"], "index")[1]
        p = by(c1["processes"], "pid").get(freer.pid)
        return d if p and p["cached"] >= 64 * MiB and p["live"] == 0 else None

    st = eventually(cache_shown, "the freeing process's 64 MiB cache in status")
    for c in st["cards"]:
        for t in c["tenants"]:
            mine = [p for p in c["processes"] if p["tenant"] == t["name"] and p["alive"]]
            if t["cached"] != sum(p["cached"] for p in mine) or t["cached"] > t["used"]:
                fail("tenant %s on card %s: cached %d, its processes' %d, used %d"
                     % (t["name"], c["card"], t["cached"], sum(p["cached"] for p in mine), t["used"]))
        for p in c["processes"]:
            if p["cached"] > p["held"]:
                fail("pid %d caches %d of %d held" % (p["pid"], p["cached"], p["held"]))
    if "cached" not in env.tool(["status"]).stdout:
        fail("text status shows no cached column while a process caches")
    say("status: pid %d caches %d bytes after its program freed them" % (freer.pid, by(
        by(st["cards"], "index")[1]["processes"], "pid")[freer.pid]["cached"]))

    # The next allocation on card 0 reclaims the dead process: a reclaim event.
    env.start("guest", ["0:%d" % MiB])
    def reclaimed():
        d = status(env, schemas, events=True)
        return d if all(p["alive"] for p in by(d["cards"], "index")[0]["processes"]) else None

    st = eventually(reclaimed, "the dead process reclaimed")
    c0 = by(st["cards"], "index")[0]
    kinds = {e["kind"] for e in c0["events"]}
    for k in ("warn", "limit", "spill", "reclaim"):
        if k not in kinds:
            fail("no %s event on card 0: %s" % (k, c0["events"]))
    ev = [e for e in c0["events"] if e["kind"] == "limit"][0]
    if ev["tenant"] != "capped" or ev["pid"] != capped.pid or ev["bytes"] != 48 * MiB or ev["limit"] != 64 * MiB:
        fail("the limit event: %s" % ev)
    ev = [e for e in c0["events"] if e["kind"] == "spill"][0]
    if ev["tenant"] != "spiller" or ev["limit"] != 256 * MiB:
        fail("the spill event: %s" % ev)
    if not all("events" in c for c in st["cards"]):
        fail("--events: a card without its events")
    say("status --json --events: %s" % ", ".join("%s %s" % (e["kind"], e["tenant"]) for e in c0["events"]))

    # Prometheus: the client's own parser; every value agrees with the JSON.
    text = env.tool(["status", "--prometheus"]).stdout
    try:
        fams = {f.name: f for f in prom_parser.text_string_to_metric_families(text)}
    except Exception as e:   # the parser raises ValueError and others on bad input
        fail("status --prometheus does not parse: %s\n%s" % (e, text))
    st = status(env, schemas, events=True)
    want = {}
    for c in st["cards"]:
        want[("vramshim_card_capacity_bytes", (("card", c["card"]),))] = c["capacity"]
        want[("vramshim_card_headroom_bytes", (("card", c["card"]),))] = c["headroom"]
        want[("vramshim_card_dead_bytes", (("card", c["card"]),))] = c["dead_bytes"]
        for t in c["tenants"]:
            lab = (("card", c["card"]), ("tenant", t["name"]))
            for m, k in (("reserve", "reserve"), ("used", "used"), ("peak", "peak"), ("spilled", "spilled"),
                         ("overhead", "overhead"), ("cached", "cached")):
                want[("vramshim_tenant_%s_bytes" % m, lab)] = t[k]
            want[("vramshim_tenant_processes", lab)] = t["processes"]
            if t["limit"] is not None:
                want[("vramshim_tenant_limit_bytes", lab)] = t["limit"]
            if t["spill_max"] is not None:
                want[("vramshim_tenant_spill_max_bytes", lab)] = t["spill_max"]
        for p in c["processes"]:
            lab = (("card", c["card"]), ("pid", str(p["pid"])), ("tenant", p["tenant"]))
            for m in ("held", "live", "spilled", "overhead", "cached"):
                want[("vramshim_process_%s_bytes" % m, lab)] = p[m]
        for k in ("warn", "limit", "reclaim", "spill", "unanswered"):
            want[("vramshim_events_recent", (("card", c["card"]), ("kind", k)))] = sum(
                1 for e in c["events"] if e["kind"] == k)
    for a in st["actions_failed"]:   # from the history database, when there is one
        k = ("vramshim_threshold_actions_failed", (("card", a["card"]), ("event", a["event"]), ("tenant", a["tenant"])))
        want[k] = want.get(k, 0) + 1
    got = {}
    for f in fams.values():
        if f.type != "gauge":
            fail("%s is a %s, wanted gauge" % (f.name, f.type))
        if not f.documentation:
            fail("%s has no HELP" % f.name)
        for smp in f.samples:
            got[(smp.name, tuple(sorted(smp.labels.items())))] = smp.value
    for k, v in want.items():
        if k not in got or got[k] != v:
            fail("Prometheus %s%s: %s, the JSON says %d" % (k[0], dict(k[1]), got.get(k), v))
    extra = set(got) - set(want) - {k for k in got if k[0] == "vramshim_card_config_generations"}
    if extra:
        fail("Prometheus samples the JSON does not have: %s" % sorted(extra))
    say("status --prometheus: %d families, %d samples, all equal to the JSON's" % (len(fams), len(got)))

    # Dumps: --pid is a dump; --tenant and --all one list document.
    d = schemas.validate("dump", parse(env.tool(["dump", "--pid", str(llm.pid), "--json"]).stdout, "dump --pid"),
                         "dump --pid")
    if d["process"]["pid"] != llm.pid or d["tenant"] != "llm" or sorted(c["index"] for c in d["cards"]) != [0, 1]:
        fail("dump --pid %d: pid %s tenant %s cards %s" % (llm.pid, d["process"]["pid"], d["tenant"],
                                                           [c["index"] for c in d["cards"]]))
    tn = by(d["cards"], "index")[0]["tenant"]
    if tn["reserve"] != 256 * MiB or tn["limit"] != 512 * MiB:
        fail("dump --pid: tenant on card 0 %s" % tn)
    d = schemas.validate("dump", parse(env.tool(["dump", "--pid", str(spill.pid), "--json"]).stdout, "dump"), "dump")
    c = by(d["cards"], "index")[0]
    if c["spilled_bytes"] != 100 * MiB or c["spilled_count"] != 1 or c["tenant"]["spill_max"] != 256 * MiB:
        fail("dump of the spiller: spilled %d in %d, tenant %s" % (c["spilled_bytes"], c["spilled_count"], c["tenant"]))
    live = sorted(p.pid for p in env.procs if p.poll() is None)
    for args, pids in ((["--all"], live), (["--tenant", "guest"], sorted([guest.pid, env.procs[-1].pid]))):
        what = "dump %s --json" % " ".join(args)
        lst = schemas.validate("dump-list", parse(env.tool(["dump"] + args + ["--json"]).stdout, what), what)
        got_pids = sorted(x["process"]["pid"] for x in lst["dumps"])
        if got_pids != pids:
            fail("%s: pids %s, wanted %s" % (what, got_pids, pids))
        for x in lst["dumps"]:
            schemas.validate("dump", x, "a dump in " + what)
        say("%s: one document, %d dumps (pids %s)" % (what, len(lst["dumps"]), got_pids))
    env.stop_all()


# ---- check ---------------------------------------------------------------------
def t_check(env, schemas):
    env.config(CONFIG + "\n[card GPU-00000000-0000-0000-0000-000000000001]\nheadroom = 5%\n\n"
               "[tenant emb]\nreserve = 10%\non_limit = wait:30s\ncards = 1,2\nmatch_exe = embedder,python3\n\n"
               "[tenant default]\nlimit = 128MiB\n")
    r = env.tool(["check", env.conf, "--json", "--card-capacity", "1GiB", "--card-capacity", "512MiB"])
    c = schemas.validate("check", parse(r.stdout, "check --json"), "check --json")
    if not c["valid"] or c["errors"] or len(c["plans"]) != 2 or c["unchecked_cards"] != [2]:
        fail("check with capacities: %s" % c)
    p0 = by(c["plans"][0]["tenants"], "name")
    if p0["llm"]["reserve"] != 256 * MiB or p0["llm"]["limit"] != 512 * MiB or p0["llm"]["warn_at"] != 0.5:
        fail("plan of card 0, llm: %s" % p0["llm"])
    if p0["spiller"]["on_limit"] != "spill" or p0["spiller"]["spill_max"] != 256 * MiB:
        fail("plan of card 0, spiller: %s" % p0["spiller"])
    p1 = by(c["plans"][1]["tenants"], "name")
    if p1["emb"]["reserve"] != 512 * MiB // 10 or p1["emb"]["on_limit"] != "wait" or p1["emb"]["wait_ms"] != 30000:
        fail("plan of card 1, emb: %s" % p1["emb"])
    if c["plans"][1]["unreserved"] != 512 * MiB - c["plans"][1]["reserved"]:
        fail("card 1: reserved + unreserved is not the capacity")
    if c["plans"][0]["no_section"]["can_ever_hold"] != 128 * MiB:
        fail("a tenant in no section follows [tenant default]: %s" % c["plans"][0]["no_section"])
    t = by(c["tenants"], "name")
    if t["emb"]["reserve"] != {"percent": 10} or t["emb"]["cards"] != [1, 2] or \
            t["emb"]["match_exe"] != ["embedder", "python3"] or t["llm"]["cards"] is not None:
        fail("tenants as written: %s" % c["tenants"])
    if [x["uuid"] for x in c["cards"]] != [None, "GPU-00000000-0000-0000-0000-000000000001"]:
        fail("cards as written: %s" % c["cards"])
    # Without capacities: the config as written, no plan.
    c = schemas.validate("check", parse(env.tool(["check", env.conf, "--json"]).stdout, "check"), "check --json")
    if not c["valid"] or c["plans"] or len(c["tenants"]) != 5:
        fail("check without capacities: %s" % c)
    # Invalid: exit 1, still one document that says why.
    with open(env.conf, "a") as f:
        f.write("[tenant bad]\nlimit = lots\nwarn_at = 90\n")
    r = env.tool(["check", env.conf, "--json"], ok=(1,))
    c = schemas.validate("check", parse(r.stdout, "check --json of a bad file"), "check --json of a bad file")
    if c["valid"] or len(c["errors"]) != 2 or c["generation"] is not None or c["tenants"]:
        fail("an invalid config: %s" % c)
    # Parsed, but overcommitted on the card given: invalid, the config still listed.
    small = os.path.join(env.dir, "small.conf")
    with open(small, "w") as f:
        f.write("[tenant a]\nreserve = 1GiB\n")
    r = env.tool(["check", small, "--json", "--card-capacity", "512MiB"], ok=(1,))
    o = schemas.validate("check", parse(r.stdout, "check of an overcommitted card"), "check of an overcommitted card")
    if o["valid"] or len(o["errors"]) != 1 or o["generation"] is None or [x["name"] for x in o["tenants"]] != ["a"] \
            or o["plans"]:
        fail("an overcommitted card: %s" % o)
    say("check --json: valid with two plans, without capacities, invalid (%s)" % c["errors"][0])


# ---- replay --------------------------------------------------------------------
def t_replay(env, schemas):
    trace = os.path.join(env.dir, "t.csv")
    rows = ["Thread,Time,Action,Pointer,Size,Stream"]
    live, t = [], 0
    for i in range(400):   # a sawtooth of mixed sizes
        t += 1
        if len(live) > 20 or (live and i % 3 == 0):
            p, sz = live.pop(0)
            rows.append("0,00:00:%02d.%06d,free,0x%x,%d,0x0" % (t // 1000000, t % 1000000, p, sz))
        else:
            p, sz = 0x100000 * (i + 1), (i % 7 + 1) * 65536 + i
            live.append((p, sz))
            rows.append("0,00:00:%02d.%06d,allocate,0x%x,%d,0x0" % (t // 1000000, t % 1000000, p, sz))
    with open(trace, "w") as f:
        f.write("\n".join(rows) + "\n")
    policies = ["off", "chunks", "vmm", "pytorch", "pytorch-down", "vmm-async", "shim-vmm"]
    r = env.tool(["replay", "--json", "--quiet", "--resolution", "4MiB", "--policy", ",".join(policies), trace])
    lines = r.stdout.splitlines()
    if len(lines) != len(policies):
        fail("replay --json: %d lines for %d policies" % (len(lines), len(policies)))
    for line, pol in zip(lines, policies):
        o = schemas.validate("replay", parse(line, "a replay line"), "replay --json (%s)" % pol)
        if o["policy"] != pol or o["trace"] != trace or o["requests"] != sum(1 for x in rows if ",allocate," in x):
            fail("replay line %s" % o)
        if pol.startswith("shim-") != ("child_max_rss" in o):
            fail("%s: child_max_rss only for shim policies: %s" % (pol, o))
        # The calls on the smallest card: in-process policies only (searched
        # here). No cache: one call per allocation and per free on any card
        # that refuses none, so exactly the unlimited run's.
        if pol.startswith("shim-") == ("smallest_card_driver_calls" in o):
            fail("%s: smallest_card_driver_calls only for in-process policies: %s" % (pol, o))
        if pol == "off" and o["smallest_card_driver_calls"] != o["driver_calls"]:
            fail("off: %s calls on the smallest card, %s without limit" %
                 (o["smallest_card_driver_calls"], o["driver_calls"]))
        if "smallest_card_driver_calls" in o and not (o["smallest_card_driver_calls"] > 0 and
                                                      o["smallest_card_modeled_driver_ms"] > 0):
            fail("%s: no calls on the smallest card: %s" % (pol, o))
        # The trace's floor (tools/vramshim/replay_floor.h), recounted here:
        # growths of the rule that holds at most 1.03 x the live high so far.
        lv = hw = held = 0
        growths = 0
        for x in rows[1:]:
            f = x.split(",")
            lv += int(f[4]) if f[2] == "allocate" else -int(f[4])
            if f[2] == "allocate":
                hw = max(hw, lv)
                if lv > held:
                    growths += 1
                    held = 1.03 * hw
        if o["floor_growths"] != growths or not o["floor_modeled_driver_ms"] > 0:
            fail("%s: floor %s growths, %s ms; the rule counts %d" %
                 (pol, o["floor_growths"], o.get("floor_modeled_driver_ms"), growths))
    say("replay --json: %d lines, one document each" % len(lines))


# ---- samples -------------------------------------------------------------------
def t_samples(env, schemas):
    names = sorted(schemas.by_name)
    for name in names:
        path = os.path.join(env.a.schemas, name + ".sample.json")
        if name == "dump":
            path = os.path.join(os.path.dirname(os.path.abspath(env.a.schemas)), "dump-sample.json")
        if not os.path.exists(path):
            fail("%s.schema.json has no sample (%s)" % (name, path))
        with open(path) as f:
            text = f.read()
        if name == "replay":   # JSON Lines: every line a document
            docs = [parse(ln, path) for ln in text.splitlines() if ln]
        else:
            docs = [parse(text, path)]
        for d in docs:
            schemas.validate(name, d, path)
            if name != "dump" and d.get("schema_version", "").split(".")[0] != "1":
                fail("%s: schema_version %r" % (path, d.get("schema_version")))
    # The schemas are not vacuous: a wrong type fails each.
    bad = {"status": {"schema_version": "1.0", "generator": "vramshim", "ledger_dir": "/x", "cards": [{"card": 0}]},
           "check": {"schema_version": "1.0", "valid": "yes"},
           "replay": {"schema_version": "1.0", "trace": "t", "policy": "off", "requests": -1},
           "dump-list": {"schema_version": "1.0", "generator": "vramshim", "dumps": [{"cards": []}]},
           "history": {"schema_version": "1.0", "generator": "vramshim", "db": "/x", "since": "2026-01-01T00:00:00Z",
                       "until": "2026-01-02T00:00:00Z", "tenants": [{"card": "0", "tenant": "a", "limit": -1}]}}
    for name, doc in bad.items():
        if name in schemas.by_name:
            v = schemas.js.Draft202012Validator(schemas.by_name[name],
                                                resolver=schemas.js.RefResolver.from_schema(
                                                    schemas.by_name[name], store=schemas.store))
            if v.is_valid(doc):
                fail("%s.schema.json accepts a broken document: %s" % (name, doc))
    say("samples: %s validate; broken documents are refused" % ", ".join(names))


def main():
    ap = argparse.ArgumentParser()
    for k in ("tool", "prog", "preload", "sim-dir", "schemas", "work"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("test", choices=["live", "check", "replay", "samples"])
    a = ap.parse_args()
    schemas = Schemas(a.schemas)
    env = Env(a, a.test)
    try:
        globals()["t_" + a.test](env, schemas)
    finally:
        for p in env.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    print("vramshim-test: %s: PASS" % a.test)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()

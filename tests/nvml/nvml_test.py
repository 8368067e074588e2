#!/usr/bin/python3
"""NVML over the sim, alone and under the shim (docs/nvml.md).

usage: nvml_test.py CASE WORKDIR SHIM SIM_DIR NVML_PROG VRAMSHIM_TOOL

  clients    pynvml, `gpustat --json` and `nvitop --once` (PyPI; a client
             that is not installed is skipped with a message, exit 77 when
             none is): over the sim's NVML alone each sees the whole 4 GiB
             card; under the shim with a 1 GiB limit, with another process
             of the tenant holding 256 MiB, each sees the tenant's total
             (1 GiB) and free (768 MiB), and used = total - free.
  server     a server sizing its cache from NVML's free memory (bound
             directly, and through dlopen + dlsym) under a 1 GiB limit with
             context overhead: never refused, the tenant within its limit;
             a context charged when it begins; a tenant over its limit by
             a second context's overhead seen through NVML without a
             wrap-around.
  footprint  four processes of one tenant, each with a context (300 MiB of
             overhead) and 100 MiB allocated: the ledger's usage of the
             tenant equals what the sim's NVML says those processes hold
             (read by nvml_prog: no Python client needed),
             the overhead shown apart in `vramshim status` (JSON,
             Prometheus, text).
  fallback   the same four processes with NVML out of the shim's reach
             (VRAMSHIM_NVML names no library): each context's cost is
             measured from the driver's free memory against the card's
             reading in the ledger; the first one on the card, which has no
             reading to measure against, is charged the cost the second
             measured. In the end the ledger equals what the sim's NVML
             says again. A process outside the shim that holds memory on
             the card is not charged to anybody.
  unlisted   the sim's NVML present but listing every pid as N + pid
             (VRAMSIM_NVML_PID_BASE), as a host's NVML does for a container
             with its own PID namespace: each process finds the pid NVML
             lists it under at its first context (the one that appeared),
             so its context is charged at once by NVML's figure (not
             pending, as without NVML), and the ledger equals what NVML
             says the four processes hold; the outsider is charged to
             nobody.
"""
import json
import os
import re
import subprocess
import sys
import time

MiB = 1 << 20
GiB = 1 << 30
CASE, WORK, SHIM, SIM_DIR, PROG, TOOL = sys.argv[1:7]


def env(shim, config=None, overhead="0", tenant=None):
    e = dict(os.environ)
    e.update({
        "LD_LIBRARY_PATH": SIM_DIR,
        "VRAMSIM_STATE": os.path.join(WORK, "sim.state"),
        "VRAMSIM_CARDS": "4GiB",
        "VRAMSIM_CONTEXT_OVERHEAD": overhead,
    })
    for k in ("LD_PRELOAD", "VRAMSHIM_CONFIG", "VRAMSHIM_TENANT", "VRAMSHIM_ON_ERROR"):
        e.pop(k, None)
    if shim:
        e["LD_PRELOAD"] = SHIM
    if config:
        e["VRAMSHIM_CONFIG"] = config
    if tenant:
        e["VRAMSHIM_TENANT"] = tenant
    return e


def write_config(limit):
    ledger = os.path.join(WORK, "ledger")
    os.makedirs(ledger, mode=0o700, exist_ok=True)
    path = os.path.join(WORK, "vramshim.conf")
    with open(path, "w") as f:
        f.write("[global]\nledger_dir = %s\ndump_dir = %s\n\n[tenant app]\nlimit = %s\n"
                % (ledger, os.path.join(WORK, "dumps"), limit))
    return path


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok: " + msg)


def holder(e, mib):
    p = subprocess.Popen([PROG, "hold", str(mib)], env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("ready"):
        fail("holder of %d MiB did not start (%r)" % (mib, line))
    return p


def release(procs):
    for p in procs:
        p.stdin.close()
    for p in procs:
        # a sanitizer's report, or any error of the shim, fails the holder
        if p.wait(timeout=60) != 0:
            fail("holder %d exited with %d" % (p.pid, p.returncode))


def have(module):
    r = subprocess.run([sys.executable, "-c", "import " + module], capture_output=True)
    if r.returncode:
        print("skip: the PyPI package for %s is not installed (scripts/setup installs it)" % module)
    return r.returncode == 0


PYNVML = r"""
import json, pynvml as n
n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
m = n.nvmlDeviceGetMemoryInfo(h)
m2 = n.nvmlDeviceGetMemoryInfo(h, n.nvmlMemory_v2)
print(json.dumps({"count": n.nvmlDeviceGetCount(), "total": m.total, "free": m.free, "used": m.used,
                  "total2": m2.total, "free2": m2.free, "used2": m2.used, "reserved2": m2.reserved,
                  "procs": {p.pid: p.usedGpuMemory for p in n.nvmlDeviceGetComputeRunningProcesses(h)}}))
"""


def client_env(e):
    """A Python client's environment: under an ASan build of the shim, LeakSanitizer would report
    the interpreter's own allocations left at exit (the shim's leaks are the C tests' to find)."""
    e = dict(e)
    e["ASAN_OPTIONS"] = (e.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    return e


def pynvml_view(e):
    r = subprocess.run([sys.executable, "-c", PYNVML], env=client_env(e), capture_output=True, text=True, timeout=120)
    if r.returncode:
        fail("pynvml: " + r.stderr)
    return json.loads(r.stdout)


def gpustat_view(e):
    r = subprocess.run([sys.executable, "-m", "gpustat", "--json"], env=client_env(e), capture_output=True, text=True,
                       timeout=120)
    if r.returncode:
        fail("gpustat: " + r.stderr)
    g = json.loads(r.stdout)["gpus"]
    return len(g), g[0]["memory.total"], g[0]["memory.used"]   # MiB


def nvitop_view(e):
    r = subprocess.run([sys.executable, "-m", "nvitop", "--once"], env=client_env(e), capture_output=True, text=True,
                       timeout=120)
    if r.returncode:
        fail("nvitop: " + r.stderr + r.stdout)
    # the card's line: "<used> / <total>MiB" (used as nvitop prints sizes: 0B, 256.0MiB, 1.25GiB)
    m = re.findall(r"(\d+(?:\.\d+)?)(B|KiB|MiB|GiB) / (\d+)MiB", r.stdout)
    if len(m) != 1:
        fail("nvitop --once: no single card line in\n" + r.stdout)
    used, unit, total = m[0]
    scale = {"B": 1, "KiB": 1 << 10, "MiB": MiB, "GiB": GiB}[unit]
    return float(used) * scale, int(total) * MiB


def case_clients():
    clients = [c for c in ("pynvml", "gpustat", "nvitop") if have(c)]
    if not clients:
        sys.exit(77)
    config = write_config("1GiB")
    for shim in (False, True):
        e = env(shim, config if shim else None, tenant="app")
        held = holder(e, 256)
        want_total = GiB if shim else 4 * GiB
        want_free = want_total - 256 * MiB
        what = "under the shim (tenant limit 1 GiB)" if shim else "over the sim's NVML alone"
        if "pynvml" in clients:
            v = pynvml_view(e)
            check(v["count"] == 1, "pynvml %s: one card" % what)
            check(v["total"] == want_total and v["free"] == want_free and v["used"] == want_total - want_free,
                  "pynvml %s: total %d free %d used %d" % (what, v["total"], v["free"], v["used"]))
            check(v["total2"] == want_total and v["free2"] == want_free and v["used2"] == 256 * MiB
                  and v["reserved2"] == 0, "pynvml %s: memory info v2 the same, reserved 0" % what)
            check(v["procs"] == {str(held.pid): 256 * MiB}, "pynvml %s: the holder listed with its 256 MiB" % what)
        if "gpustat" in clients:
            n, total, used = gpustat_view(e)
            check(n == 1 and total == want_total // MiB and used == 256,
                  "gpustat --json %s: %d MiB of %d MiB used" % (what, used, total))
        if "nvitop" in clients:
            used, total = nvitop_view(e)
            check(total == want_total and used == 256 * MiB,
                  "nvitop --once %s: %d of %d bytes used" % (what, used, total))
        release([held])


def status_json(config):
    r = subprocess.run([TOOL, "status", "--json"], env=env(False, config), capture_output=True, text=True,
                       timeout=120)
    if r.returncode:
        fail("vramshim status --json: " + r.stderr)
    return json.loads(r.stdout)


def tenant_of(st, name):
    for card in st["cards"]:
        for t in card["tenants"]:
            if t["name"] == name:
                return card, t
    return None, None


def case_server():
    config = write_config("1GiB")
    for mode in ("direct", "dl"):
        e = env(True, config, overhead="300MiB", tenant="app")
        r = subprocess.run([PROG, "server", mode, "64"], env=e, capture_output=True, text=True, timeout=300)
        print(r.stdout.strip())
        check(r.returncode == 0 and " 0 refused" in r.stdout,
              "server (%s NVML) sized its cache from NVML under a 1 GiB limit and was never refused" % mode)
        m = re.search(r"nvml total (\d+) free (\d+) used (\d+); cache (\d+)", r.stdout)
        total, free, used, cache = (int(x) for x in m.groups())
        check(total == GiB and used == total - free and free <= total,
              "server (%s): NVML said total %d (the limit), used = total - free" % (mode, total))
        check(cache > 0 and cache <= free, "server (%s): a cache of %d bytes within NVML's free" % (mode, cache))
    # a process that only reads NVML gets the tenant's view too, and a
    # tenant over its limit (overhead charged) never wraps around
    e = env(True, config, overhead="300MiB", tenant="app")
    # a context is charged when it begins: 700 MiB + 300 MiB fits the 1 GiB
    # limit; a second process's context (300 MiB more, which the driver has
    # already taken) puts the tenant over it
    held = [holder(e, 700)]
    card, t = tenant_of(status_json(config), "app")
    check(t and t["used"] == 1000 * MiB and t["overhead"] == 300 * MiB,
          "a context's overhead is charged when it begins, before the first allocation: %r" % t)
    held.append(holder(e, 0))
    card, t = tenant_of(status_json(config), "app")
    check(t["used"] == 1300 * MiB and t["overhead"] == 600 * MiB,
          "the tenant holds 1300 MiB (over its limit by its second context)")
    if have("pynvml"):
        v = pynvml_view(e)
        check(v["total"] == GiB and v["free"] == 0 and v["used"] == GiB,
              "NVML-only reader over the limit: total %d free %d used %d, no wrap-around"
              % (v["total"], v["free"], v["used"]))
    release(held)


def case_footprint():
    config = write_config("8GiB")
    e = env(True, config, overhead="300MiB", tenant="app")
    procs = [holder(e, 100) for _ in range(4)]
    pids = sorted(p.pid for p in procs)
    # what the sim's NVML says they hold, read without the shim
    card, t, nvml_sum = ledger_meets_nvml(config, pids)
    check(t["used"] == nvml_sum == 4 * 400 * MiB,
          "ledger usage of the tenant %d = what NVML says its four processes hold" % t["used"])
    check(t["overhead"] == 4 * 300 * MiB, "of it, overhead %d (4 contexts)" % t["overhead"])
    mine = [p for p in card["processes"] if p["pid"] in pids]
    check(len(mine) == 4 and all(p["overhead"] == 300 * MiB and p["held"] == 400 * MiB for p in mine),
          "each process: held 400 MiB, overhead 300 MiB")
    prom = subprocess.run([TOOL, "status", "--prometheus"], env=env(False, config), capture_output=True,
                          text=True, timeout=120).stdout
    try:
        from prometheus_client.parser import text_string_to_metric_families
        fams = {f.name: f for f in text_string_to_metric_families(prom)}
        over = [s.value for s in fams["vramshim_tenant_overhead_bytes"].samples if s.labels["tenant"] == "app"]
        check(over == [4 * 300 * MiB], "Prometheus: vramshim_tenant_overhead_bytes")
    except ImportError:
        print("skip: prometheus_client is not installed")
    text = subprocess.run([TOOL, "status"], env=env(False, config), capture_output=True, text=True,
                          timeout=120).stdout
    check("overhead" in text, "text status shows the overhead column")
    # a dump of one of them carries the tenant's overhead apart (dump 1.2)
    r = subprocess.run([TOOL, "dump", "--pid", str(pids[0]), "--json", "--timeout", "30"], env=env(False, config),
                       capture_output=True, text=True, timeout=120)
    if r.returncode:
        fail("vramshim dump --pid: " + r.stderr)
    dump = json.loads(r.stdout)
    try:
        import jsonschema
        schema_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "dump.schema.json")
        with open(schema_path) as f:
            jsonschema.validate(dump, json.load(f))
        print("ok: the dump validates against docs/dump.schema.json")
    except ImportError:
        print("skip: jsonschema is not installed")
    tenant = dump["cards"][0]["tenant"]
    check(tenant["overhead"] == 4 * 300 * MiB and tenant["usage"] == 4 * 400 * MiB,
          "dump: tenant usage %d, overhead %d" % (tenant["usage"], tenant["overhead"]))
    release(procs)


def nvml_holds(pids):
    r = subprocess.run([PROG, "procs"], env=env(False), capture_output=True, text=True, timeout=120)
    if r.returncode:
        fail("nvml_prog procs: " + r.stderr)
    held_by = dict((int(a), int(b)) for a, b in (line.split() for line in r.stdout.splitlines()))
    return sum(held_by.get(p, 0) for p in pids)


def ledger_meets_nvml(config, pids):
    """Waits (60 s at most) until the ledger's usage of tenant app equals
    what the sim's NVML says pids hold; its card and tenant, and that sum."""
    deadline = time.time() + 60
    while True:
        nvml_sum = nvml_holds(pids)
        card, t = tenant_of(status_json(config), "app")
        if t and t["used"] == nvml_sum:
            return card, t, nvml_sum
        if time.time() > deadline:
            fail("ledger usage %r never equalled NVML's %d" % (t and t["used"], nvml_sum))
        time.sleep(0.5)


def four_meet_nvml(config, e, first, how):
    """first and three more holders of 100 MiB (300 MiB of context each):
    the tenant's ledger usage equals what the sim's NVML says the four hold,
    the outsider's memory in none of it. The holders, their pids, the card
    and the tenant."""
    procs = [first] + [holder(e, 100) for _ in range(3)]
    pids = sorted(p.pid for p in procs)
    card, t, nvml_sum = ledger_meets_nvml(config, pids)
    check(t["used"] == nvml_sum == 4 * 400 * MiB,
          "%s, ledger usage of the tenant %d = what NVML says its four processes hold" % (how, t["used"]))
    check(t["overhead"] == 4 * 300 * MiB, "of it, overhead %d (4 contexts; the outsider's 800 MiB in none)"
          % t["overhead"])
    return procs, pids, card, t


def case_unlisted():
    import shutil
    shutil.rmtree(os.path.join(WORK, "ledger"), ignore_errors=True)   # a card nobody measured yet
    config = write_config("8GiB")
    outsider = holder(env(False, overhead="300MiB"), 500)
    e = env(True, config, overhead="300MiB", tenant="app")
    # NVML is there but reports pids the processes do not see as theirs
    # (a host's NVML seen from a container with its own PID namespace)
    base = 1000000
    e["VRAMSIM_NVML_PID_BASE"] = str(base)
    log = os.path.join(WORK, "unlisted-first.log")
    if os.path.exists(log):
        os.unlink(log)
    first = holder(dict(e, VRAMSHIM_LOG="info,file:" + log), 100)
    # found in NVML's list at its first context: measured at once, though
    # the card has no reading yet (the way without NVML would wait for one)
    card, t = tenant_of(status_json(config), "app")
    check(t and t["used"] == 400 * MiB and t["overhead"] == 300 * MiB,
          "the first process is charged its context at once, by NVML's figure (%r)" % t)
    with open(log) as f:
        said = f.read()
    check("as pid %d" % (base + first.pid) in said,
          "its log names the pid NVML lists it under (%d)" % (base + first.pid))
    procs = four_meet_nvml(config, e, first, "found under their host pids")[0]
    release(procs + [outsider])


def case_fallback():
    import shutil
    shutil.rmtree(os.path.join(WORK, "ledger"), ignore_errors=True)   # a card nobody measured yet
    config = write_config("8GiB")
    # a program outside the shim holding 500 MiB (and a context) on the card
    outsider = holder(env(False, overhead="300MiB"), 500)
    e = env(True, config, overhead="300MiB", tenant="app")
    e["VRAMSHIM_NVML"] = os.path.join(WORK, "no-such-libnvidia-ml.so.1")
    first = holder(e, 100)
    # alone on the card, the first process has no reading to measure its context against
    card, t = tenant_of(status_json(config), "app")
    check(t and t["used"] == 100 * MiB and t["overhead"] == 0,
          "the first process without NVML: 100 MiB counted, its context not charged yet (%r)" % (t and t["overhead"]))
    procs, pids, card, t = four_meet_nvml(config, e, first, "without NVML")
    mine = [p for p in card["processes"] if p["pid"] in pids]
    check(len(mine) == 4 and all(p["overhead"] == 300 * MiB for p in mine), "each process: overhead 300 MiB")
    # a context that ends gives its share back
    release(procs[:1])
    deadline = time.time() + 60
    while True:
        card, t = tenant_of(status_json(config), "app")
        if t and t["used"] == 3 * 400 * MiB:
            break
        if time.time() > deadline:
            fail("the first process's charge was not given back: %r" % t)
        time.sleep(0.5)
    check(t["overhead"] == 3 * 300 * MiB, "after one exits: overhead %d" % t["overhead"])
    release(procs[1:])
    # the card's reading outlives its processes: a new first process is
    # measured at once (the outsider still holds its 800 MiB)
    again = holder(e, 100)
    card, t = tenant_of(status_json(config), "app")
    check(t and t["used"] == 400 * MiB and t["overhead"] == 300 * MiB,
          "a later first process is measured against the card's reading: %r" % (t and t["overhead"]))
    release([again, outsider])


os.makedirs(WORK, exist_ok=True)
{"clients": case_clients, "server": case_server, "footprint": case_footprint, "fallback": case_fallback,
 "unlisted": case_unlisted}[CASE]()
print("PASS " + CASE)

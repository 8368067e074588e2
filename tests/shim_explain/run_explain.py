#!/usr/bin/env python3
"""The explain concern inside the shim, with real processes over the sim.

usage: run_explain.py --prog P --tool T --preload LIB --sim-dir D --schema S
                      --work DIR --arena off|chunks|vmm TEST
TEST: idle | refused | parallel | tenant | trace | signal | fork | errors | pools
       (exit 77: skipped)

Each test gets DIR/<test>-<arena>/ with its own config (ledger_dir,
dump_dir, timeline_interval), sim state and shim log. The preload is set for
the program under test only, never for this script or the tool."""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

MiB = 1 << 20
# Seconds a condition that must come true (an answer, a dump written, a
# process stopped) may take before a case calls it broken: generous, for a
# sanitizer build on a loaded 2-core machine. Cases print how fast it was.
EVENTUALLY = 30


def fail(msg):
    print("vramshim-test: FAIL: " + msg)
    sys.exit(1)


class Env:
    def __init__(self, a, test):
        self.a = a
        self.dir = os.path.join(a.work, "%s-%s" % (test, a.arena))
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.ledger = os.path.join(self.dir, "ledger")
        self.dumps = os.path.join(self.dir, "dumps")
        self.log = os.path.join(self.dir, "shim.log")
        self.conf = os.path.join(self.dir, "vramshim.conf")
        extra = "dump_signal = USR1\n" if test == "signal" else ""
        if test == "errors":   # dump_dir is a symlink: the shim must refuse to write there
            os.makedirs(os.path.join(self.dir, "elsewhere"))
            os.symlink(os.path.join(self.dir, "elsewhere"), os.path.join(self.dir, "link"))
            self.dumps = os.path.join(self.dir, "link")
        with open(self.conf, "w") as f:
            f.write(("[global]\narena = %s\nledger_dir = %s\ndump_dir = %s\ntimeline_interval = 100ms\n"
                     % (a.arena, self.ledger, self.dumps)) + extra +
                    "\n[tenant alpha]\nlimit = 512MiB\n\n[tenant beta]\nlimit = 512MiB\n")
        self.base = dict(os.environ)
        self.base.pop("LD_PRELOAD", None)
        self.base["VRAMSHIM_CONFIG"] = self.conf

    def prog_env(self, extra=None):
        e = dict(self.base)
        e.update({"LD_PRELOAD": self.a.preload, "LD_LIBRARY_PATH": self.a.sim_dir,
                  "VRAMSIM_STATE": os.path.join(self.dir, "sim.state"), "VRAMSIM_CARDS": "1GiB",
                  "VRAMSHIM_LOG": "info,file:" + self.log})
        e.update(extra or {})
        return e

    def start(self, args, extra=None):
        p = subprocess.Popen([self.a.prog] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env=self.prog_env(extra), text=True)
        line = p.stdout.readline().split()
        if not line:
            p.kill()
            fail("%s said nothing (exit %s); log:\n%s" % (args, p.wait(), self.read_log()))
        return p, line

    def stop(self, p):
        p.stdin.close()
        rc = p.wait(timeout=2 * EVENTUALLY)
        if rc != 0:
            fail("program exited %d" % rc)

    def tool(self, args, timeout=2 * EVENTUALLY):
        # A dump request waits EVENTUALLY for its answer unless the case sets
        # its own --timeout: on a loaded machine (a sanitizer build, two
        # cores) the tool's default 2 s is not what these cases are about.
        if args and args[0] == "dump" and "--timeout" not in args:
            args = args + ["--timeout", str(EVENTUALLY)]
        return subprocess.run([self.a.tool] + args, capture_output=True, text=True, env=self.base, timeout=timeout)

    def arenas(self):
        """The modes a dump may name: vmm falls back to chunks when the driver
        refuses the address range (the shim logs it; seen under TSan)."""
        if self.a.arena == "vmm" and "using chunks" in self.read_log():
            return ("vmm", "chunks")
        return (self.a.arena,)

    def read_log(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""


def load_validator(schema_path):
    try:
        import jsonschema
    except ImportError:
        print("vramshim: python3-jsonschema is not installed; skipping")
        sys.exit(77)
    with open(schema_path) as f:
        return jsonschema.Draft202012Validator(json.load(f))


def dump_list(text):
    """--tenant, --all: one document listing the dumps (docs/dump-format.md,
    "Lists of dumps"; its schema is checked by tests/outputs)."""
    doc = json.loads(text)
    if doc.get("generator") != "vramshim" or not doc.get("schema_version", "").startswith("1."):
        fail("not a dump list: %s" % sorted(doc))
    return doc["dumps"]


def check_dump(d, validator, pid, live, count, arena):
    errs = sorted(validator.iter_errors(d), key=lambda e: list(e.path))
    if errs:
        fail("dump does not validate: %s at %s" % (errs[0].message, list(errs[0].path)))
    if d["process"]["pid"] != pid:
        fail("dump of pid %s, wanted %d" % (d["process"]["pid"], pid))
    c = [c for c in d["cards"] if c["index"] == 0]
    if not c:
        fail("no card 0 in the dump")
    c = c[0]
    if c["arena"] not in arena:
        fail("arena %s, wanted %s" % (c["arena"], " or ".join(arena)))
    if c["live_bytes"] != live or c["live_count"] != count:
        fail("live %d bytes in %d allocations, the program holds %d in %d" % (c["live_bytes"], c["live_count"], live, count))
    if arena == ("off",):
        got = sorted(b["size"] for r in c["regions"] for b in r["blocks"] if b["state"] == "live")
        if sum(got) != live or len(got) != count:
            fail("arena = off map: %d live blocks of %d bytes" % (len(got), sum(got)))
    if not c["timeline"]:
        fail("no timeline samples (interval 100 ms)")
    return c


SIZES = [MiB, 3 * MiB + 5, 17 * MiB, 4096, 100]


def t_idle(env, v):
    p, line = env.start(["idle"] + [str(s) for s in SIZES])
    pid, live, count = int(line[1]), int(line[2]), int(line[3])
    time.sleep(0.5)   # the program is now blocked in read()
    t0 = time.monotonic()
    r = env.tool(["dump", "--pid", str(pid), "--json"])
    dt = time.monotonic() - t0
    if r.returncode != 0:
        fail("vramshim dump --pid exited %d: %s\nlog:\n%s" % (r.returncode, r.stderr, env.read_log()))
    c = check_dump(json.loads(r.stdout), v, pid, live, count, env.arenas())
    # The text view of the same process works too.
    r2 = env.tool(["dump", "--pid", str(pid)])
    if r2.returncode != 0 or "card 0" not in r2.stdout.lower() and "card" not in r2.stdout:
        fail("text view: %d %s" % (r2.returncode, r2.stderr))
    env.stop(p)
    print("vramshim-test: idle process (pid %d) answered in %.3f s: %d bytes live in %d allocations, %d samples"
          % (pid, dt, c["live_bytes"], c["live_count"], len(c["timeline"])))


def t_refused(env, v):
    p, line = env.start(["refuse"])
    pid = int(line[1])
    deadline = time.monotonic() + EVENTUALLY
    files = []
    while time.monotonic() < deadline:
        files = dump_files(env)
        if files and "dump written to" in env.read_log():
            break
        time.sleep(0.05)
    env.stop(p)
    if len(files) != 1:
        fail("wanted one automatic dump in %s, found %s; log:\n%s" % (env.dumps, files, env.read_log()))
    path = os.path.join(env.dumps, files[0])
    log = env.read_log()
    m = re.search(r"vramshim: card \S+: an allocation of [^;]+ was refused; dump written to (\S+)", log)
    if not m or os.path.realpath(m.group(1)) != os.path.realpath(path):
        fail("the log does not name the dump %s:\n%s" % (path, log))
    with open(path) as f:
        d = json.load(f)
    if d["reason"] != "refused":
        fail("reason %s" % d["reason"])
    check_dump(d, v, pid, 8 * MiB, 1, env.arenas())
    if os.stat(path).st_mode & 0o077 or os.stat(env.dumps).st_mode & 0o077:
        fail("dump file or dir readable by others")
    print("vramshim-test: refused allocation dumped: %s" % m.group(0))


def t_parallel(env, v):
    p, line = env.start(["idle"] + [str(s) for s in SIZES])
    pid, live, count = int(line[1]), int(line[2]), int(line[3])
    time.sleep(0.3)
    cmd = [env.a.tool, "dump", "--pid", str(pid), "--json", "--timeout", str(EVENTUALLY)]
    t0 = time.monotonic()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env.base)
             for _ in range(2)]
    outs = [q.communicate(timeout=2 * EVENTUALLY) for q in procs]
    dt = time.monotonic() - t0
    for q, (out, err) in zip(procs, outs):
        if q.returncode != 0:
            fail("a parallel request failed: %s" % err)
        check_dump(json.loads(out), v, pid, live, count, env.arenas())
    env.stop(p)
    print("vramshim-test: two requests at once both answered, complete, in %.3f s" % dt)


def t_tenant(env, v):
    procs = []
    for tenant, sizes in (("alpha", [MiB]), ("alpha", [2 * MiB]), ("beta", [3 * MiB])):
        p, line = env.start(["idle"] + [str(s) for s in sizes], {"VRAMSHIM_TENANT": tenant})
        procs.append((p, int(line[1]), tenant, int(line[2])))
    time.sleep(0.3)

    def ask(args):
        r = env.tool(["dump"] + args + ["--json"])
        if r.returncode != 0:
            fail("vramshim dump %s exited %d: %s" % (args, r.returncode, r.stderr))
        ds = dump_list(r.stdout)
        for d in ds:
            want = [x for x in procs if x[1] == d["process"]["pid"]]
            if not want:
                fail("a dump of pid %d, not one of ours" % d["process"]["pid"])
            check_dump(d, v, want[0][1], want[0][3], 1, env.arenas())
            if d["tenant"] != want[0][2]:
                fail("pid %d: tenant %s, wanted %s" % (want[0][1], d["tenant"], want[0][2]))
        return sorted(d["process"]["pid"] for d in ds)

    alpha = ask(["--tenant", "alpha"])
    if alpha != sorted(x[1] for x in procs if x[2] == "alpha"):
        fail("--tenant alpha gave pids %s" % alpha)
    allp = ask(["--all"])
    if allp != sorted(x[1] for x in procs):
        fail("--all gave pids %s" % allp)
    r = env.tool(["dump", "--tenant", "nobody"])
    if r.returncode == 0 or "no process of tenant 'nobody'" not in r.stderr:
        fail("--tenant nobody: %d %s" % (r.returncode, r.stderr))
    r = env.tool(["dump", "--pid", str(os.getpid())])
    if r.returncode == 0 or "process %d has no slot" % os.getpid() not in r.stderr:
        fail("--pid of a process without the shim: %d %s" % (r.returncode, r.stderr))
    for p, *_ in procs:
        env.stop(p)
    print("vramshim-test: --tenant alpha -> %s, --all -> %s; unknown pid and tenant refused with a message"
          % (alpha, allp))


def dump_files(env):
    """The finished dumps: a dump is written under a hidden '.NAME.part' and renamed when complete."""
    if not os.path.isdir(env.dumps):
        return []
    return sorted(f for f in os.listdir(env.dumps) if not f.startswith("."))


def wait_dumps(env, n, timeout=EVENTUALLY):
    deadline = time.monotonic() + timeout
    files = []
    while time.monotonic() < deadline:
        files = dump_files(env)
        if len(files) >= n:
            break
        time.sleep(0.05)
    return files


def t_signal(env, v):
    p, line = env.start(["idle"] + [str(s) for s in SIZES])
    pid, live, count = int(line[1]), int(line[2]), int(line[3])
    time.sleep(0.3)
    os.kill(pid, signal.SIGUSR1)   # the program itself has no handler: the shim's must take it
    files = wait_dumps(env, 1)
    time.sleep(0.2)
    if p.poll() is not None:
        fail("the program died of the signal (exit %s)" % p.returncode)
    if len(files) != 1:
        fail("wanted one dump after SIGUSR1, found %s; log:\n%s" % (files, env.read_log()))
    with open(os.path.join(env.dumps, files[0])) as f:
        d = json.load(f)
    if d["reason"] != "signal":
        fail("reason %s" % d["reason"])
    check_dump(d, v, pid, live, count, env.arenas())
    if "dump signal received; dump written to" not in env.read_log():
        fail("no log line for the signal dump:\n%s" % env.read_log())
    env.stop(p)
    print("vramshim-test: dump_signal = USR1: the blocked program dumped %d live bytes, still running" % live)


def t_fork(env, v):
    p, line = env.start(["fork", str(5 * MiB), str(3 * MiB)])
    cpid, size = int(line[1]), int(line[2])
    time.sleep(0.3)
    r = env.tool(["dump", "--pid", str(cpid), "--json"])
    if r.returncode != 0:
        fail("dump of the forked child: %d %s\nlog:\n%s" % (r.returncode, r.stderr, env.read_log()))
    check_dump(json.loads(r.stdout), v, cpid, size, 1, env.arenas())
    r = env.tool(["dump", "--pid", str(p.pid), "--json"])   # the parent, blocked in waitpid
    if r.returncode != 0:
        fail("dump of the parent: %d %s" % (r.returncode, r.stderr))
    check_dump(json.loads(r.stdout), v, p.pid, 5 * MiB, 1, env.arenas())
    env.stop(p)
    print("vramshim-test: a forked child answers with its own thread and only its own %d bytes" % size)


def wait_stopped(pid, timeout=EVENTUALLY):
    """Returns once every thread of pid is in the stopped state (T)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        states = []
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        if states and all(st == "T" for st in states):
            return
        time.sleep(0.01)
    fail("process %d did not stop" % pid)


def t_errors(env, v):
    p, line = env.start(["idle", str(MiB)])
    pid = int(line[1])
    time.sleep(0.3)
    # A generous timeout: on a loaded machine the default 2 s is not what this case is about.
    r = env.tool(["dump", "--pid", str(pid), "--timeout", "10"])
    if r.returncode == 0 or "process %d could not write its dump" % pid not in r.stderr or "symlink" not in r.stderr:
        fail("dump_dir a symlink: %d %s" % (r.returncode, r.stderr))
    if os.listdir(os.path.join(env.dir, "elsewhere")):
        fail("a dump was written through the symlink")
    os.kill(pid, signal.SIGSTOP)
    wait_stopped(pid)   # SIGSTOP is asynchronous: the shim's thread could still answer
    try:
        t0 = time.monotonic()
        r = env.tool(["dump", "--pid", str(pid), "--timeout", "0.5"])
        dt = time.monotonic() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    if r.returncode == 0 or "process %d did not answer the dump request within 0.5 s" % pid not in r.stderr:
        fail("stopped process: %d %s" % (r.returncode, r.stderr))
    if dt > EVENTUALLY / 2:
        fail("--timeout 0.5 took %.2f s: the tool did not give up at its timeout" % dt)
    env.stop(p)
    print("vramshim-test: errors named with the pid: %s" % r.stderr.strip())


def t_trace(env, v):
    pattern = os.path.join(env.dir, "trace-%p-%d.csv")
    r = subprocess.run([env.a.prog, "trace", "7", "3000"], capture_output=True, text=True,
                       env=env.prog_env({"VRAMSHIM_TRACE": pattern}), timeout=60)
    if r.returncode != 0:
        fail("trace run exited %d: %s" % (r.returncode, r.stderr))
    m = re.match(r"peak (\d+) events (\d+)", r.stdout)
    peak, events = int(m.group(1)), int(m.group(2))
    files = [f for f in os.listdir(env.dir) if f.startswith("trace-")]
    if len(files) != 1:
        fail("wanted one trace file, found %s" % files)
    path = os.path.join(env.dir, files[0])
    with open(path) as f:
        lines = f.read().splitlines()
    if lines[0] != "Thread,Time,Action,Pointer,Size,Stream" or len(lines) != events + 1:
        fail("trace has %d lines for %d events" % (len(lines) - 1, events))
    if sum(1 for ln in lines if ",allocate failure," in ln) != 1:
        fail("the refused request is not in the trace")
    out = env.tool(["replay", "--policy", "off", "--json", path], timeout=60)
    if out.returncode != 0:
        fail("replay exited %d: %s" % (out.returncode, out.stderr))
    rec = json.loads(out.stdout.splitlines()[0])
    if rec["peak_live"] != peak:
        fail("replay peak live %d, the run's %d" % (rec["peak_live"], peak))
    print("vramshim-test: trace of %d events replays to the run's peak live %d bytes" % (events, peak))


def t_pools(env, v):
    """The driver's pools in a dump (1.3): a pool of the program's own that
    keeps 8 MiB it served, and the graph pool that keeps the 4 MiB a graph
    allocated and freed, beside 1 MiB held with cuMemAlloc; the tenant is
    charged all three (the ledger's usage); the public API
    (vramshim_driver_pools) says what the dump says."""
    p, line = env.start(["pools", "8", "4"])
    if line[0] != "pooled":
        fail("pools: said %s" % line)
    pid = int(line[1])
    r = env.tool(["dump", "--pid", str(pid), "--json"])
    if r.returncode != 0:
        fail("vramshim dump --pid exited %d: %s\nlog:\n%s" % (r.returncode, r.stderr, env.read_log()))
    d = json.loads(r.stdout)
    c = check_dump(d, v, pid, MiB, 1, env.arenas())
    if d["schema_version"] != "1.3":
        fail("schema_version %s" % d["schema_version"])
    pool, graph = c["pool_reserved_bytes"], c["graph_reserved_bytes"]
    if not 8 * MiB <= pool <= 64 * MiB:
        fail("pool_reserved_bytes %d, the pool keeps the 8 MiB it served" % pool)
    if not 4 * MiB <= graph <= 64 * MiB:
        fail("graph_reserved_bytes %d, the graph pool keeps the 4 MiB the graph used" % graph)
    if c["arena"] == "off" and c["reserved_bytes"] != MiB:   # the pools' memory is not in it
        fail("reserved_bytes %d: the program's one live MiB" % c["reserved_bytes"])
    if c["tenant"]["usage"] < pool + graph + MiB:
        fail("the tenant is charged %d, below the pools' %d + %d" % (c["tenant"]["usage"], pool, graph))
    # The program's own view (vramshim_driver_pools, read before the dump;
    # it has made no call since) says the same.
    if (int(line[2]), int(line[3])) != (pool, graph):
        fail("vramshim_driver_pools said pool %s graph %s, the dump %d and %d" % (line[2], line[3], pool, graph))
    r2 = env.tool(["dump", "--pid", str(pid)])
    pools_line = re.search(r"^  pools +\S+ MiB reserved by the driver's memory pools", r2.stdout, re.M)
    graphs_line = re.search(r"^  graphs +\S+ MiB reserved by the graph memory pool", r2.stdout, re.M)
    if r2.returncode != 0 or not pools_line or not graphs_line:
        fail("text view without the pools' lines:\n%s%s" % (r2.stdout, r2.stderr))
    path = os.path.join(env.dir, "pools.json")
    with open(path, "w") as f:
        f.write(r.stdout)
    r3 = env.tool(["dump", "--diff", path, path])
    if r3.returncode != 0 or not re.search(r"^  driver memory pools +\S+ MiB -> \S+ MiB +\+0 B", r3.stdout, re.M) \
            or not re.search(r"^  graph memory pool +\S+ MiB -> \S+ MiB", r3.stdout, re.M):
        fail("the diff without the pools' rows:\n%s%s" % (r3.stdout, r3.stderr))
    env.stop(p)
    print("vramshim-test: pools: the program's pool keeps %d MiB, the graph pool %d MiB; tenant usage %d MiB"
          % (pool // MiB, graph // MiB, c["tenant"]["usage"] // MiB))


def main():
    ap = argparse.ArgumentParser()
    for k in ("prog", "tool", "preload", "sim-dir", "schema", "work", "arena"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("test", choices=["idle", "refused", "parallel", "tenant", "trace", "signal", "fork", "errors",
                                     "pools"])
    a = ap.parse_args()
    v = load_validator(a.schema)
    env = Env(a, a.test)
    globals()["t_" + a.test](env, v)
    print("vramshim-test: %s (arena %s): PASS" % (a.test, a.arena))


if __name__ == "__main__":
    main()

"""Helpers of the history tests: a work folder with a config and a ledger
folder, workloads under the shim over the sim (holder.c), the tool."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

MiB = 1 << 20
GiB = 1 << 30


def args():
    p = argparse.ArgumentParser()
    for a in ("--tool", "--holder", "--shim", "--sim-dir", "--schemas", "--work"):
        p.add_argument(a, required=True)
    return p.parse_args()


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


class Env:
    """One test's folder: vramshim.conf, ledger/, the sim's state file."""

    def __init__(self, a, name, config):
        self.a = a
        self.dir = os.path.join(a.work, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.ledger = os.path.join(self.dir, "ledger")
        self.db = os.path.join(self.dir, "history.db")
        self.conf = os.path.join(self.dir, "vramshim.conf")
        with open(self.conf, "w") as f:
            f.write("[global]\nledger_dir = %s\ndump_dir = %s\narena = off\n%s" %
                    (self.ledger, os.path.join(self.dir, "dumps"), config))
        self.env = dict(os.environ)
        for k in ("VRAMSHIM_TENANT", "VRAMSHIM_ON_ERROR", "VRAMSHIM_HISTORY_DB"):
            self.env.pop(k, None)
        self.env.update(VRAMSHIM_CONFIG=self.conf, VRAMSIM_STATE=os.path.join(self.dir, "sim.state"),
                        VRAMSIM_CARDS="4GiB", LD_LIBRARY_PATH=a.sim_dir)
        self.procs = []
        self.recorders = []

    def path(self, name):
        return os.path.join(self.dir, name)

    def holder(self, tenant):
        env = dict(self.env, VRAMSHIM_TENANT=tenant, LD_PRELOAD=self.a.shim)
        p = subprocess.Popen([self.a.holder], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=open(self.path("holder-%s.err" % tenant), "a"), text=True)
        self.procs.append(p)
        assert p.stdout.readline().strip() == "ready", "holder did not start"
        return Holder(p)

    def tool(self, *args, ok=True, timeout=60, env=None):
        p = subprocess.run([self.a.tool] + list(args), env=env or self.env, capture_output=True, text=True,
                           timeout=timeout)
        assert p.returncode >= 0, "killed by signal %d: %s" % (-p.returncode, args)
        if ok:
            assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
        return p

    def recorder(self, *extra, interval="200ms"):
        err = open(self.path("recorder.err"), "a")
        p = subprocess.Popen([self.a.tool, "record", "--interval", interval, "--db", self.db, "--ledger-dir",
                              self.ledger] + list(extra), env=self.env, stdout=err, stderr=err)
        self.recorders.append(p)
        return p

    def status(self):
        return json.loads(self.tool("status", "--json", "--events", "--ledger-dir", self.ledger).stdout)

    def close(self):
        # A recorder left by a failed test would go on running actions over
        # the next run's folder: none outlives its test.
        for p in self.recorders:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.stdin.write("quit\n")
                    p.stdin.flush()
                except OSError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


class Holder:
    def __init__(self, p):
        self.p = p

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def alloc(self, n):
        return self.cmd("alloc %d" % n)


def stop(p, sig=signal.SIGTERM):
    p.send_signal(sig)
    return p.wait(timeout=60)


def eventually(cond, what, timeout=30.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("never happened within %.0f s: %s" % (timeout, what))


def validate(schemas, name, doc):
    try:
        import jsonschema
    except ImportError:
        skip("python3-jsonschema is not installed")
    with open(os.path.join(schemas, name + ".schema.json")) as f:
        jsonschema.validate(doc, json.load(f))

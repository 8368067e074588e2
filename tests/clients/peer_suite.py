"""Peer test suites as an oracle: a suite nobody here wrote runs over the
simulated driver alone, then under the shim in each arena mode and on a
card without VMM; every test whose outcome differs from the sim-alone run
(of the same card) fails this test, and their names are printed.

usage: peer_suite.py numba|pycuda --sim DIR --shim LIB --work DIR [--modes vmm,chunks,off,novmm] [--source SDIST_DIR]

  numba   Numba's CUDA driver tests (numba.cuda.tests.cudadrv, Debian's
          python3-numba), bound to the sim through NUMBA_CUDA_DRIVER.
  pycuda  test/test_driver.py of pycuda's source distribution (--source, or
          VS_PYCUDA_SOURCE), with the installed pycuda, the sim found as
          libcuda.so.1 through LD_LIBRARY_PATH.

Each run is a child process that loads the tests with unittest (numba's
load_tests, or pytest's collection for pycuda) and records each test's
outcome (ok, fail, error, skip, xfail) to a JSON file. Exit 77 (skipped)
when the suite cannot be imported or collected here.
"""
import argparse
import json
import os
import subprocess
import sys
import time

SKIP = 77

NUMBA_CHILD = r"""
import json, sys, unittest
out = sys.argv[1]
res = {}
class R(unittest.TextTestResult):
    def _put(self, t, v):
        res[t.id()] = v
    def addSuccess(self, t):
        super().addSuccess(t); self._put(t, "ok")
    def addFailure(self, t, e):
        super().addFailure(t, e); self._put(t, "fail")
    def addError(self, t, e):
        super().addError(t, e); self._put(t, "error")
    def addSkip(self, t, r):
        super().addSkip(t, r); self._put(t, "skip")
    def addExpectedFailure(self, t, e):
        super().addExpectedFailure(t, e); self._put(t, "xfail")
    def addUnexpectedSuccess(self, t):
        super().addUnexpectedSuccess(t); self._put(t, "xpass")
import os, numba
loader = unittest.TestLoader()
# numba's load_tests names its modules relative to the top level (as its runtests does)
loader._top_level_dir = os.path.dirname(os.path.dirname(numba.__file__))
suite = loader.loadTestsFromName("numba.cuda.tests.cudadrv")
unittest.TextTestRunner(resultclass=R, verbosity=2, stream=sys.stderr).run(suite)
json.dump(res, open(out, "w"), indent=0, sort_keys=True)
"""

PYCUDA_CHILD = r"""
import json, sys
import pytest
out, path = sys.argv[1], sys.argv[2]
res = {}
class P:
    def pytest_runtest_logreport(self, report):
        key = report.nodeid.split("::", 1)[-1]
        if report.when == "call" or report.outcome != "passed":
            if report.skipped:
                v = "xfail" if hasattr(report, "wasxfail") else "skip"
            elif report.failed:
                v = "fail" if report.when == "call" else "error"
            else:
                v = "ok"
            if key not in res or res[key] == "ok":
                res[key] = v
rc = pytest.main(["-q", "-p", "no:cacheprovider", "-x" if False else "-rN", path], plugins=[P()])
json.dump(res, open(out, "w"), indent=0, sort_keys=True)
sys.exit(0 if res else 3)
"""


def run(args, label, extra_env, preload):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("VRAMSHIM_") or k == "LD_PRELOAD":
            del env[k]
    state = os.path.join(args.work, f"{label}.state")
    # a small card: some tests fill a share of it, and its bytes are host RAM here
    env.update({"VRAMSIM_STATE": state, "VRAMSIM_CARDS": "2GiB", "NUMBA_DISABLE_PERFORMANCE_WARNINGS": "1"})
    env.update(extra_env)
    sim_lib = os.path.join(args.sim, "libcuda.so.1")
    if args.suite == "numba":
        env["NUMBA_CUDA_DRIVER"] = sim_lib
        # Numba <= 0.60 binds "name_v2 if exported": a CUDA 12 driver for
        # the two functions CUDA 13 reused those names for (docs/sim.md).
        env["VRAMSIM_DRIVER_VERSION"] = "12080"
        code = [NUMBA_CHILD]
        cwd = args.work
    else:
        env["LD_LIBRARY_PATH"] = args.sim + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        code = [PYCUDA_CHILD]
        cwd = os.path.join(args.source, "test")
    if preload:
        conf = os.path.join(args.work, f"{label}.conf")
        with open(conf, "w") as f:
            f.write(f"; {args.suite} peer suite, {label}\n[global]\n")
            if preload != "default":
                f.write(f"arena = {preload}\n")
            f.write(f"ledger_dir = {args.work}/ledger-{label}\ndump_dir = {args.work}/dumps-{label}\n")
        os.makedirs(f"{args.work}/dumps-{label}", exist_ok=True)
        env["LD_PRELOAD"] = args.shim
        env["VRAMSHIM_CONFIG"] = conf
        env["VRAMSHIM_LOG"] = f"warn,file:{args.work}/{label}.log"
    out = os.path.join(args.work, f"{label}.json")
    if os.path.exists(out):
        os.unlink(out)
    cmd = [sys.executable, "-c", code[0], out]
    if args.suite == "pycuda":
        cmd.append(os.path.join(args.source, "test", "test_driver.py"))
    t0 = time.monotonic()
    with open(os.path.join(args.work, f"{label}.out"), "w") as log:
        p = subprocess.run(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout)
    dt = time.monotonic() - t0
    if not os.path.exists(out):
        return None, dt, p.returncode
    with open(out) as f:
        return json.load(f), dt, p.returncode


def counts(res):
    c = {}
    for v in res.values():
        c[v] = c.get(v, 0) + 1
    return ", ".join(f"{k} {c[k]}" for k in sorted(c))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("suite", choices=["numba", "pycuda"])
    ap.add_argument("--sim", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--modes", default="vmm,chunks,off,novmm")
    ap.add_argument("--source", default=os.environ.get("VS_PYCUDA_SOURCE", ""))
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    tag = f"vramshim: {args.suite} peer suite:"
    probe = "import numba.cuda.tests.cudadrv" if args.suite == "numba" else "import pycuda, pytest"
    if subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode != 0:
        print(f"{tag} skipping, {sys.executable} cannot `{probe}`")
        return SKIP
    if args.suite == "pycuda" and not os.path.isfile(os.path.join(args.source, "test", "test_driver.py")):
        print(f"{tag} skipping, no pycuda source distribution with test/test_driver.py "
              f"(--source or VS_PYCUDA_SOURCE: '{args.source}')")
        return SKIP
    modes = [m for m in args.modes.split(",") if m]
    # (label, environment, preload: None | "default" | arena mode)
    runs = [("sim", {}, None)]
    if "novmm" in modes:
        runs.append(("sim_novmm", {"VRAMSIM_VMM": "0"}, None))
    for m in modes:
        if m == "novmm":
            runs.append(("shim_novmm", {"VRAMSIM_VMM": "0"}, "default"))
        elif m == "vmm":
            runs.append(("shim_vmm", {}, "default"))   # the default config
        else:
            runs.append((f"shim_{m}", {}, m))
    results = {}
    for label, env, preload in runs:
        res, dt, rc = run(args, label, env, preload)
        if res is None or not res:
            if label.startswith("sim"):
                print(f"{tag} skipping, the suite did not run over the sim alone (exit {rc}; see {args.work}/{label}.out)")
                return SKIP
            print(f"{tag} {label}: the suite recorded nothing (exit {rc}; see {args.work}/{label}.out)")
            results[label] = {}
            continue
        results[label] = res
        print(f"{tag} {label}: {len(res)} tests in {dt:.0f} s: {counts(res)}")
    failed = 0
    for label, _, _ in runs:
        if not label.startswith("shim"):
            continue
        base_label = "sim_novmm" if label == "shim_novmm" else "sim"
        base, got = results[base_label], results[label]
        diff = sorted(t for t in set(base) | set(got) if base.get(t) != got.get(t))
        print(f"{tag} {label} vs {base_label}: {len(diff)} tests differ")
        for t in diff:
            print(f"    {t}: {base.get(t, 'absent')} -> {got.get(t, 'absent')}")
        failed += len(diff) > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

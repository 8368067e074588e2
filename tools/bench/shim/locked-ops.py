#!/usr/bin/env python3
"""Locked instructions (lock-prefixed, or xchg with memory) executed per
cuMemAlloc_v2 + cuMemFree_v2 pair through the shim, on the null driver.

An atomic read-modify-write costs tens of cycles even uncontended and moves
a cache line between cores when two threads share it; callgrind counts it as
one instruction, so the instruction counts of callgrind-hooks.sh do not show
it. This runs vramshim-bench's arena child under callgrind with per-
instruction counts, finds the locked instructions of every object it ran by
disassembling them (objdump), and prints how often each function executed
one per pair.

    tools/bench/shim/locked-ops.py BUILD_DIR [BUILD_DIR...] [--arena chunks|vmm|off]
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

CALLS, RUNS = 1000, 3


def run(build, arena, out):
    conf = os.path.join(out, "conf")
    with open(conf, "w") as f:
        f.write("[global]\narena = %s\nledger_dir = %s/ledger\n" % (arena, out))
    cg = os.path.join(out, "cg")
    env = dict(os.environ, VRAMSHIM_CONFIG=conf)
    subprocess.run(["valgrind", "--tool=callgrind", "--dump-instr=yes", "--compress-pos=no",
                    "--compress-strings=no", "--callgrind-out-file=" + cg,
                    os.path.join(build, "tools/bench/shim/vramshim-bench"), "--arena-child",
                    "--runs", str(RUNS), "--calls", str(CALLS),
                    "--shim", os.path.join(build, "src/libvramshim.so"),
                    "--driver", os.path.join(build, "tools/bench/shim/libvs_null_driver.so")],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return cg


def executed(cg):
    """(object, address) -> times executed, and the function of each."""
    count, fn_of = collections.Counter(), {}
    ob = fn = None
    after_call = False
    with open(cg) as f:
        for line in f:
            if line.startswith("ob="):
                ob = line[3:].strip()
            elif line.startswith("fn="):
                fn = line[3:].strip()
            elif line.startswith("calls="):
                after_call = True   # the next cost line is the call's inclusive cost
            elif line.startswith("0x"):
                if after_call:
                    after_call = False
                    continue
                p = line.split()
                if len(p) >= 3:
                    a = int(p[0], 16)
                    count[(ob, a)] += int(p[2])
                    fn_of[(ob, a)] = fn
    return count, fn_of


# A lock prefix, or xchg with a memory operand (locked without one; xchg of
# two registers, as in the two-byte nop "xchg %ax,%ax", is not).
LOCKED = re.compile(r"\s+([0-9a-f]+):\s+(lock\s|xchg\s+\S*\()")


def locked_per_pair(cg, shim):
    """Per function, locked instructions executed; and the pairs (the times
    the shim's cuMemAlloc_v2 was entered, warm-up calls included)."""
    count, fn_of = executed(cg)
    by_fn = collections.Counter()
    pairs = 0
    shim = os.path.realpath(shim)
    # The null driver's own counters are left out: the bench calls it
    # directly too, and through the shim an arena hit never reaches it.
    for ob in {o for o, _ in count if o and o.startswith("/") and "null_driver" not in o}:
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", ob], capture_output=True, text=True).stdout
        for line in asm.splitlines():
            e = re.match(r"([0-9a-f]+) <cuMemAlloc_v2>:", line)
            if e and os.path.realpath(ob) == shim:
                pairs = count.get((ob, int(e.group(1), 16)), 0)
            m = LOCKED.match(line)
            if m and (ob, int(m.group(1), 16)) in count:
                k = (ob, int(m.group(1), 16))
                by_fn[fn_of[k]] += count[k]
    return by_fn, pairs


def main():
    args = sys.argv[1:]
    arena = "chunks"
    if "--arena" in args:
        i = args.index("--arena")
        arena = args[i + 1]
        del args[i:i + 2]
    if not args:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for build in args:
        with tempfile.TemporaryDirectory() as out:
            by_fn, pairs = locked_per_pair(run(build, arena, out), os.path.join(build, "src/libvramshim.so"))
        if not pairs:
            print("%s: the shim's cuMemAlloc_v2 never ran" % build, file=sys.stderr)
            return 1
        total = sum(by_fn.values()) / pairs
        print("%s (arena %s): %.1f locked instructions per pair" % (build, arena, total))
        for fn, c in by_fn.most_common():
            if c / pairs >= 0.05:
                print("  %5.2f  %s" % (c / pairs, fn))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Alternates two or more shim libraries through `vramshim-bench --arena
--size S` in one command and prints, per library, the median and the
fastest of its runs (ns per alloc + free pair, arena chunks and vmm). On a
machine whose speed moves within minutes, only libraries measured side by
side like this compare; a benchmark, never a test.

usage: tools/bench/shim/arena-ab.py [--build DIR] [--rounds N] SIZE LIB LIB...
  SIZE: 512, 4096, 307200 or 4194304 (vramshim-bench's rows)
  LIB:  a libvramshim.so file (copy each build's library aside first)
  --build DIR: the build folder whose vramshim-bench and null driver run
               (default: build); --rounds N: alternations (default 6)
"""
import argparse
import os
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("size")
    ap.add_argument("libs", nargs="+")
    a = ap.parse_args()
    bench = os.path.join(a.build, "tools/bench/shim/vramshim-bench")
    driver = os.path.join(a.build, "tools/bench/shim/libvs_null_driver.so")
    runs = {lib: ([], []) for lib in a.libs}
    for r in range(a.rounds):
        print("arena-ab: round %d of %d" % (r + 1, a.rounds), file=sys.stderr)
        for lib in a.libs:
            out = subprocess.run(["taskset", "-c", "0", bench, "--arena", "--runs", "5", "--calls", "100000",
                                  "--size", a.size, "--shim", lib, "--driver", driver],
                                 capture_output=True, text=True, check=True).stdout
            row = out.strip().splitlines()[-1].split()
            runs[lib][0].append(float(row[-2]))
            runs[lib][1].append(float(row[-1]))
    print("ns per pair at %s bytes, %d alternations: median (fastest)" % (a.size, a.rounds))
    for lib in a.libs:
        c, v = runs[lib]
        print("%-40s chunks %7.1f (%7.1f)  vmm %7.1f (%7.1f)" % (lib, statistics.median(c), min(c),
                                                              statistics.median(v), min(v)))


if __name__ == "__main__":
    main()

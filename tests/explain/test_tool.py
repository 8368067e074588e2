#!/usr/bin/env python3
"""`vramshim dump` end to end: text view, --json, --svg rendered by
rsvg-convert with the expected elements for a known layout, --diff, and
bad input refused with a message (never a crash).
usage: test_tool.py VRAMSHIM MAKE_SAMPLE"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOOL, MAKE = sys.argv[1], sys.argv[2]


def run(*args, ok=True):
    p = subprocess.run([TOOL, "dump"] + list(args), capture_output=True, text=True, timeout=30)
    assert p.returncode >= 0, "killed by signal %d: %s" % (-p.returncode, args)
    if ok:
        assert p.returncode == 0, (args, p.stderr)
    return p


def refused(args, want):
    p = run(*args, ok=False)
    assert p.returncode != 0, ("accepted", args)
    assert p.stderr.startswith("vramshim: "), p.stderr
    assert want in p.stderr, (want, p.stderr)


def main():
    tmp = tempfile.mkdtemp()
    try:
        day1, day60 = os.path.join(tmp, "day1.json"), os.path.join(tmp, "day60.json")
        subprocess.run([MAKE, day1], check=True)
        subprocess.run([MAKE, day60, "--day60"], check=True)
        with open(day1) as f:
            doc = json.load(f)

        # Text view: figures, histogram bars, one map line per region.
        out = run(day1).stdout
        assert "external fragmentation 27.3%" in out, out
        assert "largest 32.0 MiB" in out
        assert re.search(r"32\.0 MiB - 64\.0 MiB\s+1\s+32\.0 MiB\s+#{40}\n", out), out
        assert re.search(r"4\.00 MiB - 8\.00 MiB\s+1\s+4\.00 MiB\s+#{5}\n", out), out
        maps = re.findall(r"^\s+0x[0-9a-f]+ (\w+)\s.*\|(.*)\|$", out, re.M)
        assert [m[0] for m in maps] == ["chunk", "slab", "vmm_range"], maps
        assert maps[0][1] == "#" * 8 + "." * 4 + "~" * 4 + "#" * 16 + "." * 32, maps[0][1]
        assert maps[1][1] == "#" * 16 + "." * 16 + "#" * 16 + "." * 16, maps[1][1]
        assert maps[2][1] == "#" * 63 + "+", maps[2][1]

        # Timeline lines: the sample's reserved creeps up, largest free shrinks.
        m = re.search(r"^\s+reserved\s+\|([^|]+)\|", out, re.M)
        assert m and m.group(1)[0] == "_" and m.group(1)[-1] == "#", out
        m = re.search(r"^\s+largest free\s+\|([^|]+)\|", out, re.M)
        assert m and m.group(1)[0] == "#" and m.group(1)[-1] == "_", out

        # --json: the same document, normalised.
        assert json.loads(run(day1, "--json").stdout) == doc

        # --svg: renders, and the known layout gives the expected elements.
        svg = os.path.join(tmp, "day1.svg")
        run(day1, "--svg", svg)
        with open(svg) as f:
            text = f.read()
        blocks = [b for r in doc["cards"][0]["regions"] for b in r["blocks"]]
        for state in ("live", "free", "pending"):
            want = sum(1 for b in blocks if b["state"] == state)
            got = text.count('class="blk %s"' % state)
            assert got == want, (state, got, want)
        assert text.count('class="region"') == len(doc["cards"][0]["regions"])
        for label in ("live (in use)", "pending (freed, waiting for sync)", "free (reserved, unused)",
                      "largest free extent", "time since the first sample", "chunk 64.0 MiB", "vmm_range 256 MiB"):
            assert label in text, label
        assert text.count("<polyline") == 3
        if shutil.which("rsvg-convert"):
            png = os.path.join(tmp, "day1.png")
            p = subprocess.run(["rsvg-convert", svg, "-o", png], capture_output=True, text=True, timeout=30)
            assert p.returncode == 0 and not p.stderr.strip(), p.stderr
            with open(png, "rb") as f:
                head = f.read(24)
            assert head[:8] == b"\x89PNG\r\n\x1a\n"
            width = int.from_bytes(head[16:20], "big")
            assert width == 1200, width
        else:
            print("vramshim: rsvg-convert missing; SVG checked as text only")

        # arena = off: 300 allocations, each drawn (wrapped pieces marked "cont").
        off = os.path.join(tmp, "off.json")
        subprocess.run([MAKE, off, "--off", "300"], check=True)
        out = run(off).stdout
        assert "... and 260 more allocations" in out, out
        run(off, "--svg", svg)
        with open(svg) as f:
            text = f.read()
        assert text.count('class="blk live"') == 300
        assert "300 allocations end to end" in text
        if shutil.which("rsvg-convert"):
            subprocess.run(["rsvg-convert", svg, "-o", os.path.join(tmp, "off.png")], check=True, timeout=30)

        # --diff: the day-1 vs day-60 figures.
        out = run("--diff", day1, day60).stdout
        assert re.search(r"reserved\s+322 MiB -> 386 MiB\s+\+64\.0 MiB\s+up", out), out
        assert re.search(r"external fragmentation\s+27\.3% -> 73\.8%", out), out
        assert re.search(r"512 KiB\s+2 -> 3\s+4 -> 8", out), out
        assert "59.0 days apart" in out

        # Bad input: a message naming what and where, exit status non-zero.
        with open(day1, "rb") as f:
            good = f.read()
        cases = [
            (good[: len(good) // 3], "truncated"),
            (b"", "empty file"),
            (b"\x00\xff garbage", "expected a value"),
            (good.replace(b'"live_count": 5', b'"live_count": "5"'), "cards[0].live_count"),
            (good.replace(b'"capacity": 25769803776', b'"capacity": 1' + b"0" * 30), "64 bits"),
            (re.sub(rb'"schema_version": "1\.[0-9]+"', b'"schema_version": "9.1"', good), "not readable"),
        ]
        for i, (data, want) in enumerate(cases):
            path = os.path.join(tmp, "bad%d.json" % i)
            with open(path, "wb") as f:
                f.write(data)
            refused([path], want)
        refused([os.path.join(tmp, "missing.json")], "cannot open")
        refused([tmp], "not a regular file")
        none = ["--ledger-dir", os.path.join(tmp, "no-ledgers")]   # live requests: tests/shim_explain
        refused(["--pid", "1"] + none, "process 1 has no slot")
        refused(["--tenant", "llm", "--json"] + none, "no process of tenant 'llm'")
        refused(["--all"] + none, "no process under the shim")
        refused(["--pid", "abc"], "process id")
        refused([day1, day60], "--diff")
        refused(["--bogus"], "unknown option")
        refused([], "exactly one")
        assert run("--help").stdout.startswith("usage: vramshim dump")
        print("vramshim: dump tool checks passed")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

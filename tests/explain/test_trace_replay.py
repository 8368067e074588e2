#!/usr/bin/env python3
"""A recorded trace replays to the same peak live bytes as the run that
recorded it (`vramshim replay`), and parses as RMM CSV line by line.
usage: test_trace_replay.py RECORD_SAMPLE VRAMSHIM"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

REC, TOOL = sys.argv[1], sys.argv[2]
LINE = re.compile(r"^\d+,\d{2,}:\d{2}:\d{2}\.\d{6},(allocate|allocate failure|free),0x[0-9a-f]+,\d+,0x[0-9a-f]+$")


def main():
    tmp = tempfile.mkdtemp()
    try:
        p = subprocess.run([REC, os.path.join(tmp, "t-%p-%d.csv")], capture_output=True, text=True, timeout=60,
                           check=True)
        m = re.match(r"peak_live (\d+) events (\d+) path (\S+)", p.stdout)
        peak, events, path = int(m.group(1)), int(m.group(2)), m.group(3)
        assert os.path.basename(path) == "t-%d-0.csv" % int(path.split("-")[-2]), path
        with open(path) as f:
            lines = f.read().splitlines()
        assert lines[0] == "Thread,Time,Action,Pointer,Size,Stream"
        assert len(lines) == events + 1, (len(lines), events)   # flushed at exit, nothing lost
        live = top = 0
        sizes = {}
        for ln in lines[1:]:
            assert LINE.match(ln), ln
            _, _, action, ptr, size, _ = ln.split(",")
            if action == "allocate":
                sizes[ptr] = int(size)
                live += int(size)
                top = max(top, live)
            elif action == "free":
                assert sizes.pop(ptr) == int(size)
                live -= int(size)
        assert top == peak, (top, peak)
        out = subprocess.run([TOOL, "replay", "--policy", "off", "--json", path], capture_output=True, text=True,
                             timeout=60)
        if out.returncode != 0:
            print(out.stderr)
        assert out.returncode == 0
        rec = json.loads(out.stdout.splitlines()[0])
        assert rec["peak_live"] == peak, (rec["peak_live"], peak)
        print("vramshim: trace of %d events replays to peak live %d" % (events, peak))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

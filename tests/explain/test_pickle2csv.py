#!/usr/bin/env python3
"""tools/pickle2csv: converts synthetic snapshots (plain dicts and lists,
as torch.cuda.memory._snapshot() returns) into the expected RMM CSV, and
refuses bad or malicious pickles with a message, never running them.
usage: test_pickle2csv.py PICKLE2CSV.py"""
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

CONV = sys.argv[1]
TMP = tempfile.mkdtemp()


def run(snapshot_bytes, *args):
    path = os.path.join(TMP, "snap.pickle")
    with open(path, "wb") as f:
        f.write(snapshot_bytes)
    p = subprocess.run([sys.executable, CONV, path] + list(args), capture_output=True, text=True, timeout=30,
                       cwd=TMP)
    assert p.returncode >= 0
    return p


def refused(data, want):
    p = run(data)
    assert p.returncode == 1, (want, p.returncode, p.stdout, p.stderr)
    assert p.stderr.startswith("vramshim: pickle2csv: "), p.stderr
    assert want in p.stderr, (want, p.stderr)


def ev(action, addr, size, t, stream=0):
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t,
            "frames": [{"filename": "model.py", "line": 3, "name": "forward"}]}


def good_snapshot():
    dev0 = [
        ev("alloc", 0x1000, 100, 1000, 7),
        ev("free_requested", 0x1000, 100, 1500, 7),
        ev("free_completed", 0x1000, 100, 1600, 7),
        ev("free_completed", 0x2000, 50, 2000),          # live before the window
        ev("segment_alloc", 0x1000, 2 << 20, 2100),      # PyTorch's own: left out
        ev("alloc", 0x1000, 300, 2500),                  # address reused
        {"action": "oom", "size": 1 << 40, "device_free": 0, "stream": 0, "time_us": 3500, "addr": 0},
    ]
    segments = [{"device": 0, "address": 0x1000, "total_size": 2 << 20, "stream": 0, "segment_type": "small",
                 "blocks": [
                     {"address": 0x1000, "size": 512, "requested_size": 300, "state": "active_allocated"},
                     {"address": 0x1200, "size": 512, "requested_size": 200, "state": "active_allocated"},
                     {"address": 0x1400, "size": 1024, "requested_size": 0, "state": "inactive"}]},
                {"device": 2, "address": 0x9000, "total_size": 4096, "stream": 0, "blocks": [
                    {"address": 0x9000, "size": 4096, "requested_size": 4000, "state": "active_allocated"}]}]
    dev2 = [ev("alloc", 0x9000, 4000, 50), ev("alloc", 0xa000, 10, 60)]
    return {"segments": segments, "device_traces": [dev0, [], dev2], "allocator_settings": {"x": 1}}


EXPECTED_DEV0 = """Thread,Time,Action,Pointer,Size,Stream
0,00:00:00.000000,allocate,0x2000,50,0x0
0,00:00:00.000000,allocate,0x1200,200,0x0
0,00:00:00.000000,allocate,0x1000,100,0x7
0,00:00:00.000600,free,0x1000,100,0x7
0,00:00:00.001000,free,0x2000,50,0x0
0,00:00:00.001500,allocate,0x1000,300,0x0
0,00:00:00.002500,allocate failure,0x0,1099511627776,0x0
"""

EXPECTED_DEV2 = """Thread,Time,Action,Pointer,Size,Stream
0,00:00:00.000000,allocate,0x9000,4000,0x0
0,00:00:00.000010,allocate,0xa000,10,0x0
"""


def main():
    try:
        for proto in (2, 4, 5):
            p = run(pickle.dumps(good_snapshot(), protocol=proto))
            assert p.returncode == 0, p.stderr
            with open(os.path.join(TMP, "snap-dev0.csv")) as f:
                assert f.read() == EXPECTED_DEV0
            with open(os.path.join(TMP, "snap-dev2.csv")) as f:
                assert f.read() == EXPECTED_DEV2
            assert not os.path.exists(os.path.join(TMP, "snap-dev1.csv"))   # no events: no file
        p = run(pickle.dumps(good_snapshot()), "--device", "2", "-o", "-")
        assert p.returncode == 0 and p.stdout == EXPECTED_DEV2, p.stderr

        # free_requested only (no free_completed in the trace): used as the free.
        s = {"segments": [], "device_traces": [[ev("alloc", 0x10, 8, 5), ev("free_requested", 0x10, 8, 9)]]}
        p = run(pickle.dumps(s), "--device", "0", "-o", "-")
        assert p.stdout.splitlines()[2] == "0,00:00:00.000004,free,0x10,8,0x0", p.stdout

        # Malicious: GLOBAL os.system + REDUCE must be refused, never run.
        marker = os.path.join(TMP, "pwned")
        evil = b"cos\nsystem\n(S'touch " + marker.encode() + b"'\ntR."
        refused(evil, "tries to import os.system")
        assert not os.path.exists(marker), "the pickle was executed"

        class Evil:
            def __reduce__(self):
                return (os.system, ("touch " + marker,))
        refused(pickle.dumps({"segments": [], "device_traces": [[Evil()]]}, protocol=4), "tries to import")
        assert not os.path.exists(marker)
        import collections
        refused(pickle.dumps(collections.OrderedDict(a=1)), "tries to import collections.OrderedDict")
        refused(b"\x80\x02cbuiltins\neval\nq\x00.", "builtins.eval")
        refused(b"\x80\x02K\x01Q.", "persistent ids")

        data = pickle.dumps(good_snapshot())
        refused(data[: len(data) // 2], "truncated")
        refused(b"", "truncated")
        refused(b"not a pickle at all", "not a readable snapshot")
        refused(pickle.dumps([1, 2]), "snapshot: expected dict, found list")
        refused(pickle.dumps({"segments": []}), "no 'device_traces'")
        refused(pickle.dumps({"segments": [], "device_traces": {"0": []}}), "device_traces: expected list")
        refused(pickle.dumps({"segments": [], "device_traces": [[ev("alloc", 0x10, "8", 1)]]}),
                "device_traces[0][0].size: expected an integer, found str")
        refused(pickle.dumps({"segments": [], "device_traces": [[ev("alloc", 0x10, 1 << 70, 1)]]}),
                "out of range")
        refused(pickle.dumps({"segments": [], "device_traces": [[ev("alloc", -16, 8, 1)]]}), "out of range")
        refused(pickle.dumps({"segments": [], "device_traces": [[ev("alloc", 0x10, True, 1)]]}),
                "found bool")
        refused(pickle.dumps({"segments": [], "device_traces": [[ev("alloc", 0x10, 8, 1), ev("alloc", 0x10, 8, 2)]]}),
                "already live")
        refused(pickle.dumps({"segments": [], "device_traces": [[ev("free_completed", 0x10, 8, 1),
                                                                 ev("free_completed", 0x10, 8, 2)]]}),
                "freed already")
        refused(pickle.dumps({"segments": [], "device_traces": [["alloc"]]}), "expected dict, found str")
        refused(pickle.dumps({"segments": [7], "device_traces": [[]]}), "segments[0]: expected dict")
        print("vramshim: pickle2csv checks passed")
    finally:
        shutil.rmtree(TMP)


if __name__ == "__main__":
    main()

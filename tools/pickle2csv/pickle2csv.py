#!/usr/bin/env python3
"""Convert a PyTorch CUDA memory snapshot (the pickle written by
torch.cuda.memory._dump_snapshot(), i.e. torch.cuda.memory._snapshot())
into RMM logging CSV traces, one file per device, for `vramshim replay`
and RMM's replay benchmark.

    pickle2csv.py SNAPSHOT.pickle [-o PATTERN] [--device N]

PATTERN names the output files; %d is the device index (default:
SNAPSHOT-dev%d.csv next to the current directory). "-" writes to stdout
and needs --device.

Rules (see shared/traces/README.md and docs/dump-format.md):
  * tensor-level events only: 'alloc' -> allocate, 'free_completed' ->
    free (or 'free_requested' when the trace has no 'free_completed'),
    'oom' -> allocate failure; segment events are PyTorch's own and left out;
  * a free carries the size of its matching allocate;
  * blocks already live when the window began (freed with no allocate in
    the window, or still active at the end per 'segments') are allocated
    at time 0;
  * Time is elapsed since the first event, HH:MM:SS.ffffff.

Safety: the pickle is read with an unpickler that refuses every class and
every persistent id, so a snapshot cannot run code; only plain dicts,
lists, strings and numbers load. Anything else, truncated files, wrong
types and implausible numbers are refused with a message (exit status 1).
Pure standard library.
"""
import argparse
import io
import os
import pickle
import sys

MAX_FILE = 8 << 30          # snapshots of very long runs are large; beyond this, refuse
MAX_SIZE = 1 << 50          # 1 PiB: no single allocation is larger
MAX_ADDR = (1 << 64) - 1
MAX_TIME_US = 100 * 365 * 86400 * 10**6


class Refused(Exception):
    """Input this converter will not convert; the message says why."""


class SafeUnpickler(pickle.Unpickler):
    """Loads plain data only: any class or function reference is refused."""

    def find_class(self, module, name):
        raise Refused("the pickle tries to import %s.%s; only plain data is accepted" % (module, name))

    def persistent_load(self, pid):
        raise Refused("the pickle uses persistent ids; only plain data is accepted")


def load_snapshot(path):
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise Refused("cannot read: %s" % e.strerror)
    if size > MAX_FILE:
        raise Refused("file of %d bytes is larger than the %d-byte limit" % (size, MAX_FILE))
    with open(path, "rb") as f:
        data = f.read()
    try:
        return SafeUnpickler(io.BytesIO(data)).load()
    except Refused:
        raise
    except EOFError:
        raise Refused("truncated pickle (ended early)")
    except (pickle.UnpicklingError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            OverflowError, MemoryError, RecursionError, UnicodeDecodeError) as e:
        raise Refused("not a readable snapshot pickle: %s: %s" % (type(e).__name__, e))


def want_int(v, what, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int):
        raise Refused("%s: expected an integer, found %s" % (what, type(v).__name__))
    if v < lo or v > hi:
        raise Refused("%s: %d is out of range [%d, %d]" % (what, v, lo, hi))
    return v


def want(v, typ, what):
    if not isinstance(v, typ):
        raise Refused("%s: expected %s, found %s" % (what, typ.__name__, type(v).__name__))
    return v


def fmt_time(us):
    s, f = divmod(us, 10**6)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return "%02d:%02d:%02d.%06d" % (h, m, s, f)


def convert_device(dev, trace, segments):
    """Returns the CSV rows (time_us, action, addr, size, stream) of one device."""
    want(trace, list, "device_traces[%d]" % dev)
    actions = set()
    for i, e in enumerate(trace):
        want(e, dict, "device_traces[%d][%d]" % (dev, i))
        actions.add(want(e.get("action"), str, "device_traces[%d][%d].action" % (dev, i)))
    free_action = "free_completed" if "free_completed" in actions else "free_requested"

    live = {}            # addr -> size, for blocks allocated in the window or before it
    prologue = []        # blocks live before the window: allocated at time 0
    before = set()       # their addresses
    rows = []
    t0 = None
    last = 0
    for i, e in enumerate(trace):
        where = "device_traces[%d][%d]" % (dev, i)
        action = e["action"]
        if action not in ("alloc", free_action, "oom"):
            continue
        t = e.get("time_us", 0)
        t = want_int(t, where + ".time_us", 0, MAX_TIME_US)
        if t0 is None:
            t0 = t
        rel = max(t - t0, last)     # never backwards in the file
        last = rel
        stream = want_int(e.get("stream", 0), where + ".stream", 0, MAX_ADDR)
        size = want_int(e.get("size"), where + ".size", 0, MAX_SIZE)
        if action == "oom":
            rows.append((rel, "allocate failure", 0, size, stream))
            continue
        addr = want_int(e.get("addr"), where + ".addr", 0, MAX_ADDR)
        if action == "alloc":
            if addr in live:
                raise Refused("%s: allocation at 0x%x, which is already live" % (where, addr))
            live[addr] = size
            rows.append((rel, "allocate", addr, size, stream))
        else:
            if addr not in live:
                if addr in before:
                    raise Refused("%s: free of 0x%x, freed already with no allocate between" % (where, addr))
                # Live before the window began.
                before.add(addr)
                prologue.append((0, "allocate", addr, size, stream))
                live[addr] = size
            rows.append((rel, "free", addr, live.pop(addr), stream))

    # Blocks still active at the end that the window never allocated.
    for si, seg in enumerate(segments):
        where = "segments[%d]" % si
        want(seg, dict, where)
        if want_int(seg.get("device", 0), where + ".device", 0, 1 << 16) != dev:
            continue
        seg_addr = want_int(seg.get("address", 0), where + ".address", 0, MAX_ADDR)
        stream = want_int(seg.get("stream", 0), where + ".stream", 0, MAX_ADDR)
        addr = seg_addr
        for bi, b in enumerate(want(seg.get("blocks", []), list, where + ".blocks")):
            bw = "%s.blocks[%d]" % (where, bi)
            want(b, dict, bw)
            bsize = want_int(b.get("size"), bw + ".size", 0, MAX_SIZE)
            baddr = want_int(b.get("address", addr), bw + ".address", 0, MAX_ADDR)
            addr = baddr + bsize
            state = want(b.get("state", ""), str, bw + ".state")
            if not state.startswith("active") or baddr in live:
                continue
            req = b.get("requested_size", bsize)
            req = want_int(req, bw + ".requested_size", 0, MAX_SIZE) or bsize
            prologue.append((0, "allocate", baddr, req, stream))
            live[baddr] = req
    return prologue + rows


def write_csv(out, rows):
    out.write("Thread,Time,Action,Pointer,Size,Stream\n")
    for t, action, addr, size, stream in rows:
        out.write("0,%s,%s,0x%x,%d,0x%x\n" % (fmt_time(t), action, addr, size, stream))


def convert(path, pattern, only_device):
    snap = load_snapshot(path)
    want(snap, dict, "snapshot")
    if "device_traces" not in snap:
        raise Refused("snapshot: no 'device_traces' (was memory history recorded? "
                      "torch.cuda.memory._record_memory_history())")
    traces = want(snap["device_traces"], list, "device_traces")
    segments = want(snap.get("segments", []), list, "segments")
    outputs = []
    for dev, trace in enumerate(traces):
        if only_device is not None and dev != only_device:
            continue
        rows = convert_device(dev, trace, segments)
        if rows:
            outputs.append((dev, rows))
    if only_device is not None and not outputs:
        raise Refused("device %d has no events in this snapshot" % only_device)
    written = []
    for dev, rows in outputs:
        if pattern == "-":
            write_csv(sys.stdout, rows)
            continue
        name = pattern.replace("%d", str(dev)) if "%d" in pattern else (
            pattern if len(outputs) == 1 else "%s-dev%d%s" % (os.path.splitext(pattern)[0], dev, ".csv"))
        with open(name, "w") as f:
            write_csv(f, rows)
        written.append((name, len(rows)))
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch memory snapshot (pickle) -> RMM CSV traces")
    ap.add_argument("snapshot")
    ap.add_argument("-o", "--output", help="output file pattern, %%d = device (default SNAPSHOT-dev%%d.csv)")
    ap.add_argument("--device", type=int, help="only this device")
    args = ap.parse_args(argv)
    pattern = args.output or os.path.splitext(os.path.basename(args.snapshot))[0] + "-dev%d.csv"
    if pattern == "-" and args.device is None:
        print("vramshim: pickle2csv: -o - (stdout) needs --device", file=sys.stderr)
        return 2
    try:
        written = convert(args.snapshot, pattern, args.device)
    except Refused as e:
        print("vramshim: pickle2csv: %s: %s" % (args.snapshot, e), file=sys.stderr)
        return 1
    except OSError as e:
        print("vramshim: pickle2csv: %s" % e, file=sys.stderr)
        return 1
    for name, n in written:
        print("vramshim: pickle2csv: wrote %s (%d events)" % (name, n), file=sys.stderr)
    if not written and pattern != "-":
        print("vramshim: pickle2csv: %s: no device has allocation events" % args.snapshot, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

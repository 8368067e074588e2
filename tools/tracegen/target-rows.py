#!/usr/bin/env python3
"""Replays issue 27's rows (tools/tracegen/target-rows.sh writes them) and
counts the issue's targets per half: modeled driver time (chunks <= PyTorch;
vmm <= 1.5 x PyTorch, or <= 1.1 x the floor) and the smallest card (vmm <=
PyTorch's; chunks <= 1.01 x PyTorch's). Every row is replayed with the
checked smallest-card search, as docs/benchmarks-replay.md's rounds do.

usage: target-rows.py [--tool VRAMSHIM] [--rows DIR] [--policy LIST]
                      [--save DIR] [--base DIR] [--jobs N]

  --rows DIR     DIR/tuned/*.csv and DIR/held/*.csv (default ./target-rows)
  --policy LIST  the replay's policies (default chunks,vmm,pytorch); a run
                 without pytorch takes PyTorch's figures from --base
  --save DIR     keeps each row's replay output (vramshim replay --json
                 lines, its own schema) as DIR/HALF/NAME.json
  --base DIR     a --save of another build: prints each row whose status
                 changed, with both cards (x PyTorch's)

With pytorch-down among the policies (PyTorch's rules on a driver that
hands out addresses downwards, docs/replay.md) it also counts, per half, the
rows on which that mirrored baseline meets the two card targets against
PyTorch's own: how many a rule other than PyTorch's exact tie-break can be
expected to miss through the tie-break alone.

Prints, per half: the rows, each target's count of rows met, summed modeled
driver time per policy and summed driver calls; then each row that misses a
target (or, with --base, whose status changed). A progress line goes to
stderr. Exit status 0 unless a replay failed.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed

HALVES = ("tuned", "held")


def replay(tool, policy, path):
    r = subprocess.run([tool, "replay", "--quiet", "--json", "--policy", policy, path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{path}: vramshim replay exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def parse(text):
    return {d["policy"]: d for d in (json.loads(line) for line in text.splitlines() if line.strip())}


def load_saved(d):
    out = {}
    for half in HALVES:
        for p in glob.glob(os.path.join(d, half, "*.json")):
            with open(p) as f:
                out[(half, os.path.basename(p)[:-5])] = parse(f.read())
    return out


def status(row, py):
    """Target -> met, for the policies the row has; py: PyTorch's figures."""
    s = {}
    c, v = row.get("chunks"), row.get("vmm")
    if c:
        s["time chunks"] = c["modeled_driver_ms"] <= py["modeled_driver_ms"]
        s["card chunks"] = c["smallest_card"] <= 1.01 * py["smallest_card"]
    if v:
        s["time vmm"] = (v["modeled_driver_ms"] <= 1.5 * py["modeled_driver_ms"] or
                         v["modeled_driver_ms"] <= 1.1 * v.get("floor_modeled_driver_ms", 0))
        s["card vmm"] = v["smallest_card"] <= py["smallest_card"]
    return s


def spread(row, py):
    """The card targets, met by pytorch-down against PyTorch (empty without it)."""
    d = row.get("pytorch-down")
    if not d:
        return {}
    return {"card <= PyTorch's": d["smallest_card"] <= py["smallest_card"],
            "card <= 1.01 x PyTorch's": d["smallest_card"] <= 1.01 * py["smallest_card"]}


def cards(row, py):
    return " ".join(f"{p} {row[p]['smallest_card'] / py['smallest_card']:.4f}"
                    for p in ("chunks", "vmm", "pytorch-down") if p in row)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tool", default="build/tools/vramshim/vramshim")
    ap.add_argument("--rows", default="target-rows")
    ap.add_argument("--policy", default="chunks,vmm,pytorch")
    ap.add_argument("--save")
    ap.add_argument("--base")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()

    todo = [(h, p) for h in HALVES for p in sorted(glob.glob(os.path.join(a.rows, h, "*.csv")))]
    if not todo:
        sys.exit(f"target-rows.py: no traces under {a.rows}/tuned or {a.rows}/held "
                 "(tools/tracegen/target-rows.sh writes them)")
    base = load_saved(a.base) if a.base else None

    runs = []
    tty = sys.stderr.isatty()
    try:
        with ThreadPoolExecutor(max(1, a.jobs)) as ex:
            futures = {ex.submit(replay, a.tool, a.policy, path): (half, path) for half, path in todo}
            for done, fut in enumerate(as_completed(futures), 1):
                half, path = futures[fut]
                runs.append((half, os.path.basename(path)[:-4], fut.result()))
                if tty:
                    print(f"\rtarget-rows.py: {done}/{len(todo)} replayed", end="", file=sys.stderr, flush=True)
                elif done % 10 == 0 or done == len(todo):
                    print(f"target-rows.py: {done}/{len(todo)} replayed", file=sys.stderr, flush=True)
    except RuntimeError as e:
        sys.exit(f"\ntarget-rows.py: {e}")
    if tty:
        print(file=sys.stderr)
    rows = {}
    for half, name, text in runs:
        rows[(half, name)] = parse(text)
        if a.save:
            os.makedirs(os.path.join(a.save, half), exist_ok=True)
            with open(os.path.join(a.save, half, name + ".json"), "w") as f:
                f.write(text)

    for half in HALVES:
        keys = sorted(k for k in rows if k[0] == half)
        if not keys:
            continue
        met, notes, mirrored = {}, [], {}
        for k in keys:
            row = rows[k]
            py = row.get("pytorch") or (base or {}).get(k, {}).get("pytorch")
            if not py:
                sys.exit(f"target-rows.py: {k[1]}: no pytorch figures (add pytorch to --policy, or --base)")
            st = status(row, py)
            for t, ok in st.items():
                met[t] = met.get(t, 0) + ok
            for t, ok in spread(row, py).items():
                mirrored[t] = mirrored.get(t, 0) + ok
            missed = [t for t, ok in st.items() if not ok]
            if base and k in base:
                old_py = base[k].get("pytorch") or py
                old = status(base[k], old_py)
                changed = [t for t in st if t in old and st[t] != old[t]]
                if changed:
                    notes.append(f"  {k[1]:30s} {', '.join(changed)} changed; cards now {cards(row, py)}, "
                                 f"before {cards(base[k], old_py)}; misses now: {', '.join(missed) or 'none'}")
            elif missed:
                notes.append(f"  {k[1]:30s} misses {', '.join(missed)} (cards x PyTorch's: {cards(row, py)})")
        pols = ("chunks", "vmm", "pytorch")
        ms = {p: sum(rows[k][p]["modeled_driver_ms"] for k in keys if p in rows[k]) for p in pols}
        calls = {p: sum(rows[k][p]["driver_calls"] for k in keys if p in rows[k]) for p in pols}
        print(f"{half}: {len(keys)} rows" + ("; met: " if met else "") +
              ", ".join(f"{t} {n}" for t, n in sorted(met.items())))
        print("  modeled driver ms: " + ", ".join(f"{p} {v:.1f}" for p, v in ms.items() if v) +
              "; driver calls: " + ", ".join(f"{p} {v}" for p, v in calls.items() if v))
        if mirrored:
            print("  the baseline's spread, pytorch-down against pytorch: " +
                  ", ".join(f"{t} {n}" for t, n in mirrored.items()))
        for n in notes:
            print(n)


if __name__ == "__main__":
    main()

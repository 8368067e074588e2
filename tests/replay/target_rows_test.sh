#!/bin/sh
# tools/tracegen/target-rows.py on two small rows: it replays them, counts
# the targets per half, keeps each row's replay output (which parses as the
# replay's own JSON), and compared with its own saved run reports no change.
#   target_rows_test.sh VRAMSHIM GEN_DIR
set -eu
tool=$1 gen=$2
here=$(cd "$(dirname "$0")" && pwd)
score="python3 $here/../../tools/tracegen/target-rows.py"
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
mkdir -p "$w/rows/tuned" "$w/rows/held"
cp "$gen/serve-concat-diurnal.csv" "$w/rows/tuned/"
cp "$gen/serve-concat.csv" "$w/rows/held/"
fail() { echo "target_rows_test: $*"; cat "$w/out"; exit 1; }
$score --tool "$tool" --rows "$w/rows" --save "$w/saved" --jobs 2 >"$w/out" 2>"$w/err" ||
  fail "exit $?: $(cat "$w/err")"
counts='card chunks [01], card vmm [01], time chunks [01], time vmm [01]'
grep -q "^tuned: 1 rows; met: $counts\$" "$w/out" || fail "no tuned count"
grep -q '^held: 1 rows; met: ' "$w/out" || fail "no held-out count"
python3 - "$w/saved" <<'PY' || fail "saved output does not parse"
import json, sys, os
for half, name in (("tuned", "serve-concat-diurnal"), ("held", "serve-concat")):
    with open(os.path.join(sys.argv[1], half, name + ".json")) as f:
        pols = sorted(json.loads(l)["policy"] for l in f if l.strip())
    assert pols == ["chunks", "pytorch", "vmm"], pols
PY
# vmm alone, PyTorch's figures from the saved run: the same statuses
$score --tool "$tool" --rows "$w/rows" --policy vmm --base "$w/saved" --jobs 1 >"$w/out" 2>"$w/err" || fail "exit $?"
grep -q 'changed' "$w/out" && fail "a status changed against itself"
grep -q '^tuned: 1 rows; met: card vmm [01], time vmm [01]$' "$w/out" || fail "no vmm-only count"
# the baseline's spread: pytorch-down's cards against PyTorch's, counted as
# the saved replay output says
$score --tool "$tool" --rows "$w/rows" --policy pytorch,pytorch-down --save "$w/spread" --jobs 2 \
  >"$w/out" 2>"$w/err" || fail "exit $?: $(cat "$w/err")"
grep -q '^tuned: 1 rows$' "$w/out" || fail "pytorch alone: a target counted"
python3 - "$w/spread" "$w/out" <<'PY' || fail "spread counts differ from the saved cards"
import json, sys, os
out = open(sys.argv[2]).read().splitlines()
for half, name in (("tuned", "serve-concat-diurnal"), ("held", "serve-concat")):
    with open(os.path.join(sys.argv[1], half, name + ".json")) as f:
        card = {d["policy"]: d["smallest_card"] for d in map(json.loads, f) if d}
    want = ("  the baseline's spread, pytorch-down against pytorch: card <= PyTorch's %d, "
            "card <= 1.01 x PyTorch's %d" % (card["pytorch-down"] <= card["pytorch"],
                                             card["pytorch-down"] <= 1.01 * card["pytorch"]))
    i = out.index(half + ": 1 rows")
    assert want in out[i + 1:i + 3], (want, out)
PY
# no rows: a clear error
if $score --tool "$tool" --rows "$w/none" >"$w/out" 2>"$w/err"; then fail "no rows accepted"; fi
grep -q 'no traces under' "$w/err" || fail "no rows: $(cat "$w/err")"
echo "target_rows_test: ok"

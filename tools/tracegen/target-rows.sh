#!/bin/bash
# Writes issue 27's 90 rows into DIR (default ./target-rows): DIR/tuned holds
# the 24 traces the arena's rules were chosen on (T1-T6 at 3 and 30 steps,
# L1, L2, c1-c10), DIR/held the 66 it only reports on (H1-H6 at 3 and 30
# steps, the ninth round's six training loops and four ViT-L ones, the four
# real traces of ../shared/traces, the eight serving workloads, and the
# eight serving families of churn.sh at x1 and x10 requests, in stream
# order "f-" and with a copy stream "cs-"). Seeded: the same bytes on every
# run. The commands are the ones docs/benchmarks-replay.md gives round by
# round; tools/tracegen/target-rows.py replays and counts them.
#   tools/tracegen/target-rows.sh [DIR]     (about 90 s on 2 cores)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${1:-target-rows}
T=$dir/tuned H=$dir/held
mkdir -p "$T" "$H"
g() { python3 "$here/traingen.py" "$@" 2>/dev/null; }
s() { python3 "$here/tracegen.py" "$@" 2>/dev/null; }
both() {   # DIR NAME ARGS: the loop at 3 and at 30 optimizer steps
  local d=$1 n=$2; shift 2
  g "$@" --steps 3 -o "$d/$n-x3.csv"; g "$@" --steps 30 -o "$d/$n-x30.csv"
}
echo "target-rows: training loops (tenth round: T1-T6, H1-H6)" >&2
both "$T" T1 --model gpt2-medium --batch 2 --seq 2048 --attention flash --checkpoint --accum 8 --seed 21 &
both "$T" T2 --model gpt2 --layers 6 --batch 4 --seq 2048 --seq-mix --accum 4 --seed 21
both "$T" T3 --model 1b --batch 1 --seq 2048 --attention flash --mixed --accum 4 --seed 22 &
both "$T" T4 --model vit-l --batch 64 --seq 197 --checkpoint --accum 2 --seed 23
both "$T" T5 --model tiny --batch 32 --seq 512 --seq-mix --seed 24 &
both "$T" T6 --model gpt2 --batch 8 --seq 1024 --mixed --checkpoint --accum 2 --seed 25
both "$H" H1 --model gpt2-medium --batch 4 --seq 1024 --mixed --accum 4 --seed 31 &
both "$H" H2 --model 1b --layers 8 --batch 2 --seq 2048 --attention flash --checkpoint --seq-mix --seed 32
both "$H" H3 --model vit-l --batch 128 --seq 197 --mixed --attention flash --accum 4 --seed 33 &
both "$H" H4 --model gpt2 --batch 16 --seq 512 --checkpoint --seq-mix --accum 2 --seed 34
both "$H" H5 --model tiny --batch 64 --seq 256 --accum 8 --seed 35 &
both "$H" H6 --model gpt2-medium --batch 2 --seq 2048 --attention flash --mixed --checkpoint --seq-mix --seed 36
wait
echo "target-rows: training loops (eleventh round: L1, L2, c1-c10)" >&2
g --model gpt2 --layers 2 --batch 4 --seq 1024 --attention flash --checkpoint --accum 4 --seed 3 --steps 3 -o "$T/L1.csv" &
g --model gpt2 --layers 4 --batch 2 --seq 2048 --attention flash --checkpoint --accum 8 --seed 3 --steps 3 -o "$T/L2.csv"
c() { local n=$1; shift; g "$@" --steps 3 -o "$T/$n.csv"; }
c c1 --model gpt2 --layers 3 --batch 8 --seq 512 --attention flash --checkpoint --accum 4 --seed 41 &
c c2 --model gpt2 --layers 6 --batch 2 --seq 1024 --attention flash --checkpoint --accum 2 --seed 42
c c3 --model gpt2-medium --layers 4 --batch 4 --seq 1024 --attention flash --checkpoint --mixed --accum 4 --seed 43 &
c c4 --model 1b --layers 4 --batch 1 --seq 2048 --attention flash --checkpoint --accum 2 --seed 44
c c5 --model vit-l --layers 8 --batch 32 --seq 197 --checkpoint --accum 4 --seed 45 &
c c6 --model gpt2 --layers 2 --batch 8 --seq 1024 --checkpoint --accum 2 --seed 46
c c7 --model gpt2 --layers 4 --batch 4 --seq 1024 --attention flash --seq-mix --accum 4 --seed 47 &
c c8 --model tiny --batch 16 --seq 1024 --attention flash --checkpoint --accum 4 --seed 48
c c9 --model gpt2-medium --layers 6 --batch 2 --seq 2048 --attention flash --checkpoint --seq-mix --accum 2 --seed 49 &
c c10 --model gpt2 --layers 12 --batch 4 --seq 512 --mixed --accum 8 --seed 50
wait
echo "target-rows: training loops (ninth round: t-*, vit1-vit4)" >&2
g --model gpt2 --batch 8 --seq 1024 --steps 6 --seed 1 -o "$H/t-gpt2-naive.csv" &
g --model gpt2-medium --batch 4 --seq 1024 --attention flash --mixed --steps 6 --seed 2 -o "$H/t-gpt2m-flash-mixed.csv"
g --model 1b --batch 2 --seq 2048 --attention flash --mixed --checkpoint --steps 6 --seed 3 -o "$H/t-1b-ckpt.csv" &
g --model gpt2 --batch 16 --seq 512 --seq-mix --accum 2 --steps 6 --seed 4 -o "$H/t-gpt2-seqmix-accum.csv"
g --model gpt2-medium --batch 8 --seq 512 --mixed --seq-mix --steps 8 --seed 5 -o "$H/t-gpt2m-mixed-seqmix.csv" &
g --model 1b --batch 4 --seq 1024 --attention flash --accum 4 --steps 4 --seed 6 -o "$H/t-1b-accum.csv"
g --model vit-l --seq 197 --batch 64 --steps 4 --seed 1 -o "$H/vit1.csv" &
g --model vit-l --seq 197 --batch 128 --mixed --steps 5 --seed 2 -o "$H/vit2.csv"
g --model vit-l --seq 197 --batch 32 --mixed --attention flash --accum 4 --steps 4 --seed 3 -o "$H/vit3.csv" &
g --model vit-l --seq 197 --batch 96 --checkpoint --steps 6 --seed 4 -o "$H/vit4.csv"
wait
echo "target-rows: the real traces and the eight serving workloads" >&2
cp "$root"/../shared/traces/*.csv "$H/"
sh "$here/bench-workloads.sh" "$H" 2>/dev/null
# the three of tests/replay/CMakeLists.txt (replay_gen_workloads)
s --workload concat --model 7b --layers 4 --requests 40 --max-batch 8 --output-mean 64 --prompt-mean 128 --seed 11 \
  -o "$H/serve-concat.csv"
s --workload paged --model 7b --requests 150 --max-batch 32 --lengths zipf --arrival bursty --kv-pool-gib 4 --seed 12 \
  -o "$H/serve-paged.csv"
s --workload concat --model small --requests 200 --max-batch 16 --lengths bimodal --arrival diurnal --output-mean 48 \
  --seed 13 -o "$H/serve-concat-diurnal.csv"
echo "target-rows: churn.sh's serving families at x1 and x10, stream order and copy stream" >&2
sed -n '/^families() {/,/^F$/p' "$here/churn.sh" | grep -- '--workload' | while read -r name _half n args; do
  # shellcheck disable=SC2086
  { s $args --requests "$n" -o "$H/f-$name-x1.csv"
    s $args --requests $((n * 10)) -o "$H/f-$name-x10.csv"
    s $args --requests "$n" --copy-stream -o "$H/cs-$name-x1.csv"
    s $args --requests $((n * 10)) --copy-stream -o "$H/cs-$name-x10.csv"; }
done
nt=$(find "$T" -name '*.csv' | wc -l) nh=$(find "$H" -name '*.csv' | wc -l)
echo "target-rows: $nt tuned and $nh held-out traces in $dir" >&2
[ "$nt" -eq 24 ] && [ "$nh" -eq 66 ]

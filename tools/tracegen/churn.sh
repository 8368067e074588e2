#!/bin/sh
# The churn check of docs/benchmarks-replay.md: serving families of
# tracegen.py at x1, x10 and x100 their request count, and training
# families of traingen.py at x1, x10 and x100 their optimizer steps, each
# replayed with chunks, vmm and the pytorch baseline; one line per family,
# scale and policy: "FAMILY HALF SCALE POLICY DRIVER_CALLS PEAK_LIVE_MIB
# MODELED_MS FLOOR_MS". HALF says which half the arena's release policy was
# chosen on ("tuned") and which half only reports it ("held-out"; of the
# training families only the checkpointed, accumulating gpt2-medium loop is
# tuned: VMM's moving free handles at the limit only was chosen on it). No
# churn: calls at x100 <= 1.2 x the calls at x1 where live memory is
# stationary after warm-up (a training loop is, after its first step).
#   tools/tracegen/churn.sh [VRAMSHIM] [SCALES]
#   (defaults: build/tools/vramshim/vramshim, "1 10 100")
set -eu
here=$(dirname "$0")
tool=${1:-build/tools/vramshim/vramshim}
scales=${2:-1 10 100}
gen="python3 $here/tracegen.py"
train="python3 $here/traingen.py"

# name half requests-at-x1 tracegen arguments
families() {
  cat <<'F'
bursty-concat tuned 100 --workload concat --model 7b --layers 8 --grow-every 32 --max-batch 32 --lengths lognormal --arrival bursty --rate 4 --seed 3
diurnal-paged tuned 100 --workload paged --model 7b --layers 8 --max-batch 64 --lengths zipf --arrival diurnal --rate 2 --kv-pool-gib 4 --seed 4
prefix-concat tuned 60 --workload concat --model 13b --layers 6 --grow-every 32 --max-batch 16 --lengths bimodal --arrival poisson --rate 2 --prefix-share 0.6 --seed 5
multi-bursty tuned 60 --workload concat --model 7b --layers 4 --grow-every 32 --max-batch 16 --lengths lognormal --arrival bursty --rate 3 --models 3 --seed 6
spec-concat held-out 60 --workload concat --model 7b --layers 8 --grow-every 32 --max-batch 16 --lengths zipf --arrival poisson --rate 2 --spec-decode 4 --seed 7
spec-paged held-out 100 --workload paged --model 13b --layers 8 --max-batch 128 --lengths lognormal --arrival bursty --rate 6 --kv-pool-gib 6 --spec-decode 3 --seed 8
prefix-diurnal held-out 100 --workload concat --model small --layers 24 --grow-every 16 --max-batch 64 --lengths bimodal --arrival diurnal --rate 3 --prefix-share 0.8 --seed 9
multi-paged held-out 60 --workload paged --model 7b --layers 4 --max-batch 32 --lengths zipf --arrival bursty --rate 3 --models 2 --prefix-share 0.3 --kv-pool-gib 3 --seed 10
F
}
# name half steps-at-x1 traingen arguments
training() {
  cat <<'F'
train-gpt2 held-out 4 --model gpt2 --batch 8 --seq 1024
train-1b-ckpt held-out 2 --model 1b --batch 2 --seq 2048 --attention flash --mixed --checkpoint
train-gpt2-seqmix held-out 4 --model gpt2 --batch 16 --seq 512 --seq-mix --accum 2 --seed 4
train-gpt2m-ckpt-accum tuned 3 --model gpt2-medium --batch 2 --seq 2048 --attention flash --checkpoint --accum 8 --seed 21
train-gpt2-ckpt-seqmix held-out 3 --model gpt2 --batch 16 --seq 512 --checkpoint --seq-mix --accum 2 --seed 34
F
}

{ families | sed 's/^/serve /'; training | sed 's/^/train /'; } | while read -r kind name half n args; do
  for s in $scales; do
    if [ "$kind" = train ]; then size="--steps $((n * s))"; g=$train; else size="--requests $((n * s))"; g=$gen; fi
    # shellcheck disable=SC2086
    $g $args $size 2>/dev/null |
      "$tool" replay --quiet --json --no-search --policy chunks,vmm,pytorch - |
      python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    print(sys.argv[1], sys.argv[2], "x" + sys.argv[3], d["policy"], d["driver_calls"], d["peak_live"] >> 20,
          d.get("modeled_driver_ms", 0), d.get("floor_modeled_driver_ms", 0))
' "$name" "$half" "$s"
  done
done

#!/bin/sh
# The serving workloads of docs/benchmarks-replay.md, written into DIR
# (default ./serving-traces): the same bytes on every run (seeded).
#   tools/tracegen/bench-workloads.sh [DIR]
#   build/tools/vramshim/vramshim replay ../shared/traces/*.csv DIR/*.csv
# The simulated day (10^7 requests) is not written to a file; pipe it:
#   python3 tools/tracegen/tracegen.py --day --workload paged --model 7b --kv-pool-gib 40 |
#     build/tools/vramshim/vramshim replay --no-search -
set -eu
dir=${1:-serving-traces}
gen="python3 $(dirname "$0")/tracegen.py"
mkdir -p "$dir"
# transformers-like: per-request K/V caches per layer grown by torch.cat every token
$gen --workload concat --model 7b --requests 200 --max-batch 16 --lengths lognormal --arrival poisson --rate 4 \
  -o "$dir/serve-concat-7b.csv"
$gen --workload concat --model small --requests 1000 --max-batch 32 --lengths bimodal --arrival diurnal --seed 7 \
  -o "$dir/serve-concat-small.csv"
# vLLM-like: one KV pool at start, activations per engine step
$gen --workload paged --model 7b --requests 2000 --max-batch 64 --lengths zipf --arrival bursty --kv-pool-gib 40 \
  -o "$dir/serve-paged-7b.csv"
# a server with a copy stream (input ids staged on a second stream): the
# shim then cannot rely on stream order; the server's own syncs go to
# FILE.syncs beside each trace (docs/replay.md), which the replay counts
$gen --workload paged --model 7b --requests 2000 --max-batch 64 --lengths zipf --arrival bursty --kv-pool-gib 40 \
  --copy-stream -o "$dir/serve-paged-7b-copystream.csv"
$gen --workload concat --model small --requests 1000 --max-batch 32 --lengths bimodal --arrival diurnal --seed 7 \
  --copy-stream -o "$dir/serve-concat-small-copystream.csv"

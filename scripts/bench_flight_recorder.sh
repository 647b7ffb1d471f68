#!/usr/bin/env bash
# scripts/bench_flight_recorder.sh: what the flight recorder costs a training step. PAIRS pairs of
# the same job, recording off (ENGINE_FLIGHT_RECORDER=0) then on, alternating so that a drift of
# the machine falls on both; each run's images/s from --metrics (one epoch of the net, 2 ranks
# over shared memory, batch 96: a short step with several all_reduces, where recording weighs
# most). Prints each pair and the median ratio on/off.
#
#   scripts/bench_flight_recorder.sh             # 5 pairs
#   PAIRS=3 MODEL=simplecnn scripts/bench_flight_recorder.sh
#
# Quiet machine (a loaded one moves a run by more than what is measured here).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$repo/build}
pairs=${PAIRS:-5}
model=${MODEL:-net}
out=$(mktemp -d)
port=$((24000 + $$ % 4000))

run() {  # run ON: images/s of one epoch
  ENGINE_FLIGHT_RECORDER=$1 "$build/apps/launch" --nproc-per-node 2 --master-port "$port" -- \
    "$build/apps/train" --model "$model" --batch-size 96 --epochs 1 --threads 1 \
    --metrics "$out/m.jsonl" >"$out/run.log" 2>&1
  python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['images_per_s'])" \
    "$out/m.jsonl"
}

echo "pair  off images/s  on images/s  on/off"
ratios=()
for i in $(seq 1 "$pairs"); do
  off=$(run 0)
  on=$(run 1)
  ratio=$(python3 -c "print(f'{$on / $off:.4f}')")
  ratios+=("$ratio")
  printf '%4d  %12.0f  %11.0f  %s\n' "$i" "$off" "$on" "$ratio"
done
python3 -c "import statistics,sys; print('median on/off:', statistics.median(map(float, sys.argv[1:])))" \
  "${ratios[@]}"
rm -rf "$out"

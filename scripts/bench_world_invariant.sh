#!/usr/bin/env bash
# scripts/bench_world_invariant.sh: the cost of `train --world-invariant` against the default
# (docs/benchmarks.md, "The same bits at any world size"): for each model and world size, PAIRS
# alternating pairs of runs (default, then --world-invariant) of STEPS optimizer steps on
# Fashion-MNIST under launch over shared memory; each side's best images/s (from --metrics) as
# milliseconds per step, their ratio, and each side's comm_bytes_per_step.
#   scripts/bench_world_invariant.sh [BUILD_DIR]   (default build)
# Environment: MODELS (default "simplecnn net linear"), WORLDS (default "2 4"), PAIRS (default 4),
# STEPS (default 100), THREADS threads per rank (default 1), BATCH (default 128).
# Prints a markdown table. Run it on a quiet machine: nothing else building or training.
set -euo pipefail
build=${1:-build}
models=${MODELS:-"simplecnn net linear"}
worlds=${WORLDS:-"2 4"}
pairs=${PAIRS:-4}
steps=${STEPS:-100}
threads=${THREADS:-1}
batch=${BATCH:-128}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One run; appends "images_per_s comm_bytes_per_step" to $tmp/<name>.
one() {
  local name=$1 w=$2 m=$3
  shift 3
  "$build/apps/launch" --nproc-per-node "$w" -- "$build/apps/train" --model "$m" --steps "$steps" \
    --batch-size "$batch" --threads "$threads" --device cpu --transport shm \
    --metrics "$tmp/m.jsonl" "$@" >"$tmp/log" 2>&1 ||
    { echo "bench_world_invariant.sh: train failed ($m, W $w, $name):" >&2; tail -3 "$tmp/log" >&2; exit 1; }
  python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readlines()[-1]); print(r["images_per_s"], r["comm_bytes_per_step"])' \
    "$tmp/m.jsonl" >>"$tmp/$name"
  rm -f "$tmp/m.jsonl"
}

echo "| model | W | default ms/step | world-invariant ms/step | ratio | default bytes/step | world-invariant bytes/step |"
echo "|---|---|---|---|---|---|---|"
for m in $models; do
  for w in $worlds; do
    rm -f "$tmp/default" "$tmp/wi"
    for ((p = 0; p < pairs; ++p)); do
      one default "$w" "$m"
      one wi "$w" "$m" --world-invariant
    done
    python3 - "$tmp/default" "$tmp/wi" "$m" "$w" "$batch" <<'PY'
import sys
def best(path):
    rows = [tuple(map(float, l.split())) for l in open(path)]
    return max(r[0] for r in rows), rows[0][1]
(d, db), (i, ib) = best(sys.argv[1]), best(sys.argv[2])
b = float(sys.argv[5])
dm, im = b / d * 1e3, b / i * 1e3
print(f"| {sys.argv[3]} | {sys.argv[4]} | {dm:.2f} | {im:.2f} | {im / dm:.2f} | {db:,.0f} | {ib:,.0f} |")
PY
  done
done

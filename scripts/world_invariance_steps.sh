#!/usr/bin/env bash
# scripts/world_invariance_steps.sh: what each step towards `train --world-invariant` removes
# (docs/training.md, "For learners: why the bits differ, and what makes them agree"). For each
# setting, one process and W ranks under launch train MODEL for STEPS steps and save; the line
# says how the W-rank weights differ from the one-process weights (scripts/weights_diff.py):
#   default            the tutorials' data split, each rank its own dropout stream, the ring
#   same images        --sharding sampler --shuffle off --dropout 0: every step the same images
#                      at every W (the sampler deals them out), no dropout
#   world-invariant    --world-invariant: one order, batch-invariant kernels, the chunk tree
#   scripts/world_invariance_steps.sh [BUILD_DIR]   (default build)
# Environment: MODEL (default simplecnn), STEPS (60), WORLDS ("2 3 4"), THREADS per rank (1),
# BATCH (96: whole per-rank batches at W = 2, 3, 4, so every W steps on the same images).
set -euo pipefail
build=${1:-build}
model=${MODEL:-simplecnn}
steps=${STEPS:-60}
worlds=${WORLDS:-"2 3 4"}
threads=${THREADS:-1}
batch=${BATCH:-96}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
settings=("default|" "same images|--sharding sampler --shuffle off --dropout 0"
  "world-invariant|--world-invariant")
echo "| setting | W | how W ranks' weights differ from one process's after $steps steps ($model) |"
echo "|---|---|---|"
for s in "${settings[@]}"; do
  name=${s%%|*}
  flags=${s#*|}
  # shellcheck disable=SC2086  # flags is a list
  "$build/apps/train" --model "$model" --steps "$steps" --batch-size "$batch" --device cpu $flags --save "$tmp/one.st" \
    >"$tmp/log" 2>&1 || { echo "world_invariance_steps.sh: train failed ($name):" >&2; tail -3 "$tmp/log" >&2; exit 1; }
  for w in $worlds; do
    # shellcheck disable=SC2086
    "$build/apps/launch" --nproc-per-node "$w" -- "$build/apps/train" --model "$model" \
      --steps "$steps" --batch-size "$batch" --device cpu --threads "$threads" $flags --save "$tmp/w.st" >"$tmp/log" 2>&1 ||
      { echo "world_invariance_steps.sh: train failed ($name, W $w):" >&2; tail -3 "$tmp/log" >&2; exit 1; }
    echo "| $name | $w | $(python3 "$here/weights_diff.py" "$tmp/one.st" "$tmp/w.st") |"
  done
done

#!/usr/bin/env bash
# scripts/bench_ddp_options.sh: train's data-parallel options against none (docs/training.md,
# "Accumulation, ZeRO, SyncBatchNorm, compression"): each row is one run of EPOCHS epochs of
# Fashion-MNIST on WORLD ranks under launch, with its images/s, test accuracy, comm_bytes_per_step
# and optimizer_state_bytes from --metrics (the last epoch's line).
#   scripts/bench_ddp_options.sh [BUILD_DIR]   (default build)
# Environment:
#   MODELS   models (default "simplecnn convnet")
#   OPTIONS  option sets separated by ';' ("none" for no option; default: none, --accumulate 4,
#            --zero 1, --sync-bn, --grad-compression bf16, fp16 and powersgd:4)
#   WORLD    ranks (default 2); THREADS threads per rank (default 1); EPOCHS (default 1)
#   EXTRA    more train flags for every run (e.g. "--transport tcp")
# Prints a markdown table.
set -euo pipefail
build=${1:-build}
models=${MODELS:-"simplecnn convnet"}
options=${OPTIONS:-"none;--accumulate 4;--zero 1;--sync-bn;--grad-compression bf16;--grad-compression fp16;--grad-compression powersgd:4"}
world=${WORLD:-2}
threads=${THREADS:-1}
epochs=${EPOCHS:-1}
extra=${EXTRA:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "| model | option | images/s | test acc | comm_bytes_per_step | optimizer_state_bytes |"
echo "|---|---|---|---|---|---|"
IFS=';' read -r -a sets <<<"$options"
for m in $models; do
  for o in "${sets[@]}"; do
    flags=$o
    [[ $o == none ]] && flags=""
    # shellcheck disable=SC2086  # the option set and EXTRA are lists of flags
    "$build/apps/launch" --nproc-per-node "$world" -- "$build/apps/train" --model "$m" \
      --epochs "$epochs" --threads "$threads" --metrics "$tmp/m.jsonl" $flags $extra \
      >"$tmp/log" 2>&1 ||
      { echo "bench_ddp_options.sh: train failed ($m, $o):" >&2; tail -3 "$tmp/log" >&2; exit 1; }
    python3 - "$tmp/m.jsonl" "$m" "$o" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readlines()[-1])
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['images_per_s']:,.0f} | {r['test_acc']:.4f} | "
      f"{r['comm_bytes_per_step']:,.0f} | {r['optimizer_state_bytes']:,} |")
PY
  done
done

#!/usr/bin/env bash
# Images/s and test accuracy after one epoch: our train beside PyTorch's anchor
# (../shared/anchors/torch_mnist.py), same machine, same run, same thread count.
#   scripts/bench_vs_torch.sh [BUILD_DIR] [ANCHORS_DIR]
# MODELS, THREADS (per rank) and WORLD (ranks; 2 runs ours under launch with --sync bucketed and
# PyTorch's with --ddp, TORCH_ARGS="" for its per-parameter all_reduce) choose the runs.
# TORCH=0 leaves PyTorch out (ours only: comparing two builds of ours).
# Needs python3-torch for /usr/bin/python3 (see ../shared/anchors/README.md).
set -euo pipefail
build=${1:-build}
anchors=${2:-../shared/anchors}
models=${MODELS:-"simplecnn convnet net"}
threads=${THREADS:-"2 1"}
world=${WORLD:-1}
ddp=""
((world > 1)) && ddp=--ddp
torch_args=${TORCH_ARGS-$ddp}
with_torch=${TORCH:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "world $world, torch ${torch_args:-(no extra flags)}"
printf '%-10s %7s | %12s %8s | %12s %8s | %6s\n' model threads "ours img/s" "acc" "torch img/s" "acc" ratio
for t in $threads; do
  for m in $models; do
    if ((world > 1)); then
      "$build/apps/launch" --nproc-per-node "$world" -- "$build/apps/train" --model "$m" \
        --epochs 1 --threads "$t" --metrics "$tmp/m.jsonl" >/dev/null
    else
      "$build/apps/train" --model "$m" --epochs 1 --threads "$t" --metrics "$tmp/m.jsonl" >/dev/null
    fi
    ours=$(python3 -c "import json;r=json.loads(open('$tmp/m.jsonl').readlines()[-1]);print(r['images_per_s'],r['test_acc'])")
    if [[ $with_torch == 0 ]]; then
      printf '%-10s %7s | %12.0f %8.4f |\n' "$m" "$t" $ours
      continue
    fi
    torch=$(/usr/bin/python3 "$anchors/torch_mnist.py" --model "$m" --world "$world" --threads "$t" --epochs 1 $torch_args |
      python3 -c "import json,sys;r=json.loads(sys.stdin.readlines()[-1]);print(r['images_per_s'],r['test_acc'])")
    read -r oi oa <<<"$ours"
    read -r ti ta <<<"$torch"
    printf '%-10s %7s | %12.0f %8.4f | %12.0f %8.4f | %6.2f\n' "$m" "$t" "$oi" "$oa" "$ti" "$ta" \
      "$(python3 -c "print($oi/$ti)")"
  done
done

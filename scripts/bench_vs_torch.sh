#!/usr/bin/env bash
# Images/s and test accuracy after one epoch of Fashion-MNIST: our train beside PyTorch's baseline
# (bench/torch/torch_mnist.py), same machine, same run, same thread count, each the median
# of RUNS runs; and ours as a share of the FP32 limit (the FMA peak bench_kernels --peak measures
# at start, on every core the run uses).
#   scripts/bench_vs_torch.sh [BUILD_DIR] [BASELINES_DIR]   (defaults: build, bench/torch)
# Environment:
#   MODELS     models (default "simplecnn convnet net")
#   THREADS    threads per rank, one row each (default "2 1")
#   WORLD      ranks (default 1; 2 runs ours under launch with --sync bucketed and PyTorch's with
#              --ddp; TORCH_ARGS="" gives PyTorch's per-parameter all_reduce instead)
#   PRECISION  "fp32" (default), "bf16" (ours --precision bf16, PyTorch's --bf16 autocast) or both
#   RUNS       runs per row and side, the median is reported (default 3)
#   TORCH=0    leaves PyTorch out (ours only: comparing two builds of ours)
#   FORMAT=md  a markdown table (docs/benchmarks.md's), else aligned text
# Needs python3-torch for /usr/bin/python3 (see docs/benchmarks.md, "The PyTorch baselines").
set -euo pipefail
build=${1:-build}
baselines=${2:-bench/torch}
models=${MODELS:-"simplecnn convnet net"}
threads=${THREADS:-"2 1"}
world=${WORLD:-1}
precisions=${PRECISION:-fp32}
runs=${RUNS:-3}
with_torch=${TORCH:-1}
format=${FORMAT:-text}
ddp=""
if ((world > 1)); then ddp=--ddp; fi
torch_args=${TORCH_ARGS-$ddp}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for p in $precisions; do
  [[ $p == fp32 || $p == bf16 ]] || { echo "bench_vs_torch.sh: PRECISION '$p': expected fp32 or bf16" >&2; exit 2; }
done

# The CPU's generation as our machines come: AMD family 25 models 0x10-0x1f, 0x60-0x7f and
# 0xa0-0xaf are Zen 4, family 26 is Zen 5; anything else by its model name.
cpu_generation() {
  local fam model name
  fam=$(awk -F': ' '/^cpu family/ {print $2; exit}' /proc/cpuinfo)
  model=$(awk -F': ' '/^model\t/ {print $2; exit}' /proc/cpuinfo)
  name=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
  if [[ $fam == 26 ]]; then echo "Zen 5 ($name)"
  elif [[ $fam == 25 ]] && (((model >= 0x10 && model <= 0x1f) || (model >= 0x60 && model <= 0x7f) ||
    (model >= 0xa0 && model <= 0xaf))); then echo "Zen 4 ($name)"
  else echo "$name"; fi
}

commas() { python3 -c "print(f'{$1:,.0f}')"; }

# median of the numbers on stdin
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# "images_per_s test_acc train_flop_per_image" of our run: precision, threads per rank
ours_once() {
  local p=$1 t=$2 m=$3
  local args=(--model "$m" --epochs 1 --threads "$t" --metrics "$tmp/m.jsonl")
  [[ $p == bf16 ]] && args+=(--precision bf16)
  if ((world > 1)); then
    "$build/apps/launch" --nproc-per-node "$world" -- "$build/apps/train" "${args[@]}" >"$tmp/log" 2>&1
  else
    "$build/apps/train" "${args[@]}" >"$tmp/log" 2>&1
  fi || { echo "bench_vs_torch.sh: our train failed ($m, $p, $t threads):" >&2; tail -3 "$tmp/log" >&2; exit 1; }
  python3 -c "import json;r=json.loads(open('$tmp/m.jsonl').readlines()[-1]);print(r['images_per_s'],r['test_acc'],r['train_flop_per_image'])"
}

torch_once() {
  local p=$1 t=$2 m=$3 extra=()
  [[ $p == bf16 ]] && extra+=(--bf16)
  /usr/bin/python3 "$baselines/torch_mnist.py" --model "$m" --world "$world" --threads "$t" --epochs 1 \
    $torch_args "${extra[@]}" 2>"$tmp/torch.err" |
    python3 -c "import json,sys;r=json.loads(sys.stdin.readlines()[-1]);print(r['images_per_s'],r['test_acc'])" ||
    { echo "bench_vs_torch.sh: PyTorch's anchor failed ($m, $p, $t threads):" >&2; tail -3 "$tmp/torch.err" >&2; exit 1; }
}

# "median_images_per_s accuracy_of_that_run [flop]" over RUNS runs of fn
median_of_runs() {
  local fn=$1; shift
  : >"$tmp/runs"
  for ((i = 0; i < runs; ++i)); do "$fn" "$@" >>"$tmp/runs"; done
  local med
  med=$(cut -d' ' -f1 "$tmp/runs" | median)
  # the run closest to the median gives the accuracy (and the work per image)
  awk -v m="$med" '{d = $1 - m; d = d < 0 ? -d : d; if (NR == 1 || d < best) {best = d; line = $0}}
    END {$0 = line; $1 = m; print}' "$tmp/runs"
}

# The FP32 limit of W ranks x T threads: the FMA peak on W*T threads (at most the cores).
cores=$(nproc)
declare -A peak
for t in $threads; do
  n=$((world * t > cores ? cores : world * t))
  [[ -n ${peak[$n]:-} ]] && continue
  peak[$n]=$("$build/apps/bench_kernels" --peak --threads "$n" |
    python3 -c "import json,sys;print(json.loads(sys.stdin.read())['fp32_gflops'])")
done

echo "CPU: $(cpu_generation), $cores cores; FP32 limit (FMA peak, bench_kernels --peak):$(
  for n in "${!peak[@]}"; do printf ' %.1f GFLOP/s on %d thread(s);' "${peak[$n]}" "$n"; done)"
echo "world $world, torch ${torch_args:-(no extra flags)}, median of $runs run(s) each"
if [[ $format == md ]]; then
  echo "| model | ranks x threads | precision | ours img/s | % of FP32 limit | ours acc | PyTorch img/s | PyTorch acc | ours / PyTorch |"
  echo "|---|---|---|---|---|---|---|---|---|"
else
  printf '%-10s %7s %5s | %10s %9s %7s | %12s %7s | %6s\n' model "W x T" prec "ours img/s" "% limit" acc \
    "torch img/s" acc ratio
fi
for t in $threads; do
  n=$((world * t > cores ? cores : world * t))
  for p in $precisions; do
    for m in $models; do
      res=$(median_of_runs ours_once "$p" "$t" "$m")
      read -r oi oa flop <<<"$res"
      share=$(python3 -c "print(100 * $oi * $flop / (${peak[$n]} * 1e9))")
      ti="" ta="" ratio=""
      if [[ $with_torch != 0 ]]; then
        res=$(median_of_runs torch_once "$p" "$t" "$m")
        read -r ti ta <<<"$res"
        ratio=$(python3 -c "print(f'{$oi / $ti:.2f}')")
      fi
      if [[ $format == md ]]; then
        printf '| %s | %d x %d | %s | %s | %.0f%% | %.4f | %s | %s | %s |\n' "$m" "$world" "$t" "$p" \
          "$(commas "$oi")" "$share" "$oa" "${ti:+$(commas "$ti")}" "$ta" "$ratio"
      else
        printf '%-10s %7s %5s | %10.0f %8.1f%% %7.4f | %12s %7s | %6s\n' "$m" "$world x $t" "$p" \
          "$oi" "$share" "$oa" "${ti:+$(printf '%.0f' "$ti")}" "$ta" "$ratio"
      fi
    done
  done
done

#!/usr/bin/env bash
# scripts/gpu_bench.sh: the one GPU measuring run, made to fit a short lease (issues 22 and 23).
# On one H100 or H200, in at most 8 minutes (BUDGET_S, default 450 s of steps; every step has its
# own time limit too), in one go:
#   - train, each model (simplecnn, convnet, net) at --precision fp32 and bf16, 2 epochs, batch
#     128, one rank, --device cuda --metrics: with the defaults and with the new paths
#     (ENGINE_CUDA_KERNELS=engine ENGINE_CUDA_GRAPH=on ENGINE_DATA_ON_DEVICE=on, docs/knobs.md);
#     the figure is the 2nd epoch;
#   - two ranks on the GPU(s) (launch, ENGINE_CUDA_RING=ipc ENGINE_RING_PROTOCOL=auto) for simplecnn:
#     they must end where one rank ends (largest weight difference under 1e-4);
#   - the PyTorch anchor, bench/torch/torch_mnist_gpu.py, for each model: eager fp32 and bf16,
#     --compile fp32 (and bf16 while the budget lasts), same batch, 2 epochs (1 warm-up + 1 timed);
#   - bench_kernels --device cuda (each --cuda-kernels choice where the build has the flag);
#   - allreduce_bench --device cuda --world-size 2, 8 B to 256 MiB: the IPC ring with each
#     --cuda-ring-protocol (auto first, then ll, simple, events) without and then with an MPS daemon
#     (when one starts), the staged ring, NCCL where there are two GPUs.
# A flag this build lacks, a missing tool or a step past the budget gives a "skip: <reason>" row.
# scripts/gpu_bench_report.py turns the raw outputs into docs/gpu_bench/<gpu>-<commit>.md (tables,
# targets, every command, exit code and time) and .json (one object per row).
#
# Exits 0 when every step that ran passed, 1 otherwise, 2 at once when this machine has no NVIDIA
# GPU (NVIDIA_SMI names the nvidia-smi to ask; the test suite points it at /bin/false).
#
#   BUILD=0 BUILD_DIR=build-gpu scripts/gpu_bench.sh        # on a lent machine, build carried
#   BUDGET_S=300 OUT_DIR=/tmp/out KEEP_RAW=1 scripts/gpu_bench.sh
# BUILD=0 uses BUILD_DIR as it is (default build-gpu); otherwise it configures and builds there
# first (outside the budget). DATA_DIR: the dataset (default /usr/share/datasets/fashion-mnist);
# PYTHON: the python3 with PyTorch; KERNEL_FILTER: bench_kernels' --benchmark_filter (default all).
set -u
cd "$(dirname "$0")/.." || exit 1
SMI=${NVIDIA_SMI:-nvidia-smi}
if ! gpus=$("$SMI" --query-gpu=index,uuid,name,driver_version --format=csv,noheader 2>/dev/null) ||
  [ -z "$gpus" ]; then
  echo "gpu_bench: no NVIDIA GPU on this machine ($SMI lists none): nothing to measure here;" \
    "run it where nvidia-smi shows a GPU" >&2
  exit 2
fi

B=${BUILD_DIR:-build-gpu}
A="$B/apps"
DATA=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
PY=${PYTHON:-python3}
OUT_DIR=${OUT_DIR:-docs/gpu_bench}
BUDGET=${BUDGET_S:-450}
NGPU=$(printf '%s\n' "$gpus" | wc -l)
GPU_NAME=$(printf '%s\n' "$gpus" | head -n 1 | cut -d, -f3 | sed 's/^ *//')
SLUG=$(printf '%s' "$GPU_NAME" | tr '[:upper:]' '[:lower:]' | sed 's/nvidia//; s/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && COMMIT="$COMMIT-dirty"
RAW=$(mktemp -d /tmp/gpu_bench.XXXXXX)
MANIFEST="$RAW/steps.jsonl"
: >"$MANIFEST"
MPS_UP=0
cleanup() {
  [ $MPS_UP = 1 ] && mps_stop
  if [ "${KEEP_RAW:-0}" = 1 ]; then echo "gpu_bench: raw outputs kept in $RAW" >&2; else rm -rf "$RAW"; fi
}
trap cleanup EXIT
T0=$(date +%s)
N=0
FAILED=0

# JSON string of $1.
jstr() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\n\r\t')"; }

left() { echo $((BUDGET - ($(date +%s) - T0))); }

# skip KIND NAME REASON PARAMS: a row for a step that did not run.
skip() {
  N=$((N + 1))
  echo "== skip: $2: $3" >&2
  printf '{"n": %d, "kind": "%s", "name": %s, "skip": %s%s}\n' "$N" "$1" "$(jstr "$2")" \
    "$(jstr "$3")" "${4:+, $4}" >>"$MANIFEST"
}

# step KIND NAME NEED_S LIMIT_S PARAMS CMD...: runs CMD with a time limit of LIMIT_S (at most what
# is left of the budget) when at least NEED_S are left; its output goes to stepN.log. Sets RC
# (-1: skipped) and LOG. PARAMS: more JSON members for the step's row (e.g. "model": "net").
step() {
  local kind=$1 name=$2 need=$3 limit=$4 params=$5
  shift 5
  local rem
  rem=$(left)
  if [ "$rem" -lt "$need" ]; then
    skip "$kind" "$name" "budget: $rem s of $BUDGET s left, the step needs about $need s" "$params"
    RC=-1
    return
  fi
  [ "$rem" -lt "$limit" ] && limit=$rem
  N=$((N + 1))
  LOG="$RAW/step$N.log"
  echo "== $name: $*" >&2
  local t0
  t0=$(date +%s.%N)
  timeout --kill-after=5 "$limit" "$@" >"$LOG" 2>&1
  RC=$?
  local secs
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  [ $RC -ne 0 ] && FAILED=$((FAILED + 1))
  printf '{"n": %d, "kind": "%s", "name": %s, "cmd": %s, "rc": %d, "seconds": %s, "limit_s": %d, "log": "step%d.log"%s}\n' \
    "$N" "$kind" "$(jstr "$name")" "$(jstr "$*")" "$RC" "$secs" "$limit" "$N" "${params:+, $params}" >>"$MANIFEST"
}

# has FLAG PROGRAM: whether PROGRAM's --help names --FLAG (flags other work adds may be absent).
# HELP_NOTE says what --help gave when it did not (a program that does not start, a slow one).
has() {
  local out rc
  out=$(timeout 20 "$A/$2" --help 2>&1)
  rc=$?
  grep -q -- "--$1\b" <<<"$out" && return 0
  HELP_NOTE="$2 --help: exit $rc, $(printf '%s' "$out" | head -n 2 | tr '\n' ' ' | cut -c1-160)"
  return 1
}

# --- the build ----------------------------------------------------------------------------------
if [ "${BUILD:-1}" != 0 ]; then
  echo "== build in $B (outside the budget)" >&2
  if ! { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DENGINE_CUDA=ON >/dev/null &&
    cmake --build "$B" -j"$(nproc)" --target train launch allreduce_bench bench_kernels >/dev/null; }; then
    echo "gpu_bench: the build in $B failed" >&2
    exit 1
  fi
  T0=$(date +%s)
fi
if ! "$A/train" --help >/dev/null 2>&1; then
  echo "gpu_bench: $A/train does not run: build with CUDA in $B first (BUILD_DIR names it)" >&2
  exit 1
fi

# --- ours: train ------------------------------------------------------------------------------
# The engine variant forces the engine's kernels, the step as one CUDA graph and the data on the
# device (ENGINE_* variables, docs/knobs.md).
ENGINE_KNOBS=(ENGINE_CUDA_KERNELS=engine ENGINE_CUDA_GRAPH=on ENGINE_DATA_ON_DEVICE=on)
train_rows() {
  local model prec variant
  local -a knobs
  for model in simplecnn convnet net; do
    for prec in fp32 bf16; do
      for variant in defaults engine; do
        knobs=()
        local p="\"model\": \"$model\", \"precision\": \"$prec\", \"variant\": \"$variant\", \"metrics\": \"train-$model-$prec-$variant.jsonl\""
        [ $variant = engine ] && knobs=(env "${ENGINE_KNOBS[@]}")
        step train "train $model $prec $variant" 15 90 "$p, \"batch_size\": 128" "${knobs[@]}" "$A/train" \
          --model "$model" --precision "$prec" --epochs 2 --batch-size 128 --device cuda \
          --data-dir "$DATA" --metrics "$RAW/train-$model-$prec-$variant.jsonl"
      done
    done
  done
}

# Largest |a - b| over the float32 tensors of two safetensors files (python3's stdlib only).
max_abs_diff() { python3 scripts/gpu_bench_report.py --max-abs-diff "$1" "$2"; }

two_ranks() {
  local args="--model simplecnn --dropout 0 --sharding sampler --shuffle off --steps 20 --device cuda --data-dir $DATA --timeout 60"
  local p='"model": "simplecnn"'
  # shellcheck disable=SC2086
  step check "one rank, 20 steps (reference)" 10 60 "$p" "$A/train" $args --save "$RAW/one.safetensors"
  [ $RC -ne 0 ] && return
  # shellcheck disable=SC2086
  step check "two ranks, ENGINE_CUDA_RING=ipc ENGINE_RING_PROTOCOL=auto" 15 90 \
    "$p, \"compare\": [\"one.safetensors\", \"two.safetensors\"]" \
    env ENGINE_CUDA_RING=ipc ENGINE_RING_PROTOCOL=auto \
    "$A/launch" --nproc-per-node 2 --master-port 29771 -- "$A/train" $args \
    --save "$RAW/two.safetensors"
  [ $RC -ne 0 ] && return
  max_abs_diff "$RAW/one.safetensors" "$RAW/two.safetensors" >"$RAW/two_ranks_diff.txt" 2>&1
}

# --- the PyTorch anchor -------------------------------------------------------------------------
torch_rows() {
  local compile=$1 model prec flags
  if [ -z "${TORCH_OK:-}" ]; then
    TORCH_OK=0
    timeout 60 "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
      >/dev/null 2>&1 && TORCH_OK=1
  fi
  if [ "$TORCH_OK" = 0 ]; then
    local what="eager fp32 and bf16"
    [ "$compile" = 1 ] && what="--compile fp32"
    [ "$compile" = bf16 ] && what="--compile bf16"
    skip torch "PyTorch anchor, $what" "$PY has no PyTorch with CUDA"
    return
  fi
  local precs="fp32 bf16"
  [ "$compile" = 1 ] && precs="fp32"
  [ "$compile" = bf16 ] && precs="bf16"
  for model in simplecnn convnet net; do
    for prec in $precs; do
      flags=""
      [ "$prec" = bf16 ] && flags="--bf16"
      [ "$compile" != 0 ] && flags="$flags --compile"
      local c=false
      [ "$compile" != 0 ] && c=true
      # shellcheck disable=SC2086
      step torch "torch $model $prec $([ "$compile" != 0 ] && echo compile || echo eager)" \
        "$([ "$compile" != 0 ] && echo 40 || echo 15)" "$([ "$compile" != 0 ] && echo 150 || echo 90)" \
        "\"model\": \"$model\", \"precision\": \"$prec\", \"compile\": $c" \
        "$PY" bench/torch/torch_mnist_gpu.py --model "$model" --epochs 1 --batch-size 128 \
        --data "$DATA" --device cuda $flags
    done
  done
}

# --- bench_kernels ------------------------------------------------------------------------------
kernel_rows() {
  local choices="default" ck flags
  has cuda-kernels bench_kernels && choices="library engine"
  [ "$choices" = default ] && skip kernel "bench_kernels --cuda-kernels engine" \
    "bench_kernels lacks --cuda-kernels (this build; ${HELP_NOTE:-}): its default kernels only"
  for ck in $choices; do
    flags=""
    [ "$ck" != default ] && flags="--cuda-kernels $ck"
    # shellcheck disable=SC2086
    step kernel "bench_kernels --device cuda ($ck)" 20 90 \
      "\"cuda_kernels\": \"$ck\", \"json\": \"kernels-$ck.json\"" \
      "$A/bench_kernels" --device cuda $flags --benchmark_min_time=0.05 \
      --benchmark_filter="${KERNEL_FILTER:-.}" --benchmark_out="$RAW/kernels-$ck.json" \
      --benchmark_out_format=json
  done
}

# --- collectives ----------------------------------------------------------------------------------
SIZES="--min-bytes 8 --max-bytes 256M --step-factor 32 --timeout 60"
# bench NAME PARAMS FILE ARGS...: one allreduce_bench run of two ranks, rows to FILE.
bench() {
  local name=$1 params=$2 file=$3
  shift 3
  # shellcheck disable=SC2086
  step collective "$name" 10 60 "$params, \"json\": \"$file\"" "$A/allreduce_bench" \
    --world-size 2 --device cuda $SIZES --json "$RAW/$file" "$@"
}

# ipc_rows MODE [PROTOCOLS]: the IPC ring, each protocol (default: all four, auto first).
ipc_rows() {
  local mode=$1 proto
  for proto in ${2:-auto ll simple events}; do
    local mps=false
    [ "$mode" = mps ] && mps=true
    local p="\"backend\": \"ipc\", \"protocol\": \"$proto\", \"mps\": $mps"
    bench "allreduce_bench ipc $proto ($mode)" "$p" "ar-ipc-$proto-$mode.json" \
      --backend ring --ring-transport ipc --cuda-ring-protocol "$proto"
  done
}

staged_rows() {
  bench "allreduce_bench staged" '"backend": "staged", "protocol": "staged", "mps": false' \
    "ar-staged.json" --backend ring --ring-transport staged
  if [ "$NGPU" -ge 2 ]; then
    bench "allreduce_bench nccl" '"backend": "nccl", "protocol": "nccl", "mps": false' \
      "ar-nccl.json" --backend nccl
  else
    skip collective "allreduce_bench nccl" "NCCL needs a GPU per rank: $NGPU GPU here"
  fi
}

# An MPS daemon of our own (its pipe and log under $RAW), so that two ranks' kernels can run
# together on one GPU; MPS_NOTE says how starting it went.
mps_start() {
  local ctl
  ctl=$(command -v nvidia-cuda-mps-control) || { MPS_NOTE="nvidia-cuda-mps-control not found"; return 1; }
  export CUDA_MPS_PIPE_DIRECTORY="$RAW/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$RAW/mps-log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if timeout 20 "$ctl" -d >"$RAW/mps-start.log" 2>&1; then
    MPS_UP=1  # from here on the exit stops it, whatever follows
    if echo get_server_list | timeout 10 "$ctl" >>"$RAW/mps-start.log" 2>&1; then
      MPS_NOTE="started ($ctl -d, pipe $CUDA_MPS_PIPE_DIRECTORY)"
      return 0
    fi
    mps_stop
  fi
  MPS_NOTE="did not start: $(tr '\n' ' ' <"$RAW/mps-start.log" | cut -c1-200)"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  return 1
}
mps_stop() {
  echo quit | timeout 20 nvidia-cuda-mps-control >/dev/null 2>&1
  MPS_UP=0
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}

# Without MPS the spinning kernels (ll, simple) hold the GPU for whole time slices (each of their
# runs took 30-60 s on an H200): they come last, after the MPS rows and the staged ring.
collective_rows() {
  ipc_rows nomps "auto events"
  MPS_NOTE="not tried: the budget ran out first"
  if [ "$(left)" -ge 40 ] && mps_start; then
    ipc_rows mps
    mps_stop
  else
    skip collective "allreduce_bench ipc, with an MPS daemon" "MPS daemon $MPS_NOTE"
  fi
  staged_rows
  ipc_rows nomps "ll simple"
}

report() {
  {
    printf '{"gpu": %s, "gpus": %s, "ngpu": %d, "commit": %s, "host": %s, "date": %s, ' \
      "$(jstr "$GPU_NAME")" "$(jstr "$(printf '%s\n' "$gpus" | paste -sd';' -)")" "$NGPU" "$(jstr "$COMMIT")" \
      "$(jstr "$(hostname)")" "$(jstr "$(date -u '+%Y-%m-%d %H:%M UTC')")"
    printf '"budget_s": %d, "elapsed_s": %d, "mps": %s, "toolkit": %s, "data_dir": %s}\n' \
      "$BUDGET" "$(($(date +%s) - T0))" "$(jstr "${MPS_NOTE:-not tried}")" \
      "$(jstr "$(nvcc --version 2>/dev/null | tail -n 1)")" "$(jstr "$DATA")"
  } >"$RAW/info.json"
  mkdir -p "$OUT_DIR"
  python3 scripts/gpu_bench_report.py "$RAW" "$OUT_DIR/$SLUG-$COMMIT" ||
    { echo "gpu_bench: the report failed; raw outputs in $RAW" >&2; KEEP_RAW=1; FAILED=$((FAILED + 1)); }
}

stopped() {
  skip info "the rest" "stopped from outside (SIGTERM)"
  report
  exit 124
}
trap stopped TERM

# The order puts what the targets need first; what comes last is the first to meet the budget.
train_rows
torch_rows 0
two_ranks
collective_rows
torch_rows 1
kernel_rows
torch_rows bf16
report
echo "gpu_bench: $FAILED step(s) failed; report: $OUT_DIR/$SLUG-$COMMIT.md and .json" >&2
[ $FAILED -eq 0 ]
